"""The base of every spec: frozen, strict about unknown fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FrozenSpec(BaseModel):
    """Immutable and hashable; an unknown key is an error, not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())


class CatalogEntry(FrozenSpec):
    """Fields every catalog entry shares: an id, names it also answers to, and where its figures come from."""

    id: str
    """The catalog id, e.g. `H100-SXM5-80GB`; looked up case-insensitively."""
    name: str
    """A human-readable name, e.g. `NVIDIA H100 SXM5 80GB`."""
    aliases: tuple[str, ...] = ()
    """Other names that resolve to this entry (case-insensitive)."""
    sources: tuple[str, ...] = Field(min_length=1)
    """Datasheets, papers or measurements behind the figures; at least one."""
    notes: str | None = None
    """Anything a user should know about the figures (e.g. which clock a peak assumes)."""
