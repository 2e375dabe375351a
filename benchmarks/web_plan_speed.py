"""A plan on the web page, timed in a real browser: click on Plan → the plan table drawn.

    python benchmarks/web_plan_speed.py                     # 5 fresh plans, 3 cached, 3 in-process searches
    python benchmarks/web_plan_speed.py --runs 7 --model llama2-7b --tokens 1e12 --deadline-days 30
    python benchmarks/web_plan_speed.py --baseline /tmp/base   # … and a previous checkout's server beside it

Starts `python -m trainrig serve` on a free port (this checkout's src/ first on PYTHONPATH), opens the page in
the system's Chromium (Playwright, as tests/web/browser_support.py does), picks the model preset, the tokens
and the deadline in plan mode (every other field as the page starts: all GPU types, at most 1,024 GPUs) and
presses Plan. The page itself records the time of the click (a capturing listener) and of the first animation
frame after the plan table holds the new answer (a MutationObserver), so Playwright's polling adds nothing.

The first click comes --settle-s (3 s) after the page is ready, the time a person takes to fill the form. With
--baseline, the other checkout's server runs too, with its own page, and the two take turns run by run, so a
machine that gets busier slows both alike: compare their ratio. Every fresh run asks a different question that
costs the same search: the tokens go up by one token each run (1e12, 1e12 + 1, …), so the server's result cache
cannot answer it (the search process has seen the same model and GPU counts before, as it would for a person
who changes the tokens; the "first" run is a search process's first plan). A run that repeats the last request
is timed separately: the server answers an identical request from its cache (`cached: true`).

Beside each run it prints where the time went, from the page's own requests:
  post    click → the answer to POST /api/plan/jobs (the input check in a worker, the job queued)
  job     the job's elapsed_s as the server reports it (created → the answer back from the search process)
  search  the search's own search_time_s, measured inside the search process (job − search: the worker's
          imports, the answer's JSON, the pipe)
  seen    the job done → the page has the poll that says so (the poll's wait; the answer's transfer)
  draw    that poll's answer in → the table drawn (JSON parse, rendering, the next frame)
and, last, the search alone in a process of its own (`trainrig.web.tasks` plan task, the catalog loaded, at the
search processes' nice value), min/median/max of 3. The summary's "of which not the search" is click → table
minus the search's own search_time_s: what the server and the page add to the search.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 2.0
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Installed in the page before each click: the click's time, and the first frame after the plan table holds
# the answer to this run (the CLI line names its tokens, and the running flag is gone).
WATCH = """(tokens) => {
  window.__plan = { clicked: null, drawn: null };
  performance.clearResourceTimings();
  const run = document.getElementById('run');
  run.addEventListener('click', () => { window.__plan.clicked = performance.now(); }, { capture: true, once: true });
  const done = () => !document.body.hasAttribute('data-plan-running')
    && !document.getElementById('plan-view').hidden
    && document.querySelector('[data-testid=plan-table] tbody tr') !== null
    && (document.querySelector('[data-testid=plan-cli]')?.textContent || '').includes('--tokens ' + tokens + ' ');
  const observer = new MutationObserver(() => {
    if (window.__plan.clicked === null || window.__plan.drawn !== null || !done()) return;
    window.__plan.drawn = -1;
    requestAnimationFrame(() => { window.__plan.drawn = performance.now(); observer.disconnect(); });
  });
  observer.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
}"""


def chromium_path() -> str:
    for candidate in (os.environ.get("TRAINRIG_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("no Chromium found: apt-get install chromium, or set TRAINRIG_CHROMIUM")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(source_root: Path) -> tuple[subprocess.Popen, str, float]:
    """`trainrig serve` on a free port; (process, url, seconds until /api/gpus answered)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(source_root / "src")}
    started_s = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "trainrig", "serve", "--port", str(port)], env=env,
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline_s = time.monotonic() + 60
    while time.monotonic() < deadline_s:
        try:
            with urllib.request.urlopen(f"{url}/api/gpus", timeout=2) as answer:
                if answer.status == 200:
                    return process, url, time.perf_counter() - started_s
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("trainrig serve did not answer within 60 s")


def tokens_text(tokens: float, run: int) -> str:
    """The tokens of fresh run `run`, as typed into the form (and as the page's CLI line writes them)."""
    value = tokens + run
    return f"{tokens:g}".replace("e+", "e") if run == 0 else str(int(value))


def cli_tokens(text: str) -> str:
    """How the page's CLI line writes these tokens (plan_job.js's flagValue: toExponential past 1e6)."""
    value = float(text)
    mantissa, exponent = f"{value:.15e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def plan_once(page, tokens: str) -> dict:
    """Press Plan with these tokens; the page's timings and the job's server-side numbers."""
    from playwright.sync_api import expect

    page.fill("#tokens", tokens)
    page.evaluate(WATCH, cli_tokens(tokens))
    seen: dict = {}

    def on_response(response) -> None:
        if "/api/plan/jobs/" in response.url and response.request.method == "GET":
            state = response.json()
            if state["status"] in ("done", "failed", "cancelled"):
                seen["state"] = state

    page.on("response", on_response)
    try:
        page.click("#run")
        expect(page.locator("[data-testid=plan-cli]")).to_contain_text(f"--tokens {cli_tokens(tokens)} ",
                                                                      timeout=120_000)
        expect(page.locator("body")).not_to_have_attribute("data-plan-running", "", timeout=120_000)
        for _ in range(500):
            marks = page.evaluate(MARKS)
            if marks["drawn"] is not None and marks["drawn"] > 0:
                break
            time.sleep(0.01)
        else:
            raise SystemExit("the page never drew the plan table")
    finally:
        page.remove_listener("response", on_response)
    state = seen.get("state") or {}
    if state.get("status") != "done":
        raise SystemExit(f"the plan did not finish: {state}")
    clicked, drawn = marks["clicked"], marks["drawn"]
    polls = [end for url, end in marks["requests"] if "/api/plan/jobs/" in url]
    posts = [end for url, end in marks["requests"] if "/api/plan/jobs/" not in url and "/api/plan/jobs" in url]
    post_end = posts[0] if posts else clicked
    seen_done = max(polls) if polls else post_end
    return {"wall_s": (drawn - clicked) / 1000, "cached": state["cached"], "post_s": (post_end - clicked) / 1000,
            "job_s": state["elapsed_s"], "search_s": (state["result"] or {}).get("search_time_s"),
            "seen_s": (seen_done - post_end) / 1000 - state["elapsed_s"], "draw_s": (drawn - seen_done) / 1000,
            "polls": len(polls), "configs": (state["result"] or {}).get("n_configurations_evaluated")}


# The click, the frame drawn, and the end of each request made since the click (the page's clock)
MARKS = """() => ({ ...window.__plan, requests: performance.getEntriesByType('resource')
  .filter((e) => e.startTime >= window.__plan.clicked).map((e) => [e.name, e.responseEnd]) })"""


def set_up(page, model: str, deadline_days: str) -> None:
    page.select_option("#model-preset", model)
    page.check("input[name=mode][value=plan]")
    page.fill("#deadline", deadline_days)


def search_alone(body: dict, repeats: int) -> list[float]:
    """Seconds of the plan task alone (what a search process runs), in a fresh process at the search processes'
    nice value (on a shared machine it decides their share of the CPU), the catalog loaded."""
    code = f"""
import json, os, time
from trainrig.web.app import worker_pools
from trainrig.web.settings import Settings
os.nice(worker_pools(Settings())[0].niceness)
from trainrig.catalog import load_catalog
from trainrig.web.inputs import PlanBody, plan_arguments
from trainrig.web.tasks import SEARCH_TASKS
load_catalog()
arguments = plan_arguments(PlanBody(**json.loads({json.dumps(json.dumps(body))})))
times = []
for _ in range({repeats}):
    started = time.perf_counter()
    SEARCH_TASKS["plan"](arguments)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{min(values):6.3f} / {statistics.median(values):6.3f} / {max(values):6.3f}"


def open_plan_page(playwright_browser, url: str, args) -> tuple:
    """A page on `url` set up for the plan, and the list its plan requests' bodies are appended to."""
    page = playwright_browser.new_page(viewport={"width": 1366, "height": 900})
    bodies: list[dict] = []
    page.on("request", lambda r: bodies.append(json.loads(r.post_data))
            if r.method == "POST" and "/api/plan/jobs" in r.url else None)
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    set_up(page, args.model, args.deadline_days)
    return page, bodies


def measure(sources: dict[str, Path], args) -> tuple[dict[str, list[tuple[str, dict]]], dict, dict[str, float]]:
    """Every source's server and page side by side; their runs interleaved run by run."""
    from playwright.sync_api import sync_playwright

    servers = {name: start_server(root) for name, root in sources.items()}
    rows: dict[str, list[tuple[str, dict]]] = {name: [] for name in sources}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            pages = {name: open_plan_page(browser, servers[name][1], args) for name in sources}
            time.sleep(args.settle_s)  # the time a person takes to fill the form: the server's start is behind it
            for run in range(args.runs + 1):
                for name, (page, _) in pages.items():
                    kind = "first" if run == 0 else "fresh"
                    rows[name].append((kind, plan_once(page, tokens_text(args.tokens, run))))
            for _ in range(args.cached_runs):
                for name, (page, _) in pages.items():
                    rows[name].append(("cached", plan_once(page, tokens_text(args.tokens, args.runs))))
            body = pages["this"][1][-1]
            browser.close()
    finally:
        for process, _, _ in servers.values():
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    return rows, body, {name: up_s for name, (_, _, up_s) in servers.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh (uncached) plans after the first")
    parser.add_argument("--cached-runs", type=int, default=3)
    parser.add_argument("--model", default="llama2-7b")
    parser.add_argument("--tokens", type=float, default=1e12)
    parser.add_argument("--deadline-days", default="30")
    parser.add_argument("--search-repeats", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=3.0,
                        help="seconds between the page being ready and the first click")
    parser.add_argument("--baseline", type=Path, help="a previous checkout whose server runs beside this one's, "
                                                      "its runs interleaved with this one's")
    args = parser.parse_args()
    sources = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    rows, body, up = measure(sources, args)
    alone = search_alone(body, args.search_repeats)

    print(f"web plan: {args.model}, {args.tokens:g} tokens, {args.deadline_days}-day deadline, page defaults "
          f"otherwise; request {json.dumps(body, sort_keys=True)}")
    print(f"{'version':8s} {'run':6s} {'click→table s':>13s} {'post s':>7s} {'job s':>6s} {'search s':>8s} "
          f"{'seen s':>7s} {'draw s':>7s} {'polls':>5s} {'configs':>9s} cached")
    for name in sources:
        print(f"{name:8s} server answered /api/gpus {up[name]:.2f} s after start")
        for kind, row in rows[name]:
            search = f"{row['search_s']:8.3f}" if row["search_s"] is not None and not row["cached"] else f"{'':8s}"
            print(f"{name:8s} {kind:6s} {row['wall_s']:13.3f} {row['post_s']:7.3f} {row['job_s']:6.3f} {search} "
                  f"{row['seen_s']:7.3f} {row['draw_s']:7.3f} {row['polls']:5d} {row['configs'] or 0:9,d} "
                  f"{row['cached']}")
    print()
    print(f"{'what':44s} {'goal s':>6s}  {'version':8s} {'min / median / max s':>22s}")
    medians = {}
    for name in sources:
        fresh = [row["wall_s"] for kind, row in rows[name] if kind == "fresh"]
        first = [row["wall_s"] for kind, row in rows[name] if kind == "first"]
        cached = [row["wall_s"] for kind, row in rows[name] if kind == "cached"]
        medians[name] = statistics.median(fresh) if fresh else float("nan")
        added = [row["wall_s"] - row["search_s"] for kind, row in rows[name] if kind == "fresh"]
        met = "met" if fresh and min(fresh) <= GOAL_S else "missed"
        if fresh:
            print(f"{'click → plan table, fresh request':44s} {GOAL_S:6.2f}  {name:8s} {spread(fresh)}  {met} "
                  f"({len(fresh)} runs)")
        if added:
            print(f"{'  of which not the search (− search_time_s)':44s} {'':6s}  {name:8s} {spread(added)}")
        print(f"{'click → plan table, first after start':44s} {GOAL_S:6.2f}  {name:8s} {first[0]:6.3f}")
        if cached:
            all_cached = all(row["cached"] for kind, row in rows[name] if kind == "cached")
            print(f"{'click → plan table, repeated (server cache)':44s} {GOAL_S:6.2f}  {name:8s} {spread(cached)}  "
                  f"({len(cached)} runs, cached: {all_cached})")
    if "baseline" in medians:
        print(f"{'':44s} {'':6s}  {'ratio':8s} fresh median baseline / this = "
              f"{medians['baseline'] / medians['this']:.2f}×")
    print(f"{'the search alone (plan task, own process)':44s} {'':6s}  {'this':8s} {spread(alone)}  "
          f"({len(alone)} runs)")
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; goal met = fastest fresh run within "
          "the goal")


if __name__ == "__main__":
    main()
