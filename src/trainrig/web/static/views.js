// What the page shows of an estimate and of a plan. Nothing here computes a result: every number is a
// field of the API's JSON (the CLI's --json), formatted.

import * as f from "./format.js";
import { legend, memoryBar, stackedBar, timeCostChart } from "./charts.js";
import { addFixes, adviceFixes, fitFixes, showFixes } from "./fixes.js";

const $ = (id) => document.getElementById(id);

const MEMORY_PARTS = [["weights", "weights"], ["gradients", "gradients"], ["optimizer", "optimizer"],
  ["activations", "activations"], ["other", "other"]];
const STEP_LABELS = {
  compute: "compute", launch_overhead: "kernel launches", tp_comm: "tensor-parallel comm",
  cp_comm: "context-parallel comm", ep_comm: "expert-parallel comm", pp_comm: "pipeline comm",
  pp_bubble: "pipeline bubble", dp_comm: "data-parallel comm", data_loading: "data loading",
  host_transfer: "host transfer", checkpoint: "checkpoints", cpu_optimizer: "CPU optimizer", other: "other",
};
const RESOURCE_LABELS = {
  compute: "GPU compute", hbm_bandwidth: "GPU memory bandwidth", intra_node: "link inside a node",
  inter_node: "network between nodes", pcie: "PCIe host link", cpu: "CPU", storage: "storage",
};
// The estimate on the page, its fixes and what Apply does: the fit answer, which comes later, adds its fixes
const current = { est: null, fixes: [], onApply: null };
const NODE_PARTS = [["cpu", "CPU cores"], ["ram", "RAM"], ["storage", "Storage"], ["network", "Network"]];

function element(tag, { className, text, testid, value } = {}) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  if (testid) node.dataset.testid = testid;
  if (value !== undefined && value !== null) node.dataset.value = String(value);
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.appendChild(cell);
    else td.textContent = cell;
    tr.appendChild(td);
  }
  return tr;
}

// ---- one estimate --------------------------------------------------------------------------------------

export function showEstimate(est, { title, node = null, nodeMessage = null, cli, onApply = null }) {
  $("estimate-view").hidden = false;  // first, so the charts measure their width
  markStale(false);
  $("estimate-title").textContent = title;
  const verdict = $("fit-verdict");
  verdict.className = `verdict ${est.fits ? "good" : "bad"}`;
  verdict.textContent = est.fits
    ? `Fits: ${f.gibOf(est.memory_per_gpu_gib, est.memory_capacity_gib)} per GPU.`
    : `Does not fit: ${est.fit_message}`;
  current.est = est;
  current.onApply = onApply;
  current.fixes = onApply ? adviceFixes(est) : [];
  showFixes(current.fixes, onApply);
  showCards(est);
  showMemory(est);
  showStep(est);
  $("bottleneck").textContent = est.bottleneck_message;
  showSpeedups(est.speedup_if_2x);
  showWhatIfs(est);
  showNode(node, nodeMessage);
  showNotes(est);
  $("cli-command").textContent = cli;
}

// The result on the page is for earlier inputs (the last run failed): dimmed and said so
export function markStale(stale) {
  const views = ["estimate-view", "compare-view", "plan-view"].map((id) => $(id)).filter(Boolean);
  $("stale-note").hidden = !stale || views.every((view) => view.hidden);  // said only where a result is left
  for (const view of views) view.classList.toggle("stale", stale);
}

// Time and cost of a job that does not fit are what it would take if it did: shown, dimmed and labelled
const IF_IT_FIT = ["step-time", "throughput", "mfu", "total-time", "gpu-hours", "cost"];

function showCards(est) {
  const warnings = f.implausible(est);
  const cards = [
    ["memory", "Memory per GPU", f.gib(est.memory_per_gpu_gib), est.memory_per_gpu_gib,
      `of ${f.gib(est.memory_capacity_gib)}`],
    ["step-time", "Step time", f.duration(est.step_time_s), est.step_time_s,
      `${est.config.grad_accum} micro-batch${est.config.grad_accum === 1 ? "" : "es"} per GPU`],
    ["throughput", "Throughput", `${f.count(est.tokens_per_s)} tok/s`, est.tokens_per_s,
      `${f.count(est.tokens_per_s_per_gpu)} per GPU`],
    ["mfu", "MFU", f.percent(est.mfu), est.mfu, `${est.model_tflops_per_gpu.toFixed(0)} TFLOP/s per GPU`],
    ["total-time", "Total time", f.duration(est.total_time_s), est.total_time_s,
      est.total_time_s === null ? "give tokens" : "to train the tokens"],
    ["gpu-hours", "GPU-hours", f.bigCount(est.gpu_hours), est.gpu_hours,
      `${est.config.n_gpus} × ${est.config.gpu}`],
    ["cost", "Cost", f.money(est.cost_usd), est.cost_usd,
      est.price_usd_per_gpu_hour ? `at ${f.usd(est.price_usd_per_gpu_hour)}/GPU-h` : "give a price"],
  ];
  $("cards").replaceChildren(...cards.map(([id, label, shown, raw, sub]) => {
    const hypothetical = !est.fits && IF_IT_FIT.includes(id);
    const card = element("div", { className: `card${hypothetical ? " if-fit" : ""}` });
    card.append(element("span", { className: "card-label", text: hypothetical ? `${label}, if it fit` : label }),
      element("span", { className: "card-value", text: shown, testid: id, value: raw }),
      element("span", { className: "card-sub", text: sub }));
    if (warnings[id]) card.append(element("span", { className: "card-warning", text: `⚠ ${warnings[id]}`, testid: `${id}-warning` }));
    return card;
  }));
}

function showMemory(est) {
  const parts = MEMORY_PARTS.map(([key, label], index) => ({
    label, value: est.memory_breakdown_gib[key] || 0, colour: index,
  }));
  memoryBar($("memory-bar"), parts, { capacity: est.memory_capacity_gib, format: f.gib, tick: gibTick,
    label: "memory per GPU" });
  legend($("memory-legend"), parts, f.gib);
}

// Axis labels: whole GiB (or TiB, PiB past 1,024), no decimals
function gibTick(value) {
  if (value === 0) return "0";
  const text = f.gib(value);
  return text.replace(/\.0 /, " ");
}

function showStep(est) {
  const parts = Object.entries(est.step_breakdown_s).map(([key, value], index) => ({
    label: STEP_LABELS[key] || key, value, colour: index % 12,
  }));
  stackedBar($("step-bar"), parts, { format: f.duration, label: "step time breakdown" });
  legend($("step-legend"), parts, f.duration);
}

function showSpeedups(speedups) {
  const entries = Object.entries(speedups).sort((a, b) => b[1] - a[1]);
  const best = Math.max(2, ...entries.map(([, factor]) => factor));
  $("speedups").replaceChildren(...entries.map(([key, factor]) => {
    const line = element("div", { className: "speedup" });
    const bar = element("span", { className: "speedup-bar" });
    const fill = element("span", { className: "speedup-fill" });
    fill.style.width = `${Math.max(1, ((factor - 1) / (best - 1)) * 100)}%`;
    bar.appendChild(fill);
    line.append(element("span", { className: "speedup-label", text: RESOURCE_LABELS[key] || key }), bar,
      element("span", { className: "speedup-value", text: f.times(factor) }));
    return line;
  }));
}

function showWhatIfs(est) {
  const variants = est.what_if || [];
  $("what-if-section").hidden = variants.length === 0;
  const rows = [["base", est], ...variants.map((v) => [v.change, v.estimate])].map(([change, e]) => row([
    change, e.fits ? "yes" : "no", memoryCell(e), f.duration(e.step_time_s),
    change === "base" ? "" : f.times(e.step_time_s / est.step_time_s), f.duration(e.total_time_s),
    f.money(e.cost_usd), RESOURCE_LABELS[e.bottleneck] || e.bottleneck,
  ]));
  $("what-if-table").tBodies[0].replaceChildren(...rows);
}

// A what-if row's memory per GPU, with a mini bar against the capacity (the part past it hatched)
function memoryCell(e) {
  const box = element("span", { className: "memory-cell" });
  const bar = element("span", { className: "mini-chart" });
  const parts = MEMORY_PARTS.map(([key, label], index) => ({ label, value: e.memory_breakdown_gib[key] || 0,
    colour: index }));
  memoryBar(bar, parts, { capacity: e.memory_capacity_gib, format: f.gib, tick: gibTick, label: "memory per GPU",
    compact: true });
  box.append(element("span", { text: f.gib(e.memory_per_gpu_gib) }), bar);
  return box;
}

function showNode(node, message) {
  $("node-section").hidden = !node && !message;
  $("node-message").textContent = node ? "" : `No node sizing: ${message}`;
  $("node").replaceChildren();
  if (!node) return;
  const values = {
    cpu: `${node.cpu_cores} cores`, ram: `${node.ram_gb} GB`, storage: `${node.storage}, ${node.storage_tb} TB`,
    network: node.network ? `${node.network} (${f.whole(node.network_gbps_per_node)} Gb/s)` : "one node: none needed",
  };
  $("node").replaceChildren(...NODE_PARTS.flatMap(([key, label]) => {
    const term = element("dt", { text: label });
    const detail = element("dd");
    detail.append(element("strong", { text: values[key], testid: `node-${key}` }),
      element("span", { className: "reason", text: node.reasons[key] || "" }));
    return [term, detail];
  }));
}

function showNotes(est) {
  $("notes-section").hidden = est.warnings.length + est.notes.length === 0;
  $("warnings").replaceChildren(...est.warnings.map((text) => element("li", { text })));
  $("notes").replaceChildren(...est.notes.map((text) => element("li", { text })));
}

// ---- what fits (`trainrig fit --json`) -----------------------------------------------------------------

export function hideFit() {
  $("fit-section").hidden = true;
}

export function showFitPending() {
  const status = $("fit-status");
  status.className = "fit-status";
  status.replaceChildren(element("span", { text: "…" }), element("span", { className: "sr-only", text: " working out what fits" }));
  status.hidden = false;
  $("fit-answers").replaceChildren();
  $("fit-notes").replaceChildren();
  $("fit-section").setAttribute("aria-busy", "true");
  $("fit-section").hidden = false;
}

export function showFitError(error) {
  const status = $("fit-status");
  const field = error.field && !String(error.message).includes(error.field) ? `${error.field}: ` : "";
  status.className = "fit-status error-inline";
  status.textContent = `Could not work out what fits: ${field}${error.message}`;
  status.hidden = false;
  $("fit-answers").replaceChildren();
  $("fit-notes").replaceChildren();
  $("fit-section").removeAttribute("aria-busy");
  $("fit-section").hidden = false;
}

export function showFit(fit) {
  $("fit-status").hidden = true;
  if (current.est && !current.est.fits && current.onApply) {
    current.fixes = addFixes(fitFixes(fit), current.onApply, current.fixes);
  }
  const mb = fit.micro_batch;
  const seq = fit.seq_len;
  const gpus = fit.n_gpus_needed;
  const entries = [
    ["Largest micro-batch", "micro-batch", mb.value, mb.value === null ? "none fits" : f.whole(mb.value),
      `this job: ${f.whole(mb.job_value)}`, memoryOf(mb), mb.notes],
    ["Longest sequence", "seq-len", seq.value, seq.value === null ? "none fits" : `${f.whole(seq.value)} tokens`,
      `this job: ${f.whole(seq.job_value)}`, memoryOf(seq), seq.notes],
    ["Fewest GPUs", "n-gpus", gpus.value, gpus.value === null ? "none fits" : `${f.whole(gpus.value)} × ${fit.gpu}`,
      `this job: ${f.whole(gpus.job_value)}`, memoryOf(gpus), gpus.notes],
    cheapestEntry(fit.cheapest_gpu),
  ];
  $("fit-answers").replaceChildren(...entries.flatMap(([label, id, raw, shown, job, memory, notes]) => {
    const detail = element("dd");
    detail.append(element("strong", { text: shown, testid: `fit-${id}`, value: raw }));
    if (job) detail.append(" ", element("span", { className: "fit-job", text: `(${job})` }));
    if (memory) detail.append(element("span", { className: "reason", text: memory, testid: `fit-${id}-memory` }));
    for (const note of notes) detail.append(element("span", { className: "reason fit-note", text: note }));
    return [element("dt", { text: label }), detail];
  }));
  $("fit-notes").replaceChildren(...fit.notes.map((text) => element("li", { text })));
  $("fit-section").removeAttribute("aria-busy");
  $("fit-section").hidden = false;
}

function memoryOf(answer) {
  if (answer.memory_per_gpu_gib === null) return "";
  const at = answer.value === null ? " at the smallest value tried" : "";
  return `${f.gibOf(answer.memory_per_gpu_gib, answer.memory_capacity_gib)} per GPU${at}`;
}

function cheapestEntry(cheapest) {
  const best = cheapest.ranked[0];
  const notes = [...cheapest.notes];
  if (!best || cheapest.gpu === null) {
    if (cheapest.unpriced.length) {
      notes.unshift(`fits on ${cheapest.unpriced.map((t) => `${t.n_gpus} × ${t.gpu}`).join(", ")}, without a price`);
    }
    return ["Cheapest GPU type", "cheapest", null, "no priced type fits", "", "", notes];
  }
  const costs = [`${f.usd(best.usd_per_hour)}/hour`];
  if (best.cost_usd !== null) costs.push(`the run ${f.money(best.cost_usd)}`);
  if (best.offer) notes.unshift(`${best.offer}, ${f.usd(best.usd_per_gpu_hour)}/GPU-h`);
  return ["Cheapest GPU type", "cheapest", best.gpu, `${f.whole(best.n_gpus)} × ${best.gpu}`,
    `${costs.join(", ")}${best.is_job_gpu ? "; this job's GPU" : ""}`,
    `${f.gibOf(best.memory_per_gpu_gib, best.memory_capacity_gib)} per GPU`, notes];
}

// ---- a plan ---------------------------------------------------------------------------------------------

export function gpuColours(names) {
  const colours = new Map();
  for (const name of names) if (!colours.has(name)) colours.set(name, colours.size % 12);
  return colours;
}

export function showPlanSummary(result) {
  const message = $("plan-message");
  message.className = `verdict ${result.feasible ? "good" : "bad"}`;
  message.textContent = result.feasible
    ? `${f.whole(result.n_configurations_feasible)} configurations meet the constraints; the best by `
      + `${result.objective} are below.`
    : result.message;
  const searched = result.search_time_s === null ? "" : ` in ${result.search_time_s.toFixed(1)} s`;
  $("plan-stats").textContent = `Searched ${f.whole(result.n_configurations_evaluated)} configurations`
    + `${searched}; ${f.whole(result.n_configurations_fitting)} fit in memory.`;
  $("plan-view").hidden = false;
}

export function showPlanChart(result, colours, { onPoint, onLeave, onPlan }) {
  const plans = result.plans.filter((p) => p.estimate.total_time_s && p.estimate.cost_usd).map((p) => ({
    rank: p.rank, total_time_s: p.estimate.total_time_s, cost_usd: p.estimate.cost_usd,
    point: { gpu: p.gpu, n_gpus: p.n_gpus, offer: p.offer ? p.offer.id : null, total_time_s: p.estimate.total_time_s,
      cost_usd: p.estimate.cost_usd, on_front: null, meets_constraints: p.meets_constraints, rank: p.rank },
  }));
  const container = $("plan-chart");
  if (!result.points.length && !plans.length) {
    container.replaceChildren(element("p", { className: "hint", text: "No configuration with a known price to draw." }));
    $("plan-legend").replaceChildren();
    return;
  }
  const constraints = result.constraints || {};
  timeCostChart(container, {
    points: result.points, plans, colourOf: (gpu) => colours.get(gpu) ?? 0, onPoint, onLeave, onPlan,
    deadlineS: constraints.deadline_days ? constraints.deadline_days * 86400 : null,
    budgetUsd: constraints.budget_usd || null,
  });
  $("plan-legend").replaceChildren(...[...colours].map(([gpu, colour]) => {
    const item = element("span", { className: "legend-item" });
    item.append(element("span", { className: `swatch round bg-c${colour}` }), gpu);
    return item;
  }));
}

export function pointDetails(point) {
  const lines = [`${point.n_gpus} × ${point.gpu}`];
  if (point.rank) lines.unshift(`Plan ${point.rank}`);
  if (point.offer) lines.push(`offer: ${point.offer}`);
  lines.push(`time: ${f.duration(point.total_time_s)}`, `cost: ${f.money(point.cost_usd)}`);
  if (point.on_front) lines.push("on the time–cost front");
  lines.push(point.meets_constraints ? "meets the constraints" : "misses a constraint");
  return lines;
}

// A cell's text with a small note under it (why a plan has no price, how its layout scales), or the text alone
function withNote(text, noteText) {
  if (!noteText) return text;
  const span = document.createElement("span");
  span.append(text, element("span", { className: "reason", text: noteText }));
  return span;
}

export function showPlanTable(result, selectedRank, onSelect) {
  const rows = result.plans.map((plan) => {
    const choose = element("button", { className: "link", text: String(plan.rank), testid: `plan-row-${plan.rank}` });
    choose.type = "button";
    choose.setAttribute("aria-label", `Show plan ${plan.rank}`);
    choose.addEventListener("click", () => onSelect(plan.rank));
    const layout = plan.layout;
    const tr = row([
      choose, f.duration(plan.estimate.total_time_s), f.money(plan.estimate.cost_usd),
      `${plan.n_gpus} × ${plan.gpu} (${plan.n_nodes} node${plan.n_nodes > 1 ? "s" : ""})`,
      withNote(plan.offer ? `${plan.offer.provider} ${plan.offer.instance}`
        + (plan.offer.usd_per_gpu_hour == null ? "" : `, ${f.usd(plan.offer.usd_per_gpu_hour)}/GPU-h`)
        : "—", plan.no_price_reason),
      withNote(`tp ${layout.tp} · pp ${layout.pp} · dp ${layout.dp} · ZeRO ${layout.zero} · mb ${layout.micro_batch}`
        + (layout.recompute !== "none" ? ` · ${layout.recompute} recompute` : ""), plan.scaling_note),
      f.percent(plan.estimate.mfu), plan.meets_constraints ? "yes" : plan.misses.join("; "),
    ]);
    tr.classList.toggle("selected", plan.rank === selectedRank);
    tr.addEventListener("click", (event) => { if (event.target.tagName !== "BUTTON") onSelect(plan.rank); });
    return tr;
  });
  // plans without a price come after the priced ones, never ranked among them: a labelled group of their own
  const firstUnpriced = result.plans.findIndex((plan) => plan.estimate.cost_usd == null);
  if (firstUnpriced >= 0) rows.splice(firstUnpriced, 0, unpricedHeading(result.plans.length - firstUnpriced));
  $("plan-table").tBodies[0].replaceChildren(...rows);
}

function unpricedHeading(count) {
  const cell = element("th", { text: `Without a price (${count}): no offer in the catalog for that GPU or node count,`
    + " apart from any ranking above" });
  cell.colSpan = 8;
  cell.scope = "rowgroup";
  const tr = document.createElement("tr");
  tr.className = "apart";
  tr.dataset.testid = "plan-unpriced";
  tr.append(cell);
  return tr;
}
