"""Copy what is readable of a damaged cache file into a new one
(`asyncbench cache recover`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import UserError
from .file import Store
from .prompt_files import prompt_dir
from .schema import TABLES


def recover(broken: Path, out: Path) -> dict[str, int]:
    """Copy every readable row of every table of a damaged cache into a new one, table by
    table and in chunks, so one unreadable block loses only its own rows. Returns rows
    copied per table."""
    import duckdb

    if out.exists():
        raise UserError(f"{out} exists; recover into a new file")
    try:
        src = duckdb.connect(str(broken), read_only=True)
    except duckdb.Error as exc:
        raise UserError(f"nothing in {broken} is readable ({str(exc).splitlines()[0]}); "
                        "delete it and run again to rebuild the cache from the APIs") from None
    copied: dict[str, int] = {}
    dst = Store(out)
    with dst.session():
        for table in TABLES:
            copied[table] = 0
            try:
                # names from our schema; an older file lacks later columns (and tables)
                columns = [c for c in dst.con.table(table).columns if c in src.table(table).columns]
                cursor = src.execute(f"SELECT {', '.join(columns)} FROM {table}")
                while rows := cursor.fetchmany(5_000):
                    with dst.transaction():
                        dst.con.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) "
                                            f"VALUES ({', '.join('?' * len(columns))})", rows)
                    copied[table] += len(rows)
            except duckdb.Error:
                continue  # the rest of this table is unreadable; keep what was copied
    src.close()
    # the prompt files the copied `prompt_refs` point at (prompt_files.py)
    if prompt_dir(broken).is_dir() and not prompt_dir(out).exists():
        shutil.copytree(prompt_dir(broken), prompt_dir(out))
    return copied

