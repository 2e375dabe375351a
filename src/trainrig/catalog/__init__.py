"""The catalog: GPUs, links, CPUs, host memory, storage, model presets and cloud offers, from YAML data files."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trainrig.catalog.registry import Resolved, Section, build_section, catalog_dirs, check_offer_names, read_sections
from trainrig.specs import CPU, GPU, FrameworkSpec, HostMemory, Link, ModelPreset, Offer, Storage

__all__ = ["Catalog", "load_catalog", "get_gpu", "get_link", "Resolved", "Section"]


@dataclass(frozen=True)
class Catalog:
    """Every section of the catalog, each searchable by id or alias."""

    gpus: Section[GPU]
    links: Section[Link]
    cpus: Section[CPU]
    host_memory: Section[HostMemory]
    storage: Section[Storage]
    models: Section[ModelPreset]
    offers: Section[Offer]
    frameworks: Section[FrameworkSpec]


def load_catalog(extra_dirs: tuple[str, ...] = ()) -> Catalog:
    """The packaged catalog plus TRAINRIG_CATALOG's and `extra_dirs`' files (cached per set of dirs)."""
    return _load(catalog_dirs(tuple(extra_dirs)))


@lru_cache(maxsize=8)
def _load(dirs) -> Catalog:
    raw = read_sections(dirs)
    catalog = Catalog(
        gpus=build_section("GPU", "hardware.gpu", GPU, raw.get("gpus", [])),
        links=build_section("link", "hardware.link", Link, raw.get("links", [])),
        cpus=build_section("CPU", "hardware.cpu", CPU, raw.get("cpus", [])),
        host_memory=build_section("host memory", "hardware.host_memory", HostMemory, raw.get("host_memory", [])),
        storage=build_section("storage", "hardware.storage", Storage, raw.get("storage", [])),
        models=build_section("model", "model", ModelPreset, raw.get("models", [])),
        offers=build_section("offer", "offers", Offer, raw.get("offers", [])),
        frameworks=build_section("framework", "training.framework", FrameworkSpec, raw.get("frameworks", [])),
    )
    check_offer_names(catalog.offers, catalog.gpus, catalog.links)
    return catalog


def get_gpu(name: str, extra_dirs: tuple[str, ...] = ()) -> GPU:
    """The GPU called `name` (id or alias, case-insensitive)."""
    return load_catalog(extra_dirs).gpus.get(name).entry


def get_link(name: str, extra_dirs: tuple[str, ...] = ()) -> Link:
    """The link called `name` (`nvlink4`, `pcie5-x16`, `ib-ndr` …)."""
    return load_catalog(extra_dirs).links.get(name).entry
