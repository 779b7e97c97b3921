"""Rows to a parquet file through an in-memory DuckDB table: no pyarrow needed, and the
path goes to the relation API, never into SQL text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import UserError
from .connection import unnest


def write_parquet(rows: Sequence[Mapping[str, object]], columns: Sequence[tuple[str, str]], out: Path) -> None:
    """Write `rows` to `out`; `columns`: (name, DuckDB type) in the file's order."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE samples (" + ", ".join(f'"{c}" {t}' for c, t in columns) + ")")
        if rows:
            cols = [[r[c] for r in rows] for c, _ in columns]
            con.execute(f"INSERT INTO samples SELECT {unnest(len(cols))}", cols)
        con.table("samples").write_parquet(str(out))
    except duckdb.Error as exc:
        raise UserError(f"cannot write {out}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
