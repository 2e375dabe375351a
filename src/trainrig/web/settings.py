"""The server's limits, in one frozen object that `trainrig serve` fills from its options."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Settings", "MAX_WHAT_IFS", "MAX_PLAN_GPUS", "MAX_TOP_PLANS", "MAX_GPU_TYPES", "MAX_NAME_CHARS"]

MAX_WHAT_IFS = 8
"""What-if variants one estimate request may ask for (each is a whole estimate)."""
MAX_PLAN_GPUS = 65536
"""The largest `max_gpus` a plan request may search up to."""
MAX_TOP_PLANS = 20
"""The most plans one plan request may ask for (each gets a full estimate and node sizing)."""
MAX_GPU_TYPES = 64
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class Settings:
    """Limits of one server; every request past them gets a 4xx or 503 naming the limit."""

    plan_timeout_s: float = 30.0
    """Wall time one plan or compare search may take, waiting for a free slot included."""
    max_body_bytes: int = 1_000_000
    """Largest request body accepted (a config.json is a few kB)."""
    max_parallel_plans: int = 2
    """Plan searches running at once, each in its own process."""
