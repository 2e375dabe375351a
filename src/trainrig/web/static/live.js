// Live estimates: a change to the form re-runs the estimate after a short pause (debounced), so no submit is
// needed. Only the latest run's answer is shown (app.js numbers its requests and drops older answers).
// `document.body.dataset.settled` is "1" when no run is waiting or in flight: tests wait on it instead of
// on a clock.

const DEBOUNCE_MS = 300;

export function liveRunner(formElement, { isLive, run }) {
  let timer = null;
  let inFlight = 0;
  const settle = () => { document.body.dataset.settled = timer === null && inFlight === 0 ? "1" : "0"; };

  async function runNow(options = {}) {
    clearTimeout(timer);
    timer = null;
    inFlight += 1;
    settle();
    try {
      await run(options);
    } finally {
      inFlight -= 1;
      settle();
    }
  }

  function schedule(event) {
    const target = event.target;
    // the config.json box has its own button, and the GPU search sets the GPU select (which schedules)
    if (!isLive() || target.closest("#custom-model") || target.id === "gpu-search") return;
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; runNow({ live: true }); }, DEBOUNCE_MS);
    settle();
  }

  formElement.addEventListener("input", schedule);
  formElement.addEventListener("change", schedule);
  settle();
  return { runNow, schedule: () => schedule({ target: formElement }) };
}
