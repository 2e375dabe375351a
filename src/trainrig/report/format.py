"""Number formatting shared by every table: units, N/A for what is missing."""

from __future__ import annotations

from trainrig.units import NA, duration_text, money_text

__all__ = ["NA", "na", "params_text", "duration_text", "money_text", "layout_text"]


def na(value: float | None, fmt: str = "{:,.1f}") -> str:
    """A number, or N/A when it is missing: never -1, never 0 for unknown."""
    return NA if value is None else fmt.format(value)


def params_text(n: float) -> str:
    """8030261248 → `8.03B`."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def layout_text(config: dict) -> str:
    """One line of how a job runs: parallelism, ZeRO, recompute, precision, batch — plus the
    fine-tuning method and framework when the job names them (an estimate's or a fit's `config`)."""
    c = config
    vpp = c.get("vpp", 1)
    line = (f"tp {c['tp']} · pp {c['pp']}" + (f"×{vpp}" if vpp > 1 else "")
            + f" · cp {c['cp']} · ep {c['ep']} · dp {c['dp']} · ZeRO {c['zero']} · recompute {c['recompute']}"
            + f" · {c['precision']} · seq {c['seq_len']:,} · micro-batch {c['micro_batch']}"
            + f" · global batch {c['global_batch']} ({c['grad_accum']} accumulation steps)")
    if c.get("method", "full") != "full":
        line += f" · {c['method']}"
    if c.get("framework", "custom") != "custom":
        line += f" · {c['framework']}"
    return line
