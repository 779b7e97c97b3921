"""DuckDB-backed response cache and run store."""

from .duckdb_store import Store, default_cache_path

__all__ = ["Store", "default_cache_path"]
