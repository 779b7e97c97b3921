"""Copy what is readable of a damaged cache file into a new one
(`asyncbench cache recover`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..errors import UserError
from .file import Store
from .journal import journal_dir, salvage
from .prompt_files import prompt_dir
from .schema import TABLES


def recover(broken: Path, out: Path) -> dict[str, int]:
    """Copy every readable row of every table of a damaged cache into a new one, table by
    table and in chunks, so one unreadable block loses only its own rows, then the paid
    answers its journal holds that the copy lacks (a truncated file keeps none of its
    own). Returns rows copied per table and the answers added from the journal."""
    import duckdb

    if out.exists():
        raise UserError(f"{out} exists; recover into a new file")
    try:
        src: Any = duckdb.connect(str(broken), read_only=True)
    except duckdb.Error as exc:
        src, unreadable = None, str(exc).splitlines()[0]
    has_journal = journal_dir(broken).is_dir()
    if src is None and not has_journal:
        raise UserError(f"nothing in {broken} is readable ({unreadable}) and it has no journal; "
                        "delete it and run again to rebuild the cache from the APIs")
    dst = Store(out)
    with dst.session():
        copied = {table: _copy(src, dst, table) if src is not None else 0 for table in TABLES}
        if src is not None:
            src.close()
        # the prompt files the copied `prompt_refs` point at (prompt_files.py)
        if prompt_dir(broken).is_dir() and not prompt_dir(out).exists():
            shutil.copytree(prompt_dir(broken), prompt_dir(out))
        # what the file lost, from its journal: every paid answer and its ledger row (journal.py)
        before = dst.one("SELECT count(*) FROM responses")[0]
        if has_journal:
            salvage(dst, journal_dir(broken))
        copied["answers from the journal"] = dst.one("SELECT count(*) FROM responses")[0] - before
    if has_journal and not journal_dir(out).exists():
        shutil.copytree(journal_dir(broken), journal_dir(out))
    return copied


def _copy(src: Any, dst: Store, table: str) -> int:
    """The readable rows of one table, in chunks; stops at the first unreadable one."""
    import duckdb

    copied = 0
    # OR IGNORE only where a key can conflict: DuckDB refuses it on a table without one
    # (the ledger's), which once left every ledger row behind
    (keyed,) = dst.one("SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? "
                       "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')", [table])
    insert = "INSERT OR IGNORE" if keyed else "INSERT"
    try:
        # names from our schema; an older file lacks later columns (and tables)
        columns = [c for c in dst.con.table(table).columns if c in src.table(table).columns]
        cursor = src.execute(f"SELECT {', '.join(columns)} FROM {table}")
        while rows := cursor.fetchmany(5_000):
            with dst.transaction():
                dst.con.executemany(f"{insert} INTO {table} ({', '.join(columns)}) "
                                    f"VALUES ({', '.join('?' * len(columns))})", rows)
            copied += len(rows)
    except duckdb.Error:
        pass  # the rest of this table is unreadable; keep what was copied
    return copied
