// Errors at the field: the browser's own checks (empty and non-positive numbers) and the server's 422s,
// each shown under the control it names, in words of that control's visible label ("Tokens", not
// `training.tokens`). Every error is shown at once; the first field is focused and scrolled into view.

import { isRelevant, mode } from "./form.js";
import { parseAmount } from "./format.js";

const $ = (id) => document.getElementById(id);

// Number fields the page checks before sending: [id, required in (modes), whole number]
const NUMBER_FIELDS = [
  ["tokens", ["plan", "compare"], false], ["seq-len", ["fixed", "plan", "compare"], true],
  ["global-batch", ["fixed", "plan", "compare"], true], ["micro-batch", ["fixed"], true],
  ["n-gpus", ["fixed"], true], ["gpus-per-node", [], true], ["price", [], false], ["tp", [], true], ["pp", [], true],
  ["cpu-cores", [], true], ["ram-gb", [], false], ["mean-seq-len", [], true], ["lora-rank", [], true],
  ["deadline", [], false], ["budget", [], false], ["max-gpus", ["plan", "compare"], true],
];

export function labelOf(control) {
  const label = document.querySelector(`label[for="${control.id}"]`) || control.closest("label");
  return label ? label.textContent.trim() : control.id;
}

function shown(control) {
  if (!isRelevant(control.id)) return false;
  const lora = control.closest(".lora-only");
  return !(lora && lora.hidden);
}

// The browser-side checks: [{control, message}] for every field that is wrong, in the form's order
export function check() {
  const problems = [];
  for (const [id, requiredIn, integer] of NUMBER_FIELDS) {
    const control = $(id);
    if (!control || !shown(control)) continue;
    const raw = control.value.trim();
    const label = labelOf(control);
    if (raw === "") {
      if (requiredIn.includes(mode())) problems.push({ control, message: `${label}: give a value.` });
      continue;
    }
    if (id === "global-batch" && mode() !== "fixed" && /^\d+\s*-\s*\d+$/.test(raw)) continue;  // a range
    const value = parseAmount(raw);
    if (raw.startsWith("-") || (Number.isFinite(value) && value <= 0)) {
      problems.push({ control, message: `${label}: must be more than 0 (got ${raw}).` });
    } else if (!Number.isFinite(value)) {
      problems.push({ control, message: `${label}: '${raw}' is not a number.` });
    } else if (integer && !Number.isInteger(value)) {
      problems.push({ control, message: `${label}: must be a whole number (got ${raw}).` });
    }
  }
  if (mode() === "fixed") problems.push(...whatIfProblems());
  return problems;
}

// Each what-if line is one variant: `key=value`, or several joined by commas ("zero=3, recompute=full"),
// as `--what-if` takes them
function whatIfProblems() {
  const control = $("what-if");
  const label = labelOf(control);
  const problems = [];
  for (const line of control.value.split("\n").map((text) => text.trim()).filter(Boolean)) {
    if (!line.includes("=")) problems.push(`'${line}' is not key=value (e.g. zero=3)`);
  }
  return problems.length ? [{ control, message: `${label}: ${problems.join("; ")}.` }] : [];
}

// The controls an error's field names (`training.tp`, `what_if`, `gpus[2]` …)
function controlsFor(field) {
  if (!field) return [];
  return [...document.querySelectorAll("[data-fields]")].filter((control) => control.dataset.fields.split(" ")
    .some((name) => field === name || field.startsWith(`${name}.`) || field.startsWith(`${name}[`)));
}

// The server's sentence with each dotted field name it mentions replaced by that control's label
export function inWords(message) {
  let text = String(message);
  const names = new Map();
  for (const control of document.querySelectorAll("[data-fields]")) {
    for (const name of control.dataset.fields.split(" ")) if (name.includes(".") || name.includes("_")) {
      names.set(name, labelOf(control));
    }
  }
  for (const [name, label] of [...names].sort((a, b) => b[0].length - a[0].length)) {
    text = text.split(name).join(label);
  }
  return text;
}

// Show a server error: under its field when it names one, else in the box at the top of the results.
// Returns whether it was placed at a field.
export function showServerError(error, { focus = true } = {}) {
  clear();
  const controls = controlsFor(error.field).filter((control) => !control.closest(".lora-only")?.hidden);
  if (!controls.length) {
    showBox(error.field && !String(error.message).startsWith(error.field) ? `${error.field}: ${error.message}`
      : error.message);
    return false;
  }
  const message = inWords(error.message);
  for (const control of controls) mark(control, message);
  summarize(controls.length === 1 ? message : `${controls.length} fields to fix: ${message}`);
  if (focus) focusOn(controls[0]);
  return true;
}

// Show the browser-side problems, all at once
export function showProblems(problems, { focus = true } = {}) {
  clear();
  for (const { control, message } of problems) mark(control, message);
  summarize(problems.length === 1 ? problems[0].message
    : `${problems.length} fields to fix: ${problems.map((p) => labelOf(p.control)).join(", ")}.`);
  if (focus && problems.length) focusOn(problems[0].control);
}

export function showBox(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
}

function summarize(message) {
  showBox(`Not estimated: ${message}`);
}

function mark(control, message) {
  control.setAttribute("aria-invalid", "true");
  const note = document.createElement("p");
  note.className = "field-error";
  note.id = `${control.id}-error`;
  note.dataset.testid = "field-error";
  note.textContent = message;
  const anchor = control.closest("label.check") || control;
  anchor.after(note);
  const described = (control.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  control.dataset.describedBefore = described.join(" ");
  control.setAttribute("aria-describedby", [...described, note.id].join(" "));
  const folded = control.closest("details");
  if (folded) folded.open = true;  // the control the error names is shown, not folded away
}

function focusOn(control) {
  control.scrollIntoView({ block: "center" });
  control.focus({ preventScroll: true });
}

export function clear() {
  $("error").hidden = true;
  for (const note of document.querySelectorAll(".field-error")) note.remove();
  for (const control of document.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
    if (control.dataset.describedBefore !== undefined) {
      if (control.dataset.describedBefore) control.setAttribute("aria-describedby", control.dataset.describedBefore);
      else control.removeAttribute("aria-describedby");
      delete control.dataset.describedBefore;
    }
  }
}
