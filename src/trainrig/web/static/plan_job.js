// A plan as a job on the server (POST /api/plan/jobs, polled, cancellable): the configurations evaluated of
// the total, the time so far and a Cancel button while it runs; the form disabled meanwhile. The request is
// frozen when it is sent: the link, the history entry and the CLI line shown come from what was sent, and the
// result is marked stale as soon as the form no longer asks for it. A link to a plan answered before opens at
// once: the server answers an identical request from its cache.

import { api, ApiError } from "./api.js";

const $ = (id) => document.getElementById(id);
// Each poll waits on the server up to POLL_MS for the job to end (?wait_s): the answer comes the moment it is
// there, and the progress shown moves every POLL_MS meanwhile.
const POLL_MS = 250;
const EN = "en-US";

export class Cancelled extends Error {}

let running = null;  // {id, cancelled, wake}: the job on its way
let frozen = null;  // {body, perGpuType, url, cached}: what the result on the page answers

// ---- the page's options beside the form ----------------------------------------------------------------

// "Best per GPU type": not a field of the request body but of the route (?per_gpu_type=true), so the page
// keeps it in its own URL parameter.
export function perGpuType() {
  return Boolean($("per-gpu-type")?.checked);
}

export function withOptions(url) {
  if (!url.includes("mode=plan") || !perGpuType()) return url;
  return `${url}${url.includes("?") ? "&" : "?"}pergpu=1`;
}

export function readOptions(search) {
  const box = $("per-gpu-type");
  if (box) box.checked = new URLSearchParams(search).get("pergpu") === "1";
}

// ---- running ---------------------------------------------------------------------------------------------

// The plan for `body`; `url` is the page's link for it (built at the same moment, from the same form).
// Resolves to {result, cached}; rejects with an ApiError for bad input or a refusal, with Cancelled on Cancel.
export async function runPlan(body, url) {
  const request = { body, perGpuType: perGpuType(), url: withOptions(url) };
  const job = { id: null, cancelled: false };
  running = job;
  setRunning(true);
  showProgress({ status: "queued", evaluated: 0, total: null, elapsed_s: 0 });
  try {
    const created = await api(`/api/plan/jobs${request.perGpuType ? "?per_gpu_type=true" : ""}`, body);
    job.id = created.id;
    const wait = created.status === "done" ? "" : `?wait_s=${POLL_MS / 1000}`;
    for (;;) {
      if (job.cancelled) await sendCancel(job);  // its DELETE ends the job: the waiting poll answers at once
      const state = await api(`/api/plan/jobs/${encodeURIComponent(job.id)}${wait}`);
      showProgress(state);
      if (state.status === "done") {
        frozen = { ...request, cached: state.cached };
        remember(frozen.url);
        return { result: state.result, cached: state.cached };
      }
      if (state.status === "failed") throw new ApiError(state.error.message, state.error.field, 422);
      if (state.status === "cancelled") throw new Cancelled("the search was cancelled");
    }
  } finally {
    if (running === job) {  // a newer run (Back during a search) keeps the form disabled for itself
      running = null;
      setRunning(false);
    }
  }
}

export function cancel() {
  const job = running;
  if (!job || job.cancelled) return;
  job.cancelled = true;
  $("plan-cancel").disabled = true;
  $("plan-progress-text").textContent = "Cancelling…";
  if (job.id) sendCancel(job);
}

async function sendCancel(job) {
  if (job.cancelSent || !job.id) return;
  job.cancelSent = true;
  await fetch(`/api/plan/jobs/${encodeURIComponent(job.id)}`, { method: "DELETE" }).catch(() => null);
}

// One history entry per plan run, so Back steps back a result: a run whose link differs from the page's
// (apart from the selected row) adds an entry; a rerun, a reopened link or Back itself changes none.
function remember(url) {
  const withoutRow = (href) => {
    const address = new URL(href, location.href);
    address.searchParams.delete("sel");
    return `${address.pathname}?${address.searchParams}`;
  };
  if (withoutRow(url) !== withoutRow(location.href)) history.pushState(null, "", url);
}

// While a plan runs the form cannot change under it (the run and its link would disagree)
function setRunning(busy) {
  for (const fieldset of document.querySelectorAll("#job-form fieldset")) fieldset.disabled = busy;
  $("plan-progress").hidden = !busy;
  $("plan-cancel").disabled = !busy;
  // what is on the page answers an earlier request until this plan is in
  if (busy) for (const id of ["plan-view", "estimate-view", "compare-view"]) $(id)?.classList.add("stale");
  document.body.toggleAttribute("data-plan-running", busy);
}

function showProgress(state) {
  const bar = $("plan-progress-bar");
  const seconds = `${(state.elapsed_s || 0).toFixed(1)} s`;
  let text;
  if (state.status === "queued") {
    text = `Waiting for a free search process… ${seconds}`;
  } else if (state.total) {
    text = `Searching: ${state.evaluated.toLocaleString(EN)} of ${state.total.toLocaleString(EN)} configurations`
      + ` evaluated · ${seconds}`;
  } else {
    text = `Searching: counting the configurations… ${seconds}`;
  }
  if (state.status === "done") text = state.cached ? "Answered from the server's cache of earlier searches."
    : `Done: ${state.evaluated.toLocaleString(EN)} configurations in ${seconds}.`;
  if (!running?.cancelled) $("plan-progress-text").textContent = text;
  if (state.total) {
    bar.max = state.total;
    bar.value = Math.min(state.evaluated, state.total);
  } else {
    bar.removeAttribute("value");  // indeterminate until the search has counted its configurations
  }
  const box = $("plan-progress");
  box.dataset.status = state.status;
  box.dataset.evaluated = String(state.evaluated);
  if (state.total !== null && state.total !== undefined) box.dataset.total = String(state.total);
}

// ---- what the result shown answers ---------------------------------------------------------------------

// After a plan is drawn: where it came from, and the command line that gives the same answer
export function showRequest() {
  if (!frozen) return;
  $("plan-view").classList.remove("stale");
  $("plan-stale").hidden = true;
  $("plan-view").dataset.cached = frozen.cached ? "1" : "0";
  const note = frozen.cached ? " Answered at once from the server's cache: this exact request was planned before." : "";
  $("plan-source").textContent = note;
  $("plan-cli").textContent = cliLine(frozen.body, frozen.perGpuType);
}

// The result is stale once the form asks for something else; `currentBody()` is the form's plan body now
export function watchForm(currentBody) {
  const check = () => {
    if (!frozen || running || $("plan-view").hidden) return;
    const same = JSON.stringify(currentBody()) === JSON.stringify(frozen.body) && perGpuType() === frozen.perGpuType;
    $("plan-view").classList.toggle("stale", !same);
    $("plan-stale").hidden = same;
  };
  $("job-form").addEventListener("input", check);
  $("job-form").addEventListener("change", check);
  $("plan-cancel").addEventListener("click", cancel);
}

export function frozenUrl() {
  return frozen ? frozen.url : null;
}

const FLAGS = [["tokens", "--tokens"], ["seq_len", "--seq-len"], ["global_batch", "--global-batch"],
  ["precision", "--precision"], ["method", "--method"], ["deadline_days", "--deadline-days"],
  ["budget_usd", "--budget-usd"], ["max_gpus", "--max-gpus"], ["max_nodes", "--max-nodes"],
  ["objective", "--objective"], ["top", "--top"]];

// `trainrig plan …` for the request as sent. A model from a config.json, or fine-tuning fields, have no
// flags: they come from the job file the page downloads (the planner reads its model and training).
// Best per GPU type is what `trainrig compare` lists.
export function cliLine(body, byGpuType = false) {
  const fromFile = typeof body.model !== "string" || (body.training && Object.keys(body.training).length);
  const parts = [byGpuType ? "trainrig compare" : "trainrig plan"];
  parts.push(fromFile ? "trainrig-job.json" : `--model ${quoted(body.model)}`);
  for (const [key, flag] of FLAGS) {
    if (byGpuType && key === "top") continue;
    if (body[key] !== undefined && body[key] !== null) parts.push(`${flag} ${quoted(flagValue(body[key]))}`);
  }
  if (body.gpus && body.gpus.length) parts.push(`--gpus ${quoted(body.gpus.join(","))}`);
  if (body.priced_only) parts.push("--priced-only");
  return parts.join(" ");
}

// 1e11 rather than 100000000000, as one would type it (the CLI reads both)
function flagValue(value) {
  return typeof value === "number" && Math.abs(value) >= 1e6 ? value.toExponential().replace("e+", "e") : String(value);
}

function quoted(text) {
  return /^[\w.,:@%+=/-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}
