// Hand-written SVG charts: a stacked bar (memory, step time) and the time–cost scatter of a plan.
// Colours come from CSS classes (c0 … c11), so the page needs no inline styles.

const SVG_NS = "http://www.w3.org/2000/svg";
export const PALETTE_SIZE = 12;

export function svg(name, attributes = {}, parent = null) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (parent) parent.appendChild(element);
  return element;
}

function titled(element, text) {
  svg("title", {}, element).textContent = text;
  return element;
}

// parts: [{label, value, colour}] drawn left to right; limit: a value marked by a line (memory capacity)
export function stackedBar(container, parts, { limit = null, format, label }) {
  const shown = parts.filter((part) => part.value > 0);
  const total = shown.reduce((sum, part) => sum + part.value, 0);
  const scale = Math.max(total, limit || 0) || 1;
  const chart = svg("svg", { viewBox: "0 0 1000 40", preserveAspectRatio: "none", role: "img", "aria-label": label });
  let x = 0;
  for (const part of shown) {
    const width = (part.value / scale) * 1000;
    const rect = svg("rect", { x, y: 4, width: Math.max(width, 0.5), height: 32, class: `fill-c${part.colour}` }, chart);
    titled(rect, `${part.label}: ${format(part.value)}`);
    x += width;
  }
  if (limit) {
    const at = (limit / scale) * 1000;
    svg("line", { x1: at, x2: at, y1: 0, y2: 40, class: total > limit ? "limit over" : "limit" }, chart);
  }
  container.replaceChildren(chart);
}

export function legend(container, parts, format) {
  container.replaceChildren(...parts.filter((part) => part.value > 0).map((part) => {
    const item = document.createElement("span");
    item.className = "legend-item";
    const swatch = document.createElement("span");
    swatch.className = `swatch bg-c${part.colour}`;
    item.append(swatch, `${part.label} ${format(part.value)}`);
    return item;
  }));
}

// ---- the time–cost scatter ---------------------------------------------------------------------------

const DAY_S = 86400;
const TIME_TICKS = [
  [60, "1 min"], [600, "10 min"], [3600, "1 h"], [6 * 3600, "6 h"], [DAY_S, "1 d"], [2 * DAY_S, "2 d"],
  [7 * DAY_S, "1 wk"], [14 * DAY_S, "2 wk"], [30 * DAY_S, "30 d"], [91 * DAY_S, "3 mo"], [182 * DAY_S, "6 mo"],
  [365 * DAY_S, "1 yr"], [2 * 365 * DAY_S, "2 yr"], [5 * 365 * DAY_S, "5 yr"], [10 * 365 * DAY_S, "10 yr"],
  [100 * 365 * DAY_S, "100 yr"],
];

function money(value) {
  if (value >= 1e9) return `$${+(value / 1e9).toPrecision(3)}B`;
  if (value >= 1e6) return `$${+(value / 1e6).toPrecision(3)}M`;
  if (value >= 1e3) return `$${+(value / 1e3).toPrecision(3)}k`;
  return `$${+value.toPrecision(3)}`;
}

function moneyTicks(low, high) {
  const within = (steps) => {
    const ticks = [];
    for (let power = Math.floor(Math.log10(low)); power <= Math.ceil(Math.log10(high)); power += 1) {
      for (const step of steps) {
        const value = step * 10 ** power;
        if (value >= low && value <= high) ticks.push([value, money(value)]);
      }
    }
    return ticks;
  };
  const coarse = within([1, 2, 5]);  // a narrow range gets the finer ladder, so the axis has 3+ labels
  return thin(coarse.length >= 3 ? coarse : within([1, 1.5, 2, 3, 5, 7]), 7);
}

function thin(ticks, most) {
  if (ticks.length <= most) return ticks;
  const every = Math.ceil(ticks.length / most);
  return ticks.filter((_, index) => index % every === 0);
}

function logScale(low, high, from, to) {
  const a = Math.log10(low);
  const b = Math.log10(high);
  return (value) => from + ((Math.log10(value) - a) / (b - a || 1)) * (to - from);
}

function domain(values) {
  const finite = values.filter((value) => Number.isFinite(value) && value > 0);
  const low = Math.min(...finite);
  const high = Math.max(...finite);
  const pad = 10 ** (Math.max(Math.log10(high / low), 0.3) * 0.08);
  return [low / pad, high * pad];
}

// points: FrontPoint JSON; plans: [{rank, total_time_s, cost_usd, point}]; colourOf(gpu) → palette index.
// Each GPU type has a colour and a shape (SHAPES, by colour), so the chart reads without colour too. The
// marks are one tab stop: the arrow keys move between them in time order (Home, End), each has a name for
// screen readers, and Enter, a click or a tap on a plan (or on the point of its hardware) shows its estimate.
export const SHAPES = ["circle", "square", "triangle", "diamond", "triangle-down", "cross"];

export function shapeOf(colour) {
  return SHAPES[colour % SHAPES.length];
}

export function timeCostChart(container, { points, plans, deadlineS, budgetUsd, colourOf, onPoint, onLeave, onPlan }) {
  const width = Math.max(container.clientWidth, 280);
  const height = Math.round(Math.min(420, Math.max(240, width * 0.6)));
  const margin = { left: 58, right: 16, top: 24, bottom: 38 };
  const times = [...points.map((p) => p.total_time_s), ...plans.map((p) => p.total_time_s)];
  const costs = [...points.map((p) => p.cost_usd), ...plans.map((p) => p.cost_usd)];
  if (deadlineS) times.push(deadlineS);
  if (budgetUsd) costs.push(budgetUsd);
  const [t0, t1] = domain(times);
  const [c0, c1] = domain(costs);
  const x = logScale(t0, t1, margin.left, width - margin.right);
  const y = logScale(c0, c1, height - margin.bottom, margin.top);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "group",
    "aria-label": "Total time against cost of the configurations found; the arrow keys move between them" });
  axes(chart, { x, y, t0, t1, c0, c1, width, height, margin });
  constraintLines(chart, { x, y, deadlineS, budgetUsd, width, height, margin });
  const marks = [];
  for (const point of [...points].sort((a, b) => a.on_front - b.on_front)) {
    if (!(point.total_time_s > 0 && point.cost_usd > 0)) continue;
    const plan = plans.find((p) => samePlace(p.point, point));
    const mark = symbol(chart, shapeOf(colourOf(point.gpu)), x(point.total_time_s), y(point.cost_usd),
      point.on_front ? 6.5 : 5, {
        class: `point fill-c${colourOf(point.gpu)}${point.on_front ? " front" : ""}${point.meets_constraints ? "" : " misses"}`,
        "data-testid": "plan-point", "data-gpu": point.gpu, "aria-label": describe(point, plan),
      });
    marks.push({ element: mark, point, plan, time: point.total_time_s });
  }
  for (const plan of plans) {
    if (!(plan.total_time_s > 0 && plan.cost_usd > 0)) continue;
    const mark = svg("g", { class: "plan-mark", "data-rank": plan.rank, "data-testid": "plan-mark",
      "aria-label": describe(plan.point, plan) }, chart);
    svg("circle", { cx: x(plan.total_time_s), cy: y(plan.cost_usd), r: 10 }, mark);
    const text = svg("text", { x: x(plan.total_time_s), y: y(plan.cost_usd) + 4, "text-anchor": "middle" }, mark);
    text.textContent = plan.rank;
    marks.push({ element: mark, point: plan.point, plan, time: plan.total_time_s, rank: plan.rank });
  }
  marks.sort((a, b) => a.time - b.time || (a.rank ? 1 : 0) - (b.rank ? 1 : 0));
  for (const [index, item] of marks.entries()) {
    item.element.setAttribute("role", item.plan ? "button" : "img");
    item.element.setAttribute("tabindex", "-1");
    bindHover(item.element, item.point, onPoint, onLeave);
    if (item.plan) item.element.addEventListener("click", () => onPlan(item.plan.rank));
    item.element.addEventListener("keydown", (event) => moveOrChoose(event, marks, index, onPlan));
  }
  const first = marks.find((item) => item.rank === 1) || marks[0];
  if (first) first.element.setAttribute("tabindex", "0");  // the one tab stop; the arrows move it
  container.replaceChildren(chart);
}

// The plan shown below the chart: its ring marked, and the chart's one tab stop on it
export function markSelectedPlan(container, rank) {
  const chosen = container.querySelector(`.plan-mark[data-rank="${rank}"]`);
  for (const mark of container.querySelectorAll(".plan-mark")) mark.classList.toggle("selected", mark === chosen);
  if (!chosen || container.contains(document.activeElement)) return;  // a key press moves the stop itself
  for (const mark of container.querySelectorAll("[tabindex='0']")) mark.setAttribute("tabindex", "-1");
  chosen.setAttribute("tabindex", "0");
}

function samePlace(a, b) {
  return a.gpu === b.gpu && a.n_gpus === b.n_gpus && (a.offer || null) === (b.offer || null);
}

function moveOrChoose(event, marks, index, onPlan) {
  const steps = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1, Home: -marks.length, End: marks.length };
  if ((event.key === "Enter" || event.key === " ") && marks[index].plan) {
    event.preventDefault();
    onPlan(marks[index].plan.rank);
    return;
  }
  if (!(event.key in steps)) return;
  event.preventDefault();
  const next = Math.min(marks.length - 1, Math.max(0, index + steps[event.key]));
  marks[index].element.setAttribute("tabindex", "-1");
  marks[next].element.setAttribute("tabindex", "0");
  marks[next].element.focus();
}

// "Plan 1: 8 × H100-SXM5-80GB on offer-x, 16.6 days, $175.7k; on the time–cost front; meets the constraints"
function describe(point, plan) {
  const where = point.offer ? ` on ${point.offer}` : "";
  const parts = [`${point.n_gpus} × ${point.gpu}${where}, ${durationShort(point.total_time_s)}, ${money(point.cost_usd)}`];
  if (point.on_front) parts.push("on the time–cost front");
  parts.push(point.meets_constraints ? "meets the constraints" : "misses a constraint");
  return `${plan ? `Plan ${plan.rank}: ` : ""}${parts.join("; ")}`;
}

function durationShort(seconds) {
  if (seconds >= 365 * DAY_S) return `${+(seconds / (365 * DAY_S)).toPrecision(3)} years`;
  if (seconds >= 2 * DAY_S) return `${+(seconds / DAY_S).toPrecision(3)} days`;
  if (seconds >= 3600) return `${+(seconds / 3600).toPrecision(3)} hours`;
  return `${+(seconds / 60).toPrecision(3)} minutes`;
}

// A GPU type's mark centred on (cx, cy), about the size of a circle of radius r
function symbol(parent, shape, cx, cy, r, attributes) {
  if (shape === "circle") return svg("circle", { cx, cy, r, ...attributes }, parent);
  const s = r * 0.9;
  const outline = {
    square: [[-s, -s], [s, -s], [s, s], [-s, s]],
    triangle: [[0, -1.25 * r], [1.15 * r, 0.8 * r], [-1.15 * r, 0.8 * r]],
    "triangle-down": [[0, 1.25 * r], [1.15 * r, -0.8 * r], [-1.15 * r, -0.8 * r]],
    diamond: [[0, -1.3 * r], [1.3 * r, 0], [0, 1.3 * r], [-1.3 * r, 0]],
    cross: [[-0.4, -1.1], [0.4, -1.1], [0.4, -0.4], [1.1, -0.4], [1.1, 0.4], [0.4, 0.4], [0.4, 1.1], [-0.4, 1.1],
      [-0.4, 0.4], [-1.1, 0.4], [-1.1, -0.4], [-0.4, -0.4]].map(([a, b]) => [a * r * 1.1, b * r * 1.1]),
  }[shape];
  const d = `M${outline.map(([dx, dy]) => `${(cx + dx).toFixed(1)},${(cy + dy).toFixed(1)}`).join("L")}Z`;
  return svg("path", { d, ...attributes }, parent);
}

function bindHover(element, point, onPoint, onLeave) {
  const show = (event) => {
    const box = element.getBoundingClientRect();
    onPoint(point, event.clientX || box.left + box.width / 2, event.clientY || box.top);
  };
  element.addEventListener("pointerenter", show);
  element.addEventListener("pointerdown", show);
  element.addEventListener("focus", show);
  element.addEventListener("pointerleave", onLeave);
  element.addEventListener("blur", onLeave);
}

// A label at x, anchored so that it stays inside [left, right] (about 6.5 px a character at 11 px)
function keptInside(x, text, left, right, anchor = "middle") {
  const half = (text.length * 6.5) / 2;
  if (anchor === "middle" && x - half < left) return { x: left, anchor: "start" };
  if (anchor === "middle" && x + half > right) return { x: right, anchor: "end" };
  if (anchor === "start" && x + 2 * half > right) return { x: right, anchor: "end" };
  return { x, anchor };
}

function axes(chart, { x, y, t0, t1, c0, c1, width, height, margin }) {
  const bottom = height - margin.bottom;
  svg("line", { x1: margin.left, x2: width - margin.right, y1: bottom, y2: bottom, class: "axis" }, chart);
  svg("line", { x1: margin.left, x2: margin.left, y1: margin.top, y2: bottom, class: "axis" }, chart);
  const timeTicks = thin(TIME_TICKS.filter(([value]) => value >= t0 && value <= t1), Math.max(3, Math.floor(width / 80)));
  for (const [value, label] of timeTicks) {
    svg("line", { x1: x(value), x2: x(value), y1: margin.top, y2: bottom, class: "grid" }, chart);
    const place = keptInside(x(value), label, margin.left, width - 2);
    const text = svg("text", { x: place.x, y: bottom + 16, "text-anchor": place.anchor, class: "tick" }, chart);
    text.textContent = label;
  }
  for (const [value, label] of moneyTicks(c0, c1)) {
    svg("line", { x1: margin.left, x2: width - margin.right, y1: y(value), y2: y(value), class: "grid" }, chart);
    const text = svg("text", { x: margin.left - 6, y: y(value) + 4, "text-anchor": "end", class: "tick" }, chart);
    text.textContent = label;
  }
  const xTitle = svg("text", { x: (margin.left + width - margin.right) / 2, y: height - 4, "text-anchor": "middle",
    class: "axis-title" }, chart);
  xTitle.textContent = "total time (log scale) →";
  const yTitle = svg("text", { x: 4, y: 12, class: "axis-title" }, chart);
  yTitle.textContent = "↑ cost (log scale)";
}

function constraintLines(chart, { x, y, deadlineS, budgetUsd, width, height, margin }) {
  if (deadlineS) {
    svg("line", { x1: x(deadlineS), x2: x(deadlineS), y1: margin.top, y2: height - margin.bottom,
      class: "constraint" }, chart);
    const fitsRight = keptInside(x(deadlineS) + 4, "deadline", margin.left, width - 2, "start").anchor === "start";
    const text = svg("text", { x: fitsRight ? x(deadlineS) + 4 : x(deadlineS) - 4, y: margin.top - 6,
      "text-anchor": fitsRight ? "start" : "end", class: "constraint-label" }, chart);
    text.textContent = "deadline";
  }
  if (budgetUsd) {
    svg("line", { x1: margin.left, x2: width - margin.right, y1: y(budgetUsd), y2: y(budgetUsd),
      class: "constraint" }, chart);
    const text = svg("text", { x: width - margin.right - 4, y: Math.max(y(budgetUsd) - 4, 10), "text-anchor": "end",
      class: "constraint-label" }, chart);
    text.textContent = "budget";
  }
}

// ---- the memory bar: a GiB axis, the GPU's capacity as a labelled line, the part past it hatched -----

let patternCount = 0;

function niceStep(span, most) {
  const raw = span / most;
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw) || raw;
}

function hatch(chart) {
  patternCount += 1;
  const id = `hatch-${patternCount}`;
  const defs = svg("defs", {}, chart);
  const pattern = svg("pattern", { id, width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" }, defs);
  svg("rect", { width: 6, height: 6, class: "hatch-back" }, pattern);
  svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch-line" }, pattern);
  return `url(#${id})`;
}

// parts: [{label, value, colour}]; capacity: the GPU's memory; tick(value) → axis label
export function memoryBar(container, parts, { capacity, format, tick, label, compact = false }) {
  const shown = parts.filter((part) => part.value > 0);
  const total = shown.reduce((sum, part) => sum + part.value, 0);
  const width = compact ? 160 : Math.max(container.clientWidth || 0, 280);
  const height = compact ? 18 : 62;
  const barTop = compact ? 3 : 16;
  const barHeight = compact ? 12 : 26;
  const left = compact ? 0 : 6;
  const right = compact ? 0 : 24;
  const top = Math.max(total, capacity || 0) || 1;
  const step = niceStep(top, width < 420 ? 3 : 5);
  const end = compact ? top : Math.ceil(top / step) * step;
  const x = (value) => left + (value / end) * (width - left - right);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: compact ? "mini-memory" : "memory-chart",
    "aria-label": `${label}: ${format(total)}${capacity ? ` of ${format(capacity)}` : ""}` });
  svg("rect", { x: left, y: barTop, width: x(end) - left, height: barHeight, class: "bar-back" }, chart);
  let at = 0;
  for (const part of shown) {
    const rect = svg("rect", { x: x(at), y: barTop, width: Math.max(x(at + part.value) - x(at), 0.5), height: barHeight,
      class: `fill-c${part.colour}` }, chart);
    titled(rect, `${part.label}: ${format(part.value)}`);
    at += part.value;
  }
  if (capacity && total > capacity) {  // what does not fit, hatched over the parts past the capacity
    const over = svg("rect", { x: x(capacity), y: barTop, width: x(total) - x(capacity), height: barHeight,
      fill: hatch(chart), class: "overflow" }, chart);
    titled(over, `over the capacity by ${format(total - capacity)}`);
  }
  if (!compact) {
    for (let value = 0; value <= end + step / 1000; value += step) {
      svg("line", { x1: x(value), x2: x(value), y1: barTop + barHeight, y2: barTop + barHeight + 4, class: "tick-mark" },
        chart);
      const anchor = value === 0 ? "start" : value + step > end + step / 1000 ? "end" : "middle";
      const text = svg("text", { x: x(value) + (anchor === "end" ? 4 : 0), y: height - 4, "text-anchor": anchor,
        class: "tick" }, chart);
      text.textContent = tick(value);
    }
  }
  if (capacity) {
    const cx = x(capacity);
    svg("line", { x1: cx, x2: cx, y1: compact ? 0 : barTop - 4, y2: barTop + barHeight + (compact ? 3 : 4),
      class: total > capacity ? "limit over" : "limit" }, chart);
    if (!compact) {
      const text = svg("text", { x: cx, y: 11, "text-anchor": cx > width - 120 ? "end" : "middle",
        class: "limit-label", "data-testid": "capacity-label" }, chart);
      text.textContent = `capacity ${format(capacity)}`;
    }
  }
  container.replaceChildren(chart);
}
