// The form: its values, the request bodies built from them, and the same values in the page's URL.
// The URL holds everything a view needs, so a link reproduces it.

import { parseAmount } from "./format.js";

const $ = (id) => document.getElementById(id);

// URL parameter → form element id (text-like inputs and selects)
const FIELDS = {
  model: "model-preset", tokens: "tokens", seq: "seq-len", gb: "global-batch", mb: "micro-batch",
  prec: "precision", method: "method", gpu: "gpu", n: "n-gpus", gpn: "gpus-per-node", intra: "intra-node",
  inter: "inter-node", price: "price", tp: "tp", pp: "pp", zero: "zero", rc: "recompute", cpu: "cpu-cores",
  storage: "storage", ram: "ram-gb", deadline: "deadline", budget: "budget", maxgpus: "max-gpus", obj: "objective",
  fw: "framework", opt: "optimizer", loss: "loss", offload: "offload", msl: "mean-seq-len", quant: "quantization",
  rank: "lora-rank", targets: "lora-targets",
};

// URL parameter → [checkbox id, training field]: in the URL ("1"/"0") and the request only when changed
// from the box's default (its checked attribute in the page), so untouched boxes change nothing.
const CHECKS = {
  emb: ["train-embeddings", "train_embeddings"], mw: ["master-weights", "master_weights"],
  oib: ["optimizer-in-backward", "optimizer_in_backward"], aoff: ["activation-offload", "activation_offload"],
  pack: ["packing", "packing"],
};

export function mode() {
  return document.querySelector("input[name=mode]:checked").value;
}

export const MODES = ["fixed", "plan", "compare"];

export function setMode(value) {
  const radio = document.querySelector(`input[name=mode][value="${MODES.includes(value) ? value : "fixed"}"]`);
  radio.checked = true;
}

function text(id) {
  return $(id).value.trim();
}

// A number when the text is one, else the text itself: the server then names the field it cannot read.
function number(id) {
  const raw = text(id);
  if (raw === "") return undefined;
  const value = parseAmount(raw);
  return Number.isFinite(value) ? value : raw;
}

function optional(object) {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined && value !== ""));
}

export function whatIfs() {
  return $("what-if").value.split("\n").map((line) => line.trim()).filter(Boolean);
}

export function checkedGpuTypes() {
  return [...document.querySelectorAll("#gpu-types input:checked")].map((box) => box.value);
}

// The model as the job file takes it: a preset name, or the spec mapping of an uploaded config.json
export function modelSource(customModel) {
  const preset = $("model-preset").value;
  return preset === "custom" && customModel ? customModel : preset;
}

function batch() {
  const raw = text("global-batch");
  return /^\d+\s*-\s*\d+$/.test(raw) ? raw.replace(/\s/g, "") : number("global-batch");
}

// LoRA/QLoRA only: the adapters and the base's quantization (hidden, and not sent, for full training)
export function adapters() {
  return text("method") !== "full";
}

export function showMethodFields() {
  $("lora-fields").hidden = !adapters();
}

function checkChanges() {
  const changed = {};
  for (const [id, field] of Object.values(CHECKS)) {
    const box = $(id);
    if (box.checked !== box.defaultChecked && isRelevant(id)) changed[field] = box.checked;
  }
  return changed;
}

// The fine-tuning fields the user changed from their defaults; nothing else, so an untouched form sends
// what it sent before these controls existed.
function fineTuning() {
  const lora = adapters();
  return optional({
    framework: text("framework"), optimizer: text("optimizer"), loss: text("loss"), offload: text("offload"),
    mean_seq_len: number("mean-seq-len"), quantization: lora ? text("quantization") : undefined,
    lora_rank: lora ? number("lora-rank") : undefined, lora_targets: lora ? text("lora-targets") : undefined,
    ...checkChanges(),
  });
}

export function job(customModel) {
  const hardware = optional({
    gpu: text("gpu"), n_gpus: number("n-gpus"), gpus_per_node: number("gpus-per-node"),
    intra_node: text("intra-node"), inter_node: text("inter-node"), cpu_cores_per_node: number("cpu-cores"),
    ram_gb_per_node: number("ram-gb"), storage: text("storage"),
  });
  const training = optional({
    seq_len: number("seq-len"), global_batch: number("global-batch"), micro_batch: number("micro-batch"),
    precision: text("precision"), method: text("method"), tokens: number("tokens"), tp: number("tp"),
    pp: number("pp"), zero: number("zero"), recompute: text("recompute"), ...fineTuning(),
  });
  return { model: modelSource(customModel), hardware, training };
}

export function price() {
  return number("price");
}

export function estimateBody(customModel) {
  return optional({ ...job(customModel), what_if: whatIfs(), price_usd_per_gpu_hour: price() });
}

export function planBody(customModel) {
  const gpus = checkedGpuTypes();
  const training = fineTuning();
  return optional({
    model: modelSource(customModel), tokens: number("tokens"), seq_len: number("seq-len"), global_batch: batch(),
    precision: text("precision"), method: text("method"), deadline_days: number("deadline"),
    budget_usd: number("budget"), max_gpus: number("max-gpus"), objective: text("objective"),
    priced_only: $("priced-only").checked || undefined, gpus: gpus.length ? gpus : undefined,
    training: Object.keys(training).length ? training : undefined,
  });
}

// `trainrig compare` takes `plan`'s options, less `top` (which the form never sends)
export function compareBody(customModel) {
  return planBody(customModel);
}

// A control differs from the value the page starts with (its default attribute or option; for a select
// filled from the catalog, the option marked defaultSelected there).
export function differsFromDefault(field) {
  if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
  if (field.tagName === "SELECT") {
    const initial = [...field.options].find((option) => option.defaultSelected) || field.options[0];
    return Boolean(initial) && field.value !== initial.value;
  }
  return field.value !== field.defaultValue;
}

// ---- the URL -------------------------------------------------------------------------------------------

export function toUrl(customModel, selectedRank) {
  const params = new URLSearchParams();
  params.set("mode", mode());
  for (const [key, id] of Object.entries(FIELDS)) {
    const value = text(id);
    if (value !== "" && isRelevant(id)) params.set(key, value);
  }
  for (const [key, [id]] of Object.entries(CHECKS)) {
    const box = $(id);
    if (box.checked !== box.defaultChecked && isRelevant(id)) params.set(key, box.checked ? "1" : "0");
  }
  if ($("model-preset").value === "custom" && customModel) params.set("spec", JSON.stringify(customModel));
  if (mode() === "fixed") for (const change of whatIfs()) params.append("wi", change);
  if (mode() !== "fixed") {
    const gpus = checkedGpuTypes();
    if (gpus.length) params.set("gpus", gpus.join(","));
    if ($("priced-only").checked) params.set("priced", "1");
  }
  if (mode() === "plan" && selectedRank && selectedRank !== 1) params.set("sel", String(selectedRank));
  return `${location.pathname}?${params}`;
}

function isRelevant(id) {
  const element = $(id);
  const fixedOnly = element.closest(".fixed-only");
  const planOnly = element.closest(".plan-only");
  if (element.closest(".lora-only") && !adapters()) return false;
  return mode() === "fixed" ? !planOnly : !fixedOnly;  // compare takes the plan's options
}

export { isRelevant };

// Fill the form from the URL; returns {customModel, selectedRank, hasJob}
export function fromUrl(search, addCustomOption) {
  const params = new URLSearchParams(search);
  setMode(params.get("mode"));
  let customModel = null;
  if (params.has("spec")) {
    try {
      customModel = JSON.parse(params.get("spec"));
      addCustomOption(customModel);
    } catch {
      customModel = null;
    }
  }
  for (const [key, id] of Object.entries(FIELDS)) {
    if (params.has(key) && !(key === "model" && params.get(key) === "custom" && !customModel)) {
      setValue($(id), params.get(key));
    }
  }
  for (const [key, [id]] of Object.entries(CHECKS)) {
    const box = $(id);
    box.checked = params.has(key) ? params.get(key) === "1" : box.defaultChecked;
  }
  showMethodFields();
  if (params.has("wi")) $("what-if").value = params.getAll("wi").join("\n");
  const gpus = new Set((params.get("gpus") || "").split(",").filter(Boolean));
  for (const box of document.querySelectorAll("#gpu-types input")) box.checked = gpus.has(box.value);
  $("priced-only").checked = params.get("priced") === "1";
  return { customModel, selectedRank: Number(params.get("sel")) || 1, hasJob: params.has("model") };
}

function setValue(element, value) {
  if (element.tagName === "SELECT" && ![...element.options].some((option) => option.value === value)) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    element.appendChild(option);
  }
  element.value = value;
}
