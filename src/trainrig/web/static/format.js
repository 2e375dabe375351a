// Numbers as the page shows them. Each rule is short and fixed, so a test can apply it to the CLI's JSON
// and expect the same text. Durations and money follow trainrig/units.py (duration_text, money_text) with
// the same thresholds, so the page and the CLI's tables print the same words.

const EN = "en-US";
const SECONDS_PER_YEAR = 365.25 * 86400;
const LARGE = [["trillion", 1e12], ["billion", 1e9], ["million", 1e6]];
const NA = "—";

export function percent(fraction) {
  return `${(fraction * 100).toFixed(1)}%`;
}

// Memory steps up from GiB to TiB to PiB past 1,024 of a unit, with thousands separators, so an extreme
// input reads "54.2 PiB", not "57765905.7 GiB". Below 1,024 GiB it is "x.x GiB" (the CLI's own rule).
export function gib(value) {
  if (value === null || value === undefined) return NA;
  const units = [["PiB", 1024 ** 2], ["TiB", 1024]];
  for (const [unit, scale] of units) {
    if (Math.abs(value) >= scale) return `${fixed(value / scale, 1)} ${unit}`;
  }
  return `${value.toFixed(1)} GiB`;
}

// "22.1 of 24.0 GiB": memory used against a capacity
export function gibOf(value, capacity) {
  const unit = gib(capacity).split(" ")[1];
  return unit === "GiB" && Math.abs(value) < 1024 ? `${value.toFixed(1)} of ${gib(capacity)}` : `${gib(value)} of ${gib(capacity)}`;
}

function fixed(value, digits) {
  return value.toLocaleString(EN, { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function whole(value) {
  if (value === null || value === undefined) return NA;
  return Math.round(value).toLocaleString(EN);
}

// A count that can grow without bound (GPU-hours): "4,965", past ten million "33.1 billion", as money_text does
export function bigCount(value) {
  if (value === null || value === undefined) return NA;
  return Math.abs(value) < 1e7 ? whole(value) : largeNumber(value);
}

// A price per GPU-hour: cents matter ("$2.69"); past $100 whole dollars
export function usd(value) {
  if (value === null || value === undefined) return NA;
  return value >= 100 ? `$${whole(value)}` : `$${value.toFixed(2)}`;
}

// A run's cost, as units.money_text: "$12,345", "$4.2 million", never a 20-digit amount
export function money(value) {
  if (value === null || value === undefined) return NA;
  return Math.abs(value) < 1e7 ? `$${whole(value)}` : `$${largeNumber(value)}`;
}

// Step times and durations, as units.duration_text: "850 ms", "12.4 s", "3.2 h", "41.5 days", "2,970 days",
// and past 10,000 days in years ("36.5 years", "3.7 million years")
export function duration(totalSeconds) {
  if (totalSeconds === null || totalSeconds === undefined) return NA;
  if (totalSeconds < 1) return `${threeDigits(totalSeconds * 1e3)} ms`;
  if (totalSeconds >= 10_000 * 86400) return `${largeNumber(totalSeconds / SECONDS_PER_YEAR)} years`;
  for (const [unit, scale] of [["days", 86400], ["h", 3600], ["min", 60]]) {
    if (totalSeconds >= 2 * scale) return `${threeDigits(totalSeconds / scale)} ${unit}`;
  }
  return `${threeDigits(totalSeconds)} s`;
}

export const seconds = duration;

function largeNumber(value) {
  if (value >= 1e15) return pythonG(value, 2);
  for (const [word, scale] of LARGE) {
    if (value >= scale) return `${threeDigits(value / scale)} ${word}`;
  }
  return threeDigits(value);
}

// Python's f"{v:,.0f}" past 1,000, else f"{v:.3g}": three significant digits, trailing zeros dropped
function threeDigits(value) {
  return value >= 1000 ? whole(value) : pythonG(value, 3);
}

function pythonG(value, digits) {
  const text = value.toPrecision(digits);
  if (!text.includes("e")) return String(Number(text));
  const [mantissa, exponent] = text.split("e");  // Python writes e+18, with at least two exponent digits
  const sign = exponent.startsWith("-") ? "-" : "+";
  return `${String(Number(mantissa))}e${sign}${exponent.replace(/^[+-]/, "").padStart(2, "0")}`;
}

export function count(value) {
  const units = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) {
    if (Math.abs(value) >= size) {
      const scaled = value / size;
      return scaled >= 1000 ? `${whole(scaled)} ${unit}` : `${scaled.toPrecision(3)} ${unit}`;
    }
  }
  return value.toPrecision(3);
}

export function times(factor) {
  return `×${factor.toFixed(2)}`;
}

// Results a person should double-check: they follow from the inputs, but rarely from the inputs meant.
// Each is a sentence shown beside the card it concerns.
export function implausible(est) {
  const warnings = {};
  if (est.total_time_s !== null && est.total_time_s >= 100 * SECONDS_PER_YEAR) {
    warnings["total-time"] = "over a century: check the tokens and the GPU count";
  }
  if (est.cost_usd !== null && est.cost_usd >= 1e9) warnings.cost = "over a billion dollars: check the tokens";
  if (est.memory_per_gpu_gib >= 10 * est.memory_capacity_gib) {
    warnings.memory = "ten times the GPU's memory: check the model, batch and sequence";
  }
  return warnings;
}

// "1e11", "100e9", "2.5T", "300B", "40M", "100000" → a number of tokens, or NaN
export function parseAmount(text) {
  const match = String(text).trim().replace(/[,_\s]/g, "").match(/^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([kmbt]?)$/i);
  if (!match) return NaN;
  const scale = { "": 1, k: 1e3, m: 1e6, b: 1e9, t: 1e12 }[match[2].toLowerCase()];
  return Number(match[1]) * scale;
}
