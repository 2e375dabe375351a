"""Match the name NVML reports ("NVIDIA A100 80GB PCIe") to a catalog GPU (`A100-PCIE-80GB`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trainrig.catalog import Section
from trainrig.errors import TrainrigError
from trainrig.specs import GPU

__all__ = ["GpuMatch", "match_gpu"]

_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "radeon", "intel",
                 "habana", "generation", "hbm3", "hbm3e", "hbm2", "hbm2e", "gpu"}
_FORM_WORDS = {"pcie": "pcie", "sxm": "sxm", "sxm2": "sxm", "sxm3": "sxm", "sxm4": "sxm",
               "sxm5": "sxm", "nvl": "nvl", "oam": "oam"}
MEMORY_TOLERANCE = 0.12
"""NVML's total memory is a little below the marketed size (81559 MiB on an "80 GB" H100)."""


@dataclass(frozen=True)
class GpuMatch:
    catalog_id: str | None
    note: str | None


def match_gpu(name: str | None, memory_gib: float | None, gpus: Section[GPU]) -> GpuMatch:
    """The catalog entry for a GPU as the driver names it, or None with a note saying why."""
    if not name:
        return GpuMatch(None, "NVML gave no name")
    for candidate in (name, _strip_vendor(name)):
        try:
            resolved = gpus.get(candidate)
        except TrainrigError:
            continue
        return GpuMatch(resolved.entry.id, f"'{name}' is {resolved.entry.id} (by name)")
    return _match_by_tokens(name, memory_gib, list(gpus))


def _match_by_tokens(name: str, memory_gib: float | None, entries: list[GPU]) -> GpuMatch:
    tokens = _tokens(name)
    models = [t for t in tokens if re.search(r"\d", t) and not t.endswith("gb")]
    if not models:
        return GpuMatch(None, f"'{name}': no model number to look up")
    scored = sorted(
        ((_score(tokens, models, memory_gib, entry), entry.id) for entry in entries),
        reverse=True,
    )
    scored = [(score, ident) for score, ident in scored if score > 0]
    if not scored:
        return GpuMatch(None, f"'{name}' is not in the catalog; add it with --catalog DIR")
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        ties = ", ".join(ident for score, ident in scored if score == scored[0][0])
        return GpuMatch(None, f"'{name}' could be {ties}; pass the GPU explicitly")
    return GpuMatch(scored[0][1], f"'{name}' matched {scored[0][1]} (model, memory, form factor)")


def _score(tokens: set[str], models: list[str], memory_gib: float | None, entry: GPU) -> float:
    entry_tokens = _entry_tokens(entry)
    if not all(model in entry_tokens for model in models):
        return 0.0
    score = 10.0 + len(tokens & entry_tokens)
    score += _memory_score(tokens, memory_gib, entry)
    forms = {_FORM_WORDS[t] for t in tokens if t in _FORM_WORDS}
    if forms:
        score += 3.0 if entry.form_factor in forms else -3.0
    elif entry.form_factor == "pcie":
        score -= 0.5  # NVML names SXM parts without "SXM" ("NVIDIA H100 80GB HBM3") but says "PCIe"
    return score


def _memory_score(tokens: set[str], memory_gib: float | None, entry: GPU) -> float:
    named = [float(t[:-2]) for t in tokens if re.fullmatch(r"\d+gb", t)]
    sizes = named or ([memory_gib] if memory_gib else [])
    if not sizes:
        return 0.0
    close = any(abs(size - entry.memory_gib) <= MEMORY_TOLERANCE * entry.memory_gib for size in sizes)
    return 4.0 if close else -6.0


def _entry_tokens(entry: GPU) -> set[str]:
    words: set[str] = set()
    for text in (entry.id, entry.name, *entry.aliases):
        words |= _tokens(text)
    return words


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t and t not in _VENDOR_WORDS}


def _strip_vendor(name: str) -> str:
    return " ".join(w for w in name.split() if w.lower() not in {"nvidia", "tesla", "geforce"})


def catalog_ids(entries: Iterable[GPU]) -> list[str]:
    return [e.id for e in entries]
