"""Where benchmark data comes from: a directory the user names, else the Hugging Face hub.

`--data-dir DIR` or the ASYNCBENCH_DATA_DIR environment variable name a directory laid
out like ../shared/data (minilongbench/, longbench/, bamboo/ ...). Without one, loaders
fetch the public releases from the hub on first use and keep them in the user's cache.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError

ENV_VAR = "ASYNCBENCH_DATA_DIR"


def resolve_data_dir(cli_value: str | None) -> Path | None:
    """The data directory in force, or None to use the hub."""
    value = cli_value or os.environ.get(ENV_VAR)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UserError(f"data directory {value!r} does not exist; pass --data-dir DIR or set {ENV_VAR}")
    return path


def cache_root() -> Path:
    """The user's cache directory for asyncbench (store, downloaded data)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "asyncbench"
