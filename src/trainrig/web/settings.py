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
    max_queued_plans: int = 8
    """Plan searches waiting for a free process; one more is refused at once with a 503 and Retry-After."""
    request_timeout_s: float = 10.0
    """Wall time of one estimate, fit, node or model request, waiting for a free process included."""
    max_parallel_requests: int = 2
    """Estimate, fit, node and model requests running at once: their own processes, never behind a plan."""
    max_queued_requests: int = 16
    """Such requests waiting for a free process; one more is refused at once with a 503 and Retry-After."""
    result_cache_entries: int = 128
    """Answers kept per pool (least recently used dropped first): a repeated request is not computed again."""
    max_stored_jobs: int = 64
    """Plan and compare jobs kept for polling (`/api/plan/jobs`); past it the oldest finished are dropped."""
    body_timeout_s: float = 10.0
    """Time a client has to send a request body once its head is in; past it, a 408 and the connection closes."""
    header_timeout_s: float = 10.0
    """Time a client has to send a request's head (`trainrig serve` only: it is the HTTP server's part)."""
    keep_alive_s: int = 5
    """An idle keep-alive connection is closed after this long (uvicorn's timeout_keep_alive)."""
