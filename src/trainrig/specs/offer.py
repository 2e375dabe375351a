"""What a cloud offer is: an instance type someone rents out, its GPUs, links and on-demand price."""

from __future__ import annotations

import datetime as dt

from pydantic import Field, model_validator

from trainrig.errors import TrainrigError
from trainrig.specs.base import MAX_FIGURE, MAX_GPUS, CatalogEntry

__all__ = ["Offer"]


class Offer(CatalogEntry):
    """One rentable instance type (a node), priced per GPU-hour on demand."""

    provider: str
    """Who rents it out, e.g. `aws`, `lambda`, `runpod`."""
    instance: str
    """The provider's name for the instance type, e.g. `p5.48xlarge`."""
    gpu: str
    """GPU catalog id (or alias) of the accelerators in it."""
    gpus_per_node: int = Field(gt=0, le=MAX_GPUS)
    """GPUs in the largest instance of this type (one node)."""
    min_gpus: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Fewest GPUs rentable on one node at this per-GPU price (pods of 1–8); null = whole nodes only."""
    interconnect: str | None = None
    """Link catalog id joining the GPUs inside a node (`nvlink4`, `pcie4-x16` …); null = the GPU's default."""
    network: str | None = None
    """Link catalog id of one port of the network between nodes (`ib-ndr`, `eth-100g` …); null = not
    stated, and the planner keeps the offer to a single node."""
    network_ports: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Ports of that network per node; null = the link's usual count (one per GPU for rail networks)."""
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """On-demand price per GPU-hour in USD; null where the provider publishes none ("contact sales")."""
    price_date: dt.date
    """The day the price was read."""
    region: str | None = None
    """Region the price applies to, where prices differ by region."""

    @model_validator(mode="after")
    def _check_counts(self) -> Offer:
        if self.min_gpus is not None and self.min_gpus > self.gpus_per_node:
            raise TrainrigError("offers.min_gpus", f"{self.min_gpus} exceeds gpus_per_node {self.gpus_per_node}.")
        return self

    @property
    def smallest_gpus(self) -> int:
        """Fewest GPUs one instance of this type holds."""
        return self.min_gpus or self.gpus_per_node

    @property
    def clusters(self) -> bool:
        """Whether several nodes can train together: only where the offer states its network."""
        return self.network is not None
