"""Where the monitor keeps its data: `$TRAINRIG_HOME` (default `~/.trainrig`), one SQLite file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_HOME", "DATABASE_NAME", "trainrig_home", "database_path"]

ENV_HOME = "TRAINRIG_HOME"
DATABASE_NAME = "monitor.sqlite"


def trainrig_home(home: str | Path | None = None) -> Path:
    """`home` if given, else `$TRAINRIG_HOME`, else `~/.trainrig`."""
    chosen = home or os.environ.get(ENV_HOME) or Path.home() / ".trainrig"
    return Path(chosen).expanduser()


def database_path(home: str | Path | None = None) -> Path:
    """The monitor's database under the home directory."""
    return trainrig_home(home) / DATABASE_NAME
