// The planner page: fills the form from the catalog, sends it to the API, shows the answer, keeps the URL
// in step. All assets are served by `trainrig serve`; nothing is fetched from elsewhere.

import { api } from "./api.js";
import * as form from "./form.js";
import * as f from "./format.js";
import * as views from "./views.js";

const $ = (id) => document.getElementById(id);
const WHAT_IF_EXAMPLES = ["zero=3", "recompute=full", "inter_node=eth-100g", "precision=fp8", "micro_batch=2"];
const state = { models: [], gpus: [], offers: [], customModel: null, plan: null, selectedRank: 1, job: null,
  fitRequest: 0 };

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
  const restored = form.fromUrl(location.search, addCustomOption);
  state.customModel = restored.customModel;
  state.selectedRank = restored.selectedRank;
  openSetDetails();
  onModeChange();
  describeModel();
  suggestPrice(Boolean(new URLSearchParams(location.search).get("price")));
  if (restored.hasJob) await run();
  document.body.dataset.ready = "1";
}

function fillChoices(catalog) {
  options($("model-preset"), state.models.map((m) => [m.id, `${m.id} — ${f.count(m.n_params)} parameters`]));
  $("model-preset").value = state.models.some((m) => m.id === "llama3-8b") ? "llama3-8b" : state.models[0].id;
  options($("gpu"), state.gpus.map((g) => [g.id, `${g.id} — ${g.memory_gib} GiB`]));
  $("gpu").value = state.gpus.some((g) => g.id === "H100-SXM5-80GB") ? "H100-SXM5-80GB" : state.gpus[0].id;
  const links = catalog.links;
  options($("intra-node"), links.filter((l) => !["infiniband", "ethernet"].includes(l.kind))
    .map((l) => [l.id, `${l.id} (${l.bandwidth_gbs} GB/s)`]), true);
  options($("inter-node"), links.filter((l) => ["infiniband", "ethernet"].includes(l.kind))
    .map((l) => [l.id, `${l.id} (${l.line_rate_gbps} Gb/s)`]), true);
  options($("storage"), catalog.storage.map((s) => [s.id, s.id]), true);
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
  $("job-form").addEventListener("submit", (event) => { event.preventDefault(); run(); });
  for (const radio of document.querySelectorAll("input[name=mode]")) radio.addEventListener("change", onModeChange);
  $("model-preset").addEventListener("change", describeModel);
  $("method").addEventListener("change", form.showMethodFields);
  $("gpu").addEventListener("change", () => suggestPrice(false));
  $("price").addEventListener("input", () => { delete $("price").dataset.auto; });
  $("config-use").addEventListener("click", useConfigText);
  $("config-file").addEventListener("change", readConfigFile);
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
    if (fields.some((field) => (field.type === "checkbox" ? field.checked !== field.defaultChecked
      : field.value !== ""))) details.open = true;
  }
}

function onModeChange() {
  const plan = form.mode() === "plan";
  document.body.classList.toggle("mode-plan", plan);
  document.body.classList.toggle("mode-fixed", !plan);
  $("run").textContent = plan ? "Plan" : "Estimate";
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

async function run() {
  clearError();
  setBusy(true);
  try {
    if (form.mode() === "plan") await runPlan();
    else await runEstimate();
    $("welcome").hidden = true;
    history.replaceState(null, "", form.toUrl(state.customModel, state.selectedRank));
    if (window.matchMedia("(max-width: 899px)").matches) $("results").scrollIntoView({ block: "start" });
  } catch (error) {
    showError(error);
  } finally {
    setBusy(false);
  }
}

async function runEstimate() {
  const body = form.estimateBody(state.customModel);
  const [est, sizing] = await Promise.all([api("/api/estimate", body),
    api("/api/node", { ...body, what_if: undefined })]);
  state.plan = null;
  $("plan-view").hidden = true;
  views.showEstimate(est, { title: "Estimate", node: sizing.node, nodeMessage: sizing.message,
    cli: cliCommand(body.price_usd_per_gpu_hour, body.what_if) });
  document.body.dataset.result = "estimate";
  loadFit({ model: body.model, hardware: body.hardware, training: body.training });  // not awaited
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

async function runPlan() {
  const result = await api("/api/plan", form.planBody(state.customModel));
  state.plan = result;
  state.fitRequest += 1;  // what fits is shown for an estimate, not for a plan
  views.hideFit();
  if (!result.plans.some((p) => p.rank === state.selectedRank)) state.selectedRank = 1;
  views.showPlanSummary(result);
  drawPlan();
  selectPlan(state.selectedRank);
  document.body.dataset.result = "plan";
}

function drawPlan() {
  const result = state.plan;
  const colours = views.gpuColours([...result.points.map((p) => p.gpu), ...result.plans.map((p) => p.gpu)]);
  views.showPlanChart(result, colours, { onPoint: showTooltip, onLeave: hideTooltip, onPlan: selectPlan });
}

function selectPlan(rank) {
  const plan = state.plan.plans.find((p) => p.rank === rank);
  $("estimate-view").hidden = !plan;
  if (!plan) return;
  state.selectedRank = rank;
  state.job = plan.job;
  views.showPlanTable(state.plan, rank, selectPlan);
  const price = plan.offer ? plan.offer.usd_per_gpu_hour : undefined;
  views.showEstimate(plan.estimate, {
    title: `Plan ${rank}: ${plan.n_gpus} × ${plan.gpu}${plan.offer ? ` on ${plan.offer.provider} ${plan.offer.instance}` : ""}`,
    node: plan.node, nodeMessage: plan.node ? null : "this configuration does not fit in GPU memory.",
    cli: cliCommand(price, []),
  });
  history.replaceState(null, "", form.toUrl(state.customModel, state.selectedRank));
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

function showError(error) {
  const box = $("error");
  box.textContent = error.message;
  box.hidden = false;
  for (const input of document.querySelectorAll("[data-fields]")) {
    const fields = input.dataset.fields.split(" ");
    const hit = error.field && fields.some((name) => error.field === name || error.field.startsWith(`${name}.`)
      || error.field.startsWith(`${name}[`));
    input.toggleAttribute("aria-invalid", Boolean(hit));
    const folded = hit && input.closest("details");
    if (folded) folded.open = true;  // the control the error names is shown, not folded away
  }
}

function clearError() {
  $("error").hidden = true;
  for (const input of document.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
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
  const url = new URL(form.toUrl(state.customModel, state.selectedRank), location.href).href;
  history.replaceState(null, "", url);
  try {
    await navigator.clipboard.writeText(url);
    $("link-status").textContent = "Link copied: it reopens this view.";
  } catch {
    $("link-status").textContent = `This view's link: ${url}`;
  }
}

start();
