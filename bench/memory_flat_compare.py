"""`asyncbench compare` of two large runs: CPU seconds and peak RSS (issue 27, item 2).

    cd REPO && PYTHONPATH=$PWD .venv/bin/python bench/memory_flat_compare.py CACHE.duckdb

CACHE holds one finished run (e.g. /tmp/cold_warm/out100000/c.duckdb after
`python bench/cold_warm.py 100000 256`). The script copies it, adds a second run that is the
first with a new id and every tenth sample's score flipped (a SQL copy of its rows: two
real 100k runs would take an hour on a small machine), then runs the real CLI,
`python -m asyncbench.cli compare A B --cache COPY`, and prints its CPU and peak RSS.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb


def clone_run(cache: Path) -> tuple[str, str]:
    """Add run B (A with every tenth score flipped); return both ids."""
    con = duckdb.connect(str(cache))
    try:
        (a,) = con.execute("SELECT run_id FROM runs WHERE summary_json IS NOT NULL ORDER BY started_at LIMIT 1").fetchone()
        b = "b" + a[1:]
        con.execute("CREATE TEMP TABLE r AS SELECT * FROM runs WHERE run_id = ?", [a])
        con.execute("UPDATE r SET run_id = ?", [b])
        con.execute("INSERT INTO runs SELECT * FROM r")
        con.execute("CREATE TEMP TABLE s AS SELECT * FROM results WHERE run_id = ?", [a])
        con.execute("UPDATE s SET run_id = ?, score = CASE WHEN hash(sample_id) % 10 = 0 THEN 1 - score ELSE score END",
                    [b])
        con.execute("INSERT INTO results SELECT * FROM s")
        for table in ("ledger_requests", "invocations"):
            con.execute(f"CREATE TEMP TABLE t_{table} AS SELECT * FROM {table} WHERE run_id = ?", [a])
            con.execute(f"UPDATE t_{table} SET run_id = ?", [b])
            con.execute(f"INSERT INTO {table} SELECT * FROM t_{table}")
        return a, b
    finally:
        con.close()


WRAP = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss,
                  "out": done.stdout[-600:], "err": done.stderr[-600:]}))
"""


def main() -> None:
    source = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "c.duckdb"
        shutil.copy(source, cache)
        a, b = clone_run(cache)
        cmd = [sys.executable, "-m", "asyncbench.cli", "compare", a, b, "--cache", str(cache)]
        out = json.loads(subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True).stdout)
        print(out["out"] or out["err"])
        print(f"compare rc {out['rc']} cpu {out['cpu']:.2f} s, peak RSS {out['rss_kb'] / 1024:.0f} MB")


if __name__ == "__main__":
    main()
