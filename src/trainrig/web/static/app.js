// The planner page: fills the form from the catalog, sends it to the API, shows the answer, keeps the URL
// in step. All assets are served by `trainrig serve`; nothing is fetched from elsewhere.

import { api } from "./api.js";
import { bindHfId } from "./hf_id.js";
import * as form from "./form.js";
import * as f from "./format.js";
import * as views from "./views.js";
import * as checks from "./field_errors.js";
import * as compare from "./compare.js";
import { applyChanges } from "./fixes.js";
import { liveRunner } from "./live.js";
import * as pickers from "./pickers.js";
import * as planJob from "./plan_job.js";
import { markSelectedPlan } from "./charts.js";

const $ = (id) => document.getElementById(id);
const WHAT_IF_EXAMPLES = ["zero=3", "recompute=full", "inter_node=eth-100g", "precision=fp8", "micro_batch=2"];
const state = { models: [], gpus: [], offers: [], customModel: null, plan: null, selectedRank: 1, job: null,
  fitRequest: 0, estimateRequest: 0, live: null };

// ---- start ----------------------------------------------------------------------------------------------

async function start() {
  bindControls();
  try {
    const [models, gpus, catalog] = await Promise.all([api("/api/models"), api("/api/gpus"), api("/api/catalog")]);
    Object.assign(state, { models, gpus, offers: catalog.offers });
    fillChoices(catalog);
  } catch (error) {
    showError(error);
    return;
  }
  const restored = formFromUrl();
  openSetDetails();
  onModeChange();
  describeModel();
  suggestPrice(Boolean(new URLSearchParams(location.search).get("price")));
  pickers.describeGpu(state.gpus, state.offers);
  // a link reruns its view; a first visit shows the worked example the form starts with
  if (restored.hasJob || !location.search) await state.live.runNow();
  document.body.dataset.ready = "1";
}

function fillChoices(catalog) {
  options($("model-preset"), state.models.map((m) => [m.id, `${m.id} — ${f.count(m.n_params)} parameters`]));
  $("model-preset").value = state.models.some((m) => m.id === "llama3-8b") ? "llama3-8b" : state.models[0].id;
  pickers.fillGpuPicker(state.gpus, state.offers, "H100-SXM5-80GB");
  const links = catalog.links;
  options($("intra-node"), links.filter((l) => !["infiniband", "ethernet"].includes(l.kind))
    .map((l) => [l.id, `${l.id} (${l.bandwidth_gbs} GB/s)`]), true);
  options($("inter-node"), links.filter((l) => ["infiniband", "ethernet"].includes(l.kind))
    .map((l) => [l.id, `${l.id} (${l.line_rate_gbps} Gb/s)`]), true);
  options($("storage"), catalog.storage.map((s) => [s.id, s.id]), true);
  pickers.setDefault($("storage"), $("storage").dataset.default);
  $("gpu-types").replaceChildren(...state.gpus.map((g) => {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = g.id;
    label.append(box, ` ${g.id}`);
    return label;
  }));
  $("what-if-chips").replaceChildren(...WHAT_IF_EXAMPLES.map((change) => {
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = "chip";
    chip.textContent = `+ ${change}`;
    chip.addEventListener("click", () => addWhatIf(change));
    return chip;
  }));
}

function options(select, pairs, keepFirst = false) {
  const kept = keepFirst ? [select.options[0]] : [];
  select.replaceChildren(...kept, ...pairs.map(([value, label]) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = label;
    return option;
  }));
}

function bindControls() {
  state.live = liveRunner($("job-form"), { isLive: () => form.mode() === "fixed", run });
  $("job-form").addEventListener("submit", (event) => { event.preventDefault(); state.live.runNow(); });
  compare.bindSorting();
  planJob.watchForm(() => form.planBody(state.customModel));
  window.addEventListener("popstate", restoreFromUrl);
  for (const radio of document.querySelectorAll("input[name=mode]")) radio.addEventListener("change", onModeChange);
  $("model-preset").addEventListener("change", describeModel);
  $("method").addEventListener("change", form.showMethodFields);
  $("gpu").addEventListener("change", () => { suggestPrice(false); pickers.describeGpu(state.gpus, state.offers); });
  $("price").addEventListener("input", () => { delete $("price").dataset.auto; });
  $("config-use").addEventListener("click", useConfigText);
  $("config-file").addEventListener("change", readConfigFile);
  bindHfId($("hf-id"), $("hf-id-help"));
  $("download").addEventListener("click", downloadJob);
  $("copy-link").addEventListener("click", copyLink);
  $("gpu-types").addEventListener("change", countGpuTypes);
  $("gpu-types-none").addEventListener("click", () => {
    for (const box of document.querySelectorAll("#gpu-types input")) box.checked = false;
    countGpuTypes();
  });
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (state.plan) drawPlan(); }, 150);
  });
}

// A section folded away but holding values from the link opens, so nothing set is hidden. A box counts as
// set when it differs from its default (some start checked).
function openSetDetails() {
  for (const details of document.querySelectorAll("#job-form details:not(#custom-model)")) {
    const fields = [...details.querySelectorAll("input, select")];
    if (fields.some(form.differsFromDefault)) details.open = true;
  }
}

function onModeChange() {
  const mode = form.mode();
  for (const name of form.MODES) document.body.classList.toggle(`mode-${name}`, mode === name);
  document.body.classList.toggle("mode-search", mode !== "fixed");  // plan and compare share their options
  $("run").textContent = { fixed: "Estimate", plan: "Plan", compare: "Compare" }[mode];
  countGpuTypes();
}

function countGpuTypes() {
  const chosen = form.checkedGpuTypes().length;
  $("gpu-types-count").textContent = chosen ? `${chosen} chosen` : "all";
}

function addWhatIf(change) {
  const lines = form.whatIfs();
  if (!lines.includes(change)) $("what-if").value = [...lines, change].join("\n");
}

// ---- the model ------------------------------------------------------------------------------------------

function describeModel() {
  const id = $("model-preset").value;
  if (id === "custom" && state.customModel) {
    $("model-info").textContent = `${state.customModel.name}: ${state.customModel.n_layers} layers, `
      + `hidden ${state.customModel.hidden} (from your config.json)`;
    return;
  }
  const preset = state.models.find((m) => m.id === id);
  $("model-info").textContent = preset
    ? `${preset.name}: ${f.count(preset.n_params)} parameters, ${preset.spec.n_layers} layers, hidden ${preset.spec.hidden}`
    : "";
}

function addCustomOption(spec) {
  let option = $("model-preset").querySelector("option[value=custom]");
  if (!option) {
    option = document.createElement("option");
    option.value = "custom";
    $("model-preset").prepend(option);
  }
  option.textContent = `custom — ${spec.name || "your config.json"}`;
  $("model-preset").value = "custom";
}

async function readConfigFile() {
  const file = $("config-file").files[0];
  if (!file) return;
  if (file.size > 1_000_000) {
    showError({ field: "model", message: "model: that file is over 1 MB; a config.json is a few kB." });
    return;
  }
  $("config-text").value = await file.text();
  await useConfigText();
}

async function useConfigText() {
  clearError();
  let parsed;
  try {
    parsed = JSON.parse($("config-text").value);  // data only: JSON.parse runs nothing
  } catch (error) {
    showError({ field: "model", message: `model: the config.json is not valid JSON (${error.message}).` });
    return;
  }
  try {
    const resolved = await api("/api/model", { model: { hf_config: parsed } });
    state.customModel = resolved.model;
    addCustomOption(resolved.model);
    $("model-info").textContent = `${resolved.model.name}: ${f.count(resolved.n_params)} parameters `
      + `(from your config.json)`;
    if (form.mode() === "fixed") state.live.runNow({ live: true });  // a new model is a change like any other
  } catch (error) {
    showError(error);
  }
}

// ---- price ----------------------------------------------------------------------------------------------

function suggestPrice(keep) {
  const price = $("price");
  if (keep || (price.value && !price.dataset.auto)) return;
  const offers = state.offers.filter((o) => o.gpu === $("gpu").value && o.usd_per_gpu_hour);
  const cheapest = offers.sort((a, b) => a.usd_per_gpu_hour - b.usd_per_gpu_hour)[0];
  price.value = cheapest ? String(cheapest.usd_per_gpu_hour) : "";
  price.dataset.auto = "1";
  price.title = cheapest ? `cheapest catalog offer: ${cheapest.provider} ${cheapest.instance}` : "";
}

// ---- running --------------------------------------------------------------------------------------------

// live: a run the form's change started (not a click), which neither moves the focus nor scrolls
async function run({ live = false } = {}) {
  if (live && form.mode() !== "fixed") return;  // a change made just before switching modes: plans run on request
  const problems = checks.check();  // empty and non-positive numbers, all at once, before anything is sent
  if (problems.length) {
    state.estimateRequest += 1;  // an estimate still on its way is for the inputs before
    checks.showProblems(problems, { focus: !live });
    views.markStale(true);
    return;
  }
  clearError();
  setBusy(true);
  try {
    if (form.mode() !== "fixed") state.estimateRequest += 1;
    if (form.mode() === "plan") await runPlan();
    else if (form.mode() === "compare") await runCompare();
    else if (!(await runEstimate())) return;  // a newer estimate is on its way
    $("welcome").hidden = true;
    history.replaceState(null, "", pageUrl());
    if (!live && window.matchMedia("(max-width: 899px)").matches) $("results").scrollIntoView({ block: "start" });
  } catch (error) {
    if (error instanceof planJob.Cancelled) return;  // the result before stays, marked stale, with its link
    showError(error, { focus: !live });
    views.markStale(true);
  } finally {
    setBusy(false);
  }
}

// Returns false when a newer estimate was asked for meanwhile: only the latest answer is shown
async function runEstimate() {
  const body = form.estimateBody(state.customModel);
  const request = ++state.estimateRequest;
  let est;
  let sizing;
  try {
    [est, sizing] = await Promise.all([api("/api/estimate", body), api("/api/node", { ...body, what_if: undefined })]);
  } catch (error) {
    if (request !== state.estimateRequest) return false;
    throw error;
  }
  if (request !== state.estimateRequest) return false;
  state.plan = null;
  $("plan-view").hidden = true;
  compare.hideCompare();
  views.showEstimate(est, { title: "Estimate", node: sizing.node, nodeMessage: sizing.message,
    cli: cliCommand(body.price_usd_per_gpu_hour, body.what_if), onApply: applyFix });
  document.body.dataset.result = "estimate";
  loadFit({ model: body.model, hardware: body.hardware, training: body.training });  // not awaited
  return true;
}

// Apply a suggested fix: set the form as it says and estimate at once
function applyFix(fix) {
  applyChanges(fix.changes);
  state.live.runNow();
}

async function runCompare() {
  const result = await api("/api/compare", form.compareBody(state.customModel));
  state.plan = null;
  state.fitRequest += 1;  // what fits is shown for an estimate
  views.hideFit();
  $("plan-view").hidden = true;
  $("estimate-view").hidden = true;
  compare.showCompare(result);
  document.body.dataset.result = "compare";
}

// What fits, fetched once the estimate is on the page; an answer for an older estimate is dropped.
async function loadFit(job) {
  const request = ++state.fitRequest;
  views.showFitPending();
  try {
    const fit = await api("/api/fit", job);
    if (request === state.fitRequest) views.showFit(fit);
  } catch (error) {
    if (request === state.fitRequest) views.showFitError(error);
  }
}

// The page's link: the form as the URL holds it, and the plan options kept beside it (plan_job.js)
function pageUrl() {
  return planJob.withOptions(form.toUrl(state.customModel, state.selectedRank));
}

// The form, the chosen plan and the plan options as the address holds them
function formFromUrl() {
  const restored = form.fromUrl(location.search, addCustomOption);
  state.customModel = restored.customModel;
  state.selectedRank = restored.selectedRank;
  planJob.readOptions(location.search);
  return restored;
}

// Back and Forward: the form as that entry's link holds it, and its result (a plan comes from the cache)
async function restoreFromUrl() {
  planJob.cancel();
  const restored = formFromUrl();
  onModeChange();
  describeModel();
  if (restored.hasJob) await state.live.runNow();
}

// A plan job (plan_job.js): progress and Cancel while it runs; the link and CLI line are those of the request
async function runPlan() {
  const { result } = await planJob.runPlan(form.planBody(state.customModel),
    form.toUrl(state.customModel, state.selectedRank));
  state.plan = result;
  state.fitRequest += 1;  // what fits is shown for an estimate, not for a plan
  views.hideFit();
  compare.hideCompare();
  if (!result.plans.some((p) => p.rank === state.selectedRank)) state.selectedRank = 1;
  views.showPlanSummary(result);
  planJob.showRequest();
  drawPlan();
  selectPlan(state.selectedRank);
  document.body.dataset.result = "plan";
}

function drawPlan() {
  const result = state.plan;
  const colours = views.gpuColours([...result.points.map((p) => p.gpu), ...result.plans.map((p) => p.gpu)]);
  views.showPlanChart(result, colours, { onPoint: showTooltip, onLeave: hideTooltip, onPlan: selectPlan });
  markSelectedPlan($("plan-chart"), state.selectedRank);
}

function selectPlan(rank) {
  const plan = state.plan.plans.find((p) => p.rank === rank);
  $("estimate-view").hidden = !plan;
  if (!plan) return;
  state.selectedRank = rank;
  state.job = plan.job;
  views.showPlanTable(state.plan, rank, selectPlan);
  markSelectedPlan($("plan-chart"), rank);
  const price = plan.offer ? plan.offer.usd_per_gpu_hour : undefined;
  views.showEstimate(plan.estimate, {
    title: `Plan ${rank}: ${plan.n_gpus} × ${plan.gpu}${plan.offer ? ` on ${plan.offer.provider} ${plan.offer.instance}` : ""}`,
    node: plan.node, nodeMessage: plan.node ? null : "this configuration does not fit in GPU memory.",
    cli: cliCommand(price, []),
  });
  history.replaceState(null, "", pageUrl());
}

function cliCommand(price, changes) {
  const parts = ["trainrig estimate trainrig-job.json"];
  if (price) parts.push(`--price ${price}`);
  for (const change of changes || []) parts.push(`--what-if '${change}'`);
  return parts.join(" ");
}

// ---- tooltip, errors, busy ------------------------------------------------------------------------------

function showTooltip(point, clientX, clientY) {
  const tip = $("tooltip");
  tip.replaceChildren(...views.pointDetails(point).map((line) => {
    const div = document.createElement("div");
    div.textContent = line;
    return div;
  }));
  tip.hidden = false;
  const width = tip.offsetWidth;
  const left = Math.min(Math.max(8, clientX + 12), window.innerWidth - width - 8);
  tip.style.left = `${left + window.scrollX}px`;
  tip.style.top = `${clientY + window.scrollY + 14}px`;
}

function hideTooltip() {
  $("tooltip").hidden = true;
}

// An error that names a field is shown under that field (field_errors.js); others at the top of the results
function showError(error, { focus = true } = {}) {
  checks.showServerError(error, { focus });
}

function clearError() {
  checks.clear();
}

function setBusy(busy) {
  $("busy").hidden = !busy;
  $("run").disabled = busy;
  document.body.classList.toggle("busy", busy);
}

// ---- download and link ----------------------------------------------------------------------------------

function downloadJob() {
  // a plan's job file as the planner wrote it; otherwise the form as it stands now
  const job = form.mode() === "plan" && state.plan ? state.job : form.job(state.customModel);
  const blob = new Blob([`${JSON.stringify(job, null, 2)}\n`], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "trainrig-job.json";
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

async function copyLink() {
  const url = new URL(pageUrl(), location.href).href;
  history.replaceState(null, "", url);
  try {
    await navigator.clipboard.writeText(url);
    $("link-status").textContent = "Link copied: it reopens this view.";
  } catch {
    $("link-status").textContent = `This view's link: ${url}`;
  }
}

start();
