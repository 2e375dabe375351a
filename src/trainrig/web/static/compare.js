// Compare GPUs: `trainrig compare --json` (POST /api/compare) as one sortable row per GPU type — time, cost,
// $ per 1B tokens, MFU, memory headroom, the offer used, or why the type cannot run the job — with small
// bars. The numbers are fields of the answer; "$ per 1B tokens" is its cost divided by its job's tokens.

import * as f from "./format.js";

const $ = (id) => document.getElementById(id);
const view = { result: null, key: null, descending: false };

// One row's sortable values; null where the type has no plan (such rows sort last)
function rowValues(row) {
  const plan = row.plan;
  const est = plan ? plan.estimate : null;
  const tokens = plan && plan.job && plan.job.training ? plan.job.training.tokens : null;
  return {
    gpu: row.gpu,
    time: est ? est.total_time_s : null,
    cost: est ? est.cost_usd : null,
    per_b: est && est.cost_usd !== null && tokens ? est.cost_usd / (tokens / 1e9) : null,
    mfu: est ? est.mfu : null,
    headroom: plan ? plan.memory_headroom_gib : null,
  };
}

export function showCompare(result) {
  view.result = result;
  view.key = null;
  const runnable = result.rows.filter((row) => row.plan && !row.reason).length;
  const message = $("compare-message");
  message.className = `verdict ${runnable ? "good" : "bad"}`;
  message.textContent = `${runnable} of ${result.rows.length} GPU types can run this job`
    + `${runnable ? ` within the constraints; best by ${result.objective} on each below.` : "."}`;
  $("compare-notes").replaceChildren(...result.notes.map((text) => {
    const item = document.createElement("li");
    item.textContent = text;
    return item;
  }));
  draw();
  $("compare-view").hidden = false;
}

export function hideCompare() {
  $("compare-view").hidden = true;
}

export function bindSorting() {
  for (const header of document.querySelectorAll("#compare-table th[data-sort]")) {
    header.querySelector("button").addEventListener("click", () => {
      const key = header.dataset.sort;
      view.descending = view.key === key ? !view.descending : ["mfu", "headroom"].includes(key);
      view.key = key;
      draw();
    });
  }
}

function sortedRows() {
  const rows = view.result.rows.map((row) => ({ row, values: rowValues(row) }));
  if (!view.key) return rows;  // as the answer orders them
  const sign = view.descending ? -1 : 1;
  return rows.sort((a, b) => {
    const x = a.values[view.key];
    const y = b.values[view.key];
    if (x === null || y === null) return (x === null) - (y === null);
    return (typeof x === "string" ? x.localeCompare(y) : x - y) * sign;
  });
}

function draw() {
  for (const header of document.querySelectorAll("#compare-table th[data-sort]")) {
    header.setAttribute("aria-sort", header.dataset.sort !== view.key ? "none"
      : view.descending ? "descending" : "ascending");
  }
  const rows = sortedRows();
  const largest = {};
  for (const key of ["time", "cost", "per_b", "mfu", "headroom"]) {
    largest[key] = Math.max(0, ...rows.map(({ values }) => values[key]).filter((v) => v !== null && v > 0));
  }
  $("compare-table").tBodies[0].replaceChildren(...rows.map(({ row, values }) => {
    const tr = document.createElement("tr");
    tr.dataset.testid = "compare-row";
    tr.dataset.gpu = row.gpu;
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = row.gpu;
    tr.append(name);
    if (!row.plan) {
      const why = cell(row.reason || "no configuration fits", "compare-reason");
      why.colSpan = 6;
      tr.append(why);
      tr.classList.add("cannot");
      return tr;
    }
    const est = row.plan.estimate;
    tr.append(barCell(f.duration(est.total_time_s), values.time, largest.time, "time"),
      barCell(f.money(est.cost_usd), values.cost, largest.cost, "cost"),
      barCell(values.per_b === null ? "—" : f.usd(values.per_b), values.per_b, largest.per_b, "per-b"),
      barCell(f.percent(est.mfu), values.mfu, largest.mfu, "mfu"),
      barCell(f.gib(values.headroom), values.headroom, largest.headroom, "headroom"),
      cell(hardware(row), "compare-offer"));
    if (row.reason) tr.lastChild.append(note(row.reason));
    // why it has no price (these rows come after the priced ones), and how its layout scales
    for (const text of [row.plan.no_price_reason, row.plan.scaling_note]) if (text) tr.lastChild.append(note(text));
    return tr;
  }));
}

function hardware(row) {
  const plan = row.plan;
  const offer = plan.offer;
  const layout = plan.layout;
  const rent = offer ? `${offer.provider} ${offer.instance}, ${f.usd(offer.usd_per_gpu_hour)}/GPU-h`
    + `${offer.price_date ? ` (${offer.price_date})` : ""}` : "no offer";
  return `${plan.n_gpus} × ${plan.gpu}: ${rent}; tp ${layout.tp} · pp ${layout.pp} · dp ${layout.dp} · ZeRO ${layout.zero}`;
}

function cell(text, testid) {
  const td = document.createElement("td");
  td.textContent = text;
  if (testid) td.dataset.testid = testid;
  return td;
}

function note(text) {
  const span = document.createElement("span");
  span.className = "reason";
  span.textContent = text;
  return span;
}

// A value with a bar beside it, its length against the column's largest value
function barCell(text, value, largest, testid) {
  const td = cell("", `compare-${testid}`);
  if (value !== null && value !== undefined) td.dataset.value = String(value);
  const label = document.createElement("span");
  label.className = "compare-value";
  label.textContent = text;
  const bar = document.createElement("span");
  bar.className = "mini-bar";
  bar.setAttribute("aria-hidden", "true");
  const fill = document.createElement("span");
  fill.className = "mini-fill";
  fill.style.width = `${value > 0 && largest > 0 ? Math.max(2, (value / largest) * 100) : 0}%`;
  bar.append(fill);
  td.append(label, bar);
  return td;
}
