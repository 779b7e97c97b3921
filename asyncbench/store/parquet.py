"""Rows to a parquet file, and columns back from one, through an in-memory DuckDB: no
pyarrow needed, and the path goes to the relation API, never into SQL text."""

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


def read_parquet_columns(path: Path, wanted: Sequence[str], required: Sequence[str]) -> list[dict[str, object]]:
    """The `wanted` columns a parquet file has (only those are read: a `samples` export's
    prompts and answers are not), one dict a row; UserError naming a `required` column it
    lacks or a file that is not parquet."""
    import duckdb

    con = duckdb.connect()
    try:
        rel = con.read_parquet(str(path))
        missing = [c for c in required if c not in rel.columns]
        if missing:
            raise UserError(f"{path}: no {missing[0]} column")
        present = [c for c in wanted if c in rel.columns]
        rows = rel.select(*present).fetchall()
    except duckdb.Error as exc:
        raise UserError(f"{path} is not a readable parquet file ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()
    return [dict(zip(present, row)) for row in rows]
