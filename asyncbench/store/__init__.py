"""The DuckDB file that holds the response cache and the run record (see file.py)."""

from .file import Store, default_cache_path

__all__ = ["Store", "default_cache_path"]
