"""Fingerprints of three simulator runs: MiniLongBench, BAMBOO (both lengths) and
100-LongBench with a judge — sha256 of each run's scores and of its cache contents (key,
text, finish reason, tokens: everything an answer depends on).

    .venv/bin/python benchmarks/parity.py [TREE] [--write]

A refactor must leave every fingerprint unchanged (tests/test_parity.py checks the
recorded ones in tests/data/parity.json). A change that is meant to alter what is sent or
how it is scored rewrites them with --write, and its commit says why.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[1] / "tests" / "data" / "parity.json"
RUNS = {
    "minilongbench": ["minilongbench"],
    "bamboo": ["bamboo", "--length", "both", "--skip-bad-rows"],
    "100-longbench": ["100-longbench", "--judge", "sim", "--lengths", "2k,4k,8k", "--rows", "2"],
}


def _rounded(value: object) -> object:
    """Floats to 6 significant digits: the IRT fit's last bits differ between CPUs (BLAS,
    vector width), and a fingerprint must catch changed behaviour, not a different machine."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def fingerprint(tree: Path, name: str) -> dict[str, object]:
    """Run one benchmark against the built-in simulator from `tree`'s code."""
    import duckdb

    data = tree.parent / "shared" / "data"
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", *RUNS[name], "--model", "sim", "--data-dir", str(data),
               "--cache", f"{tmp}/c.duckdb", "--out", f"{tmp}/out", "--no-progress", "--json"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
        run_json = Path(tmp) / "out" / "run.json"
        if not run_json.exists():
            raise RuntimeError(f"{name}: exit {done.returncode}: {done.stderr[-2000:]}")
        run = json.loads(run_json.read_text())
        con = duckdb.connect(f"{tmp}/c.duckdb", read_only=True)
        rows = con.execute("select key, text, finish_reason, prompt_tokens, completion_tokens "
                           "from responses order by key").fetchall()
        con.close()
    scores = json.dumps(_rounded(run["scores"]), sort_keys=True)
    return {"scores_sha256": hashlib.sha256(scores.encode()).hexdigest()[:16],
            "cache_sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16],
            "responses": len(rows)}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--write"]
    tree = Path(args[0]).resolve() if args else Path(__file__).resolve().parents[1]
    found = {name: fingerprint(tree, name) for name in RUNS}
    print(json.dumps(found, indent=2, sort_keys=True))
    if "--write" in sys.argv:
        RECORDED.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
