"""Matplotlib figures as inline SVG, for self-contained HTML pages (no files, no CDN)."""

from __future__ import annotations

import io
from typing import Any

__all__ = ["inline_svg"]


def inline_svg(fig: Any) -> str:
    """The figure's `<svg>` element, without the XML prolog, ready to embed in an HTML page."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]
