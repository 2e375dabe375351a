"""The hardware the planner may choose: GPU types, node shapes, cloud offers and GPU counts.

Each `HardwareOption` is one kind of node: a catalog GPU in nodes of 8 with the catalog's default
links (what you would build or lease without a quote), or a cloud offer with its own node size,
interconnect, network and price. Its `hardware_mapping(n_gpus)` is the job file's `hardware`
section, so a plan's job is exactly what `load_job` builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from trainrig.catalog import Catalog
from trainrig.errors import TrainrigError
from trainrig.specs import GPU, HardwareProfile, Offer

__all__ = ["HardwareOption", "hardware_options", "resolve_gpu_types", "with_profile",
           "CATALOG_NODE_GPUS", "NODE_COUNTS"]

CATALOG_NODE_GPUS = 8
"""GPUs per node when no offer says otherwise (HGX/OAM baseboards and most GPU servers)."""
NODE_COUNTS = tuple(sorted({2**k for k in range(21)} | {3 * 2**k for k in range(20)}))
"""Node counts tried for multi-node jobs: powers of two and three times powers of two."""


@dataclass(frozen=True)
class HardwareOption:
    """One kind of node the job may run on, optionally rented from an offer."""

    gpu: GPU
    gpus_per_node: int
    smallest_gpus: int
    clusters: bool
    offer: Offer | None = None
    intra_node: str | None = None
    network: str | None = None
    network_ports: int | None = None
    profile: HardwareProfile | None = None
    """Measured ceilings of this GPU type (a `trainrig probe --save` profile), used instead of datasheets."""

    @property
    def price_usd_per_gpu_hour(self) -> float | None:
        return self.offer.usd_per_gpu_hour if self.offer else None

    @property
    def label(self) -> str:
        """`aws p5.48xlarge` or `H100-SXM5-80GB nodes of 8 (no offer)`."""
        if self.offer:
            return f"{self.offer.provider} {self.offer.instance}"
        return f"{self.gpu.id} nodes of {self.gpus_per_node} (no offer)"

    def gpu_counts(self, max_gpus: int, max_nodes: int | None) -> tuple[int, ...]:
        """GPU counts this node kind offers up to the limits: part of one node (powers of two from the
        smallest instance), then whole nodes in NODE_COUNTS steps where the nodes can cluster."""
        single = [n for n in _powers_of_two(self.gpus_per_node) if n >= self.smallest_gpus] + [self.gpus_per_node]
        nodes = [k for k in NODE_COUNTS if k >= 2 and (max_nodes is None or k <= max_nodes)] if self.clusters else []
        counts = set(single) | {k * self.gpus_per_node for k in nodes}
        return tuple(sorted(n for n in counts if n <= max_gpus))

    def hardware_mapping(self, n_gpus: int) -> dict:
        """The job file's `hardware` section for `n_gpus` of these nodes."""
        mapping: dict = {"gpu": self.gpu.id, "n_gpus": n_gpus, "gpus_per_node": self.gpus_per_node}
        if self.intra_node:
            mapping["intra_node"] = self.intra_node
        if self.network and n_gpus > self.gpus_per_node:
            mapping["inter_node"] = {"link": self.network, "ports_per_node": self.network_ports or self.gpus_per_node}
        if self.profile is not None:
            mapping["profile"] = self.profile.model_dump(mode="json", exclude_none=True)
        return mapping


def with_profile(options: list[HardwareOption],
                 profile: HardwareProfile | None) -> tuple[list[HardwareOption], list[str]]:
    """Attach a probe profile to the options of the GPU type it measured; say so, or why not."""
    if profile is None:
        return options, []
    matching = profile.gpu_catalog_id
    if matching is None:
        return options, ["the profile measured no GPU: planned with datasheet figures"]
    changed = [replace(o, profile=profile) if o.gpu.id == matching else o for o in options]
    if not any(o.gpu.id == matching for o in options):
        return options, [f"the profile is for {matching}, which is not among the GPU types searched; not used"]
    return changed, [f"{matching} uses the measured ceilings of the profile ({profile.measured_at or 'undated'})"]


def resolve_gpu_types(catalog: Catalog, names: Sequence[str] | None) -> list[GPU]:
    """The GPUs `names` call for (ids or aliases), or the whole catalog when `names` is None."""
    if names is None:
        return list(catalog.gpus)
    if not names:
        raise TrainrigError("gpu_types", "is empty; name at least one GPU (e.g. h100) or leave it out for all.")
    gpus: dict[str, GPU] = {}
    for name in names:
        try:
            gpu = catalog.gpus.get(str(name)).entry
        except TrainrigError as error:
            raise TrainrigError("gpu_types", error.message) from None
        gpus.setdefault(gpu.id, gpu)
    return list(gpus.values())


def hardware_options(catalog: Catalog, gpus: Iterable[GPU], offers: Iterable[Offer], precision: str,
                     priced_only: bool = False) -> tuple[list[HardwareOption], list[str]]:
    """Node kinds for the allowed GPUs that support `precision`, and notes on what was left out.

    Per GPU: catalog nodes of 8 (unless `priced_only`), and each offer for it; offers that differ only
    in price keep the cheapest (the others are the same hardware for more money)."""
    allowed = {gpu.id: gpu for gpu in gpus}
    unsupported = sorted(gid for gid, gpu in allowed.items() if gpu.peak(precision) is None)
    usable = {gid: gpu for gid, gpu in allowed.items() if gid not in unsupported}
    if not usable:
        names = ", ".join(sorted(allowed))
        raise TrainrigError("precision", f"none of the allowed GPUs ({names}) supports {precision}.")
    notes = [f"left out {', '.join(unsupported)}: no {precision} support"] if unsupported else []
    # offers first: where an offer is the same machine as a catalog node, rank ties keep the offer
    options = _offer_options(catalog, offers, usable, priced_only)
    options += [] if priced_only else [_catalog_node(gpu) for gpu in usable.values()]
    if not options:
        raise TrainrigError("offers", "no priced offer exists for the allowed GPUs; drop --priced-only or add offers.")
    return options, notes


def _catalog_node(gpu: GPU) -> HardwareOption:
    return HardwareOption(gpu=gpu, gpus_per_node=CATALOG_NODE_GPUS, smallest_gpus=1, clusters=True)


def _offer_options(catalog: Catalog, offers: Iterable[Offer], usable: dict[str, GPU],
                   priced_only: bool) -> list[HardwareOption]:
    cheapest: dict[tuple, HardwareOption] = {}
    for offer in offers:
        gpu = _offer_gpu(catalog, offer)
        if gpu.id not in usable or (priced_only and offer.usd_per_gpu_hour is None):
            continue
        option = HardwareOption(
            gpu=gpu, gpus_per_node=offer.gpus_per_node, smallest_gpus=offer.smallest_gpus,
            clusters=offer.clusters, offer=offer, intra_node=_offer_link(catalog, offer, "interconnect"),
            network=_offer_link(catalog, offer, "network"), network_ports=offer.network_ports)
        key = (gpu.id, option.gpus_per_node, option.smallest_gpus, option.intra_node, option.network,
               option.network_ports)
        if key not in cheapest or _cheaper(option, cheapest[key]):
            cheapest[key] = option
    return list(cheapest.values())


def _cheaper(a: HardwareOption, b: HardwareOption) -> bool:
    pa, pb = a.price_usd_per_gpu_hour, b.price_usd_per_gpu_hour
    return pa is not None and (pb is None or pa < pb)


def _offer_gpu(catalog: Catalog, offer: Offer) -> GPU:
    try:
        return catalog.gpus.get(offer.gpu).entry
    except TrainrigError as error:
        raise TrainrigError(f"offers.{offer.id}.gpu", error.message) from None


def _offer_link(catalog: Catalog, offer: Offer, field: str) -> str | None:
    name = getattr(offer, field)
    if name is None:
        return None
    try:
        return catalog.links.get(name).entry.id
    except TrainrigError as error:
        raise TrainrigError(f"offers.{offer.id}.{field}", error.message) from None


def _powers_of_two(limit: int) -> list[int]:
    return [2**k for k in range(int(limit).bit_length()) if 2**k <= limit]
