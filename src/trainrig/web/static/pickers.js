// The GPU picker: the catalog's GPUs grouped by vendor, each with its memory, bf16 TFLOP/s and cheapest
// catalog price (with the offer and the date its price was read), and a type-ahead box over ids and aliases.
// Every figure is a field of /api/gpus or /api/catalog.

const $ = (id) => document.getElementById(id);
const VENDORS = { nvidia: "NVIDIA", amd: "AMD", intel: "Intel" };

export function cheapestOffer(offers, gpu) {
  return offers.filter((offer) => offer.gpu === gpu && offer.usd_per_gpu_hour)
    .sort((a, b) => a.usd_per_gpu_hour - b.usd_per_gpu_hour)[0] || null;
}

function gpuLabel(gpu, offer) {
  const parts = [`${gpu.id}`, `${gpu.memory_gib} GiB`];
  const bf16 = gpu.peak_tflops && gpu.peak_tflops.bf16;
  parts.push(bf16 ? `${Math.round(bf16).toLocaleString("en-US")} TFLOP/s bf16` : "no bf16");
  if (offer) parts.push(`from $${offer.usd_per_gpu_hour.toFixed(2)}/h`);
  return parts.join(" · ");
}

// Fill the GPU select (one optgroup per vendor) and the type-ahead list; `preferred` starts selected
export function fillGpuPicker(gpus, offers, preferred) {
  const select = $("gpu");
  const groups = new Map();
  for (const gpu of gpus) {
    const vendor = VENDORS[gpu.vendor] || gpu.vendor || "other";
    if (!groups.has(vendor)) groups.set(vendor, []);
    groups.get(vendor).push(gpu);
  }
  select.replaceChildren(...[...groups].map(([vendor, members]) => {
    const group = document.createElement("optgroup");
    group.label = vendor;
    group.replaceChildren(...members.map((gpu) => {
      const option = document.createElement("option");
      option.value = gpu.id;
      option.textContent = gpuLabel(gpu, cheapestOffer(offers, gpu.id));
      option.defaultSelected = gpu.id === preferred;
      return option;
    }));
    return group;
  }));
  select.value = gpus.some((gpu) => gpu.id === preferred) ? preferred : gpus[0].id;
  $("gpu-names").replaceChildren(...gpus.flatMap((gpu) => [gpu.id, ...(gpu.aliases || [])].map((name) => {
    const option = document.createElement("option");
    option.value = name;
    option.label = gpu.id === name ? gpu.name : `${gpu.id} (${gpu.name})`;
    return option;
  })));
  const search = $("gpu-search");
  const choose = () => {
    const wanted = search.value.trim().toLowerCase();
    const match = gpus.find((gpu) => gpu.id.toLowerCase() === wanted
      || (gpu.aliases || []).some((alias) => alias.toLowerCase() === wanted));
    search.setCustomValidity("");
    if (match && select.value !== match.id) {
      select.value = match.id;
      select.dispatchEvent(new Event("change", { bubbles: true }));  // price and live estimate follow
    }
  };
  search.addEventListener("input", choose);
  search.addEventListener("change", choose);
}

// The chosen GPU's figures and its cheapest offer, under the select and the price box
export function describeGpu(gpus, offers) {
  const gpu = gpus.find((candidate) => candidate.id === $("gpu").value);
  const info = $("gpu-info");
  const source = $("price-source");
  if (!gpu) {
    info.textContent = "";
    source.textContent = "";
    return;
  }
  const bf16 = gpu.peak_tflops && gpu.peak_tflops.bf16;
  info.textContent = `${gpu.name}: ${gpu.memory_gib} GiB ${gpu.memory_type || ""}, `
    + `${bf16 ? `${bf16} TFLOP/s bf16 (dense)` : "no bf16"}`;
  const offer = cheapestOffer(offers, gpu.id);
  source.textContent = offer
    ? `Cheapest catalog offer: ${offer.provider} ${offer.instance}, $${offer.usd_per_gpu_hour.toFixed(2)}/GPU-h`
      + `${offer.price_date ? `, price read ${offer.price_date}` : ""}.`
    : "No catalog offer for this GPU: give a price for the cost.";
}

// A select filled from the catalog starts at `value` (and counts it as its default)
export function setDefault(select, value) {
  const option = [...select.options].find((candidate) => candidate.value === value);
  if (!option) return;
  option.defaultSelected = true;
  select.value = value;
}
