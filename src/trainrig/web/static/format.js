// Numbers as the page shows them. Each rule is short and fixed, so a test can apply it to the CLI's JSON
// and expect the same text.

const EN = "en-US";

export function percent(fraction) {
  return `${(fraction * 100).toFixed(1)}%`;
}

export function gib(value) {
  return `${value.toFixed(1)} GiB`;
}

// "22.1 of 24.0 GiB": memory used against a capacity
export function gibOf(value, capacity) {
  return `${value.toFixed(1)} of ${gib(capacity)}`;
}

export function whole(value) {
  return Math.round(value).toLocaleString(EN);
}

export function usd(value) {
  if (value === null || value === undefined) return "—";
  return value >= 100 ? `$${whole(value)}` : `$${value.toFixed(2)}`;
}

export function seconds(value) {
  if (value < 1) return `${(value * 1000).toFixed(0)} ms`;
  if (value < 100) return `${value.toFixed(2)} s`;
  return duration(value);
}

export function duration(totalSeconds) {
  if (totalSeconds === null || totalSeconds === undefined) return "—";
  const hours = totalSeconds / 3600;
  if (totalSeconds < 120) return `${totalSeconds.toFixed(0)} s`;
  if (hours < 2) return `${(totalSeconds / 60).toFixed(0)} min`;
  if (hours < 48) return `${hours.toFixed(1)} h`;
  const days = hours / 24;
  return days < 1000 ? `${days.toFixed(1)} days` : `${(days / 365.25).toFixed(1)} years`;
}

export function count(value) {
  const units = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) {
    if (Math.abs(value) >= size) return `${(value / size).toPrecision(3)} ${unit}`;
  }
  return value.toPrecision(3);
}

export function times(factor) {
  return `×${factor.toFixed(2)}`;
}

// "1e11", "100e9", "2.5T", "300B", "40M", "100000" → a number of tokens, or NaN
export function parseAmount(text) {
  const match = String(text).trim().replace(/[,_\s]/g, "").match(/^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([kmbt]?)$/i);
  if (!match) return NaN;
  const scale = { "": 1, k: 1e3, m: 1e6, b: 1e9, t: 1e12 }[match[2].toLowerCase()];
  return Number(match[1]) * scale;
}
