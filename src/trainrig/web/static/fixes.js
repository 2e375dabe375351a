// "Does not fit" made actionable: the changes that would make the job fit, each with an Apply button that
// sets the form and re-runs. The changes are the estimate's own `fit_fixes` and the answers of `trainrig
// fit` (the fewest GPUs of this type, the cheapest GPU type that fits). Nothing here judges a fix: each is a
// field of the API's answer.

const $ = (id) => document.getElementById(id);

// A job-file field of the advice → how to set the form for it
const CONTROLS = {
  loss: ["loss"], recompute: ["recompute"], zero: ["zero"], optimizer: ["optimizer"],
  activation_offload: ["activation-offload"], offload: ["offload"], micro_batch: ["micro-batch"], tp: ["tp"],
  pp: ["pp"], method: ["method"],
};

// The estimate's own fixes (its `fit_fixes`: each change that fits on its own, least costly in speed
// first) as [{label, changes: {control id: value}, source}]; a change the form cannot make is shown
// without a button (changes null)
export function adviceFixes(est) {
  if (est.fits || !est.fit_fixes) return [];
  return est.fit_fixes.map((fix, index) => {
    const changes = {};
    let settable = true;
    for (const [key, value] of Object.entries(fix.changes)) {
      const control = CONTROLS[key];
      if (!control) {
        settable = false;
        continue;
      }
      changes[control[0]] = value === null ? "" : typeof value === "boolean" ? value : String(value);
      if (key === "method") changes.quantization = "";  // the method's own default quantization
    }
    const label = `${fix.what_if} (${fix.memory_per_gpu_gib.toFixed(1)} GiB per GPU)`;
    return { label, changes: settable ? changes : null, source: `advice-${index}` };
  });
}

// What `trainrig fit` found that makes this job fit: a smaller micro-batch, more GPUs of this type, or the
// cheapest type
export function fitFixes(fit) {
  const fixes = [];
  const micro = fit.micro_batch;
  if (micro.value !== null && micro.value < micro.job_value) {
    fixes.push({ label: `micro-batch ${micro.value}, the largest that fits`, changes: { "micro-batch": String(micro.value) },
      source: "micro-batch" });
  }
  const gpus = fit.n_gpus_needed;
  if (gpus.value !== null && gpus.value !== gpus.job_value) {
    fixes.push({ label: `${gpus.value} × ${fit.gpu}`, changes: { "n-gpus": String(gpus.value) }, source: "n-gpus" });
  }
  const best = fit.cheapest_gpu.ranked[0];
  if (best && fit.cheapest_gpu.gpu !== null && !(best.is_job_gpu && best.n_gpus === gpus.value)) {
    fixes.push({ label: `${best.n_gpus} × ${best.gpu}, the cheapest GPU type that fits`,
      changes: { gpu: best.gpu, "n-gpus": String(best.n_gpus) }, source: "cheapest" });
  }
  return fixes;
}

// Set the form's controls; each gets the events a person's change would fire, so the page's own handlers
// (the method's fields, the GPU's price) follow
export function applyChanges(changes) {
  for (const [id, value] of Object.entries(changes)) {
    const control = $(id);
    if (!control) continue;
    if (control.type === "checkbox") control.checked = Boolean(value);
    else if (control.tagName === "SELECT" && ![...control.options].some((option) => option.value === String(value))) {
      const option = document.createElement("option");
      option.value = String(value);
      option.textContent = String(value);
      control.appendChild(option);
      control.value = String(value);
    } else control.value = String(value);
    const folded = control.closest("details");
    if (folded) folded.open = true;  // the changed control is in view
    control.dispatchEvent(new Event("input", { bubbles: true }));
    control.dispatchEvent(new Event("change", { bubbles: true }));
  }
}

// The list under the verdict: one line per fix, with Apply where the form can make the change
export function showFixes(fixes, onApply) {
  const box = $("fixes");
  box.hidden = fixes.length === 0;
  if (!fixes.length) {
    box.replaceChildren();
    return;
  }
  const heading = document.createElement("p");
  heading.className = "fixes-heading";
  heading.textContent = "Ways to make it fit:";
  const list = document.createElement("ul");
  list.replaceChildren(...fixes.map((fix, index) => {
    const item = document.createElement("li");
    item.dataset.testid = "fix";
    const text = document.createElement("span");
    text.textContent = fix.label;
    item.append(text);
    if (fix.changes) {
      const apply = document.createElement("button");
      apply.type = "button";
      apply.className = "secondary small apply";
      apply.textContent = "Apply";
      apply.dataset.testid = `apply-${index}`;
      apply.setAttribute("aria-label", `Apply: ${fix.label}`);
      apply.addEventListener("click", () => onApply(fix));
      item.append(" ", apply);
    }
    return item;
  }));
  box.replaceChildren(heading, list);
}

// The fixes now on the page, plus those of a later answer (the fit search comes after the estimate)
export function addFixes(fixes, onApply, shown) {
  const kept = shown.filter((fix) => !fixes.some((other) => other.source === fix.source));
  const all = [...kept, ...fixes];
  showFixes(all, onApply);
  return all;
}
