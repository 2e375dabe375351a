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

// points: FrontPoint JSON; plans: [{rank, total_time_s, cost_usd}]; colourOf(gpu) → palette index
export function timeCostChart(container, { points, plans, deadlineS, budgetUsd, colourOf, onPoint, onLeave, onPlan }) {
  const width = Math.max(container.clientWidth, 280);
  const height = Math.round(Math.min(420, Math.max(240, width * 0.6)));
  const margin = { left: 58, right: 14, top: 24, bottom: 38 };
  const times = [...points.map((p) => p.total_time_s), ...plans.map((p) => p.total_time_s)];
  const costs = [...points.map((p) => p.cost_usd), ...plans.map((p) => p.cost_usd)];
  if (deadlineS) times.push(deadlineS);
  if (budgetUsd) costs.push(budgetUsd);
  const [t0, t1] = domain(times);
  const [c0, c1] = domain(costs);
  const x = logScale(t0, t1, margin.left, width - margin.right);
  const y = logScale(c0, c1, height - margin.bottom, margin.top);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": "Total time against cost of the configurations found" });
  axes(chart, { x, y, t0, t1, c0, c1, width, height, margin });
  constraintLines(chart, { x, y, deadlineS, budgetUsd, width, height, margin });
  for (const point of [...points].sort((a, b) => a.on_front - b.on_front)) {
    if (!(point.total_time_s > 0 && point.cost_usd > 0)) continue;
    const dot = svg("circle", {
      cx: x(point.total_time_s), cy: y(point.cost_usd), r: point.on_front ? 6.5 : 5, tabindex: 0,
      class: `point fill-c${colourOf(point.gpu)}${point.on_front ? " front" : ""}${point.meets_constraints ? "" : " misses"}`,
      "data-testid": "plan-point",
    }, chart);
    bindHover(dot, point, onPoint, onLeave);
  }
  for (const plan of plans) {
    if (!(plan.total_time_s > 0 && plan.cost_usd > 0)) continue;
    const mark = svg("g", { class: "plan-mark", tabindex: 0, "data-rank": plan.rank }, chart);
    svg("circle", { cx: x(plan.total_time_s), cy: y(plan.cost_usd), r: 10 }, mark);
    const text = svg("text", { x: x(plan.total_time_s), y: y(plan.cost_usd) + 4, "text-anchor": "middle" }, mark);
    text.textContent = plan.rank;
    bindHover(mark, plan.point, onPoint, onLeave);
    mark.addEventListener("click", () => onPlan(plan.rank));
    mark.addEventListener("keydown", (event) => { if (event.key === "Enter") onPlan(plan.rank); });
  }
  container.replaceChildren(chart);
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

function axes(chart, { x, y, t0, t1, c0, c1, width, height, margin }) {
  const bottom = height - margin.bottom;
  svg("line", { x1: margin.left, x2: width - margin.right, y1: bottom, y2: bottom, class: "axis" }, chart);
  svg("line", { x1: margin.left, x2: margin.left, y1: margin.top, y2: bottom, class: "axis" }, chart);
  const timeTicks = thin(TIME_TICKS.filter(([value]) => value >= t0 && value <= t1), Math.max(3, Math.floor(width / 80)));
  for (const [value, label] of timeTicks) {
    svg("line", { x1: x(value), x2: x(value), y1: margin.top, y2: bottom, class: "grid" }, chart);
    const text = svg("text", { x: x(value), y: bottom + 16, "text-anchor": "middle", class: "tick" }, chart);
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
    const text = svg("text", { x: x(deadlineS) + 4, y: margin.top - 6, class: "constraint-label" }, chart);
    text.textContent = "deadline";
  }
  if (budgetUsd) {
    svg("line", { x1: margin.left, x2: width - margin.right, y1: y(budgetUsd), y2: y(budgetUsd),
      class: "constraint" }, chart);
    const text = svg("text", { x: width - margin.right - 4, y: y(budgetUsd) - 4, "text-anchor": "end",
      class: "constraint-label" }, chart);
    text.textContent = "budget";
  }
}
