"""Fingerprints of three simulator runs: MiniLongBench, BAMBOO (both lengths) and
100-LongBench with a judge — each run's scores, and a sha256 of its cache contents (key,
text, finish reason, tokens: everything an answer depends on).

Scores are recorded as numbers and compared within a relative 1e-6 (`differences`), not
hashed: the MiniLongBench IRT fit is an iterative optimisation whose last digits differ
between CPUs (BLAS kernels, vector width), and a rounded hash still flips whenever a value
sits on a rounding boundary. Changing any one sample's score moves the aggregates by far
more than 1e-6, so the comparison still catches changed behaviour.

    .venv/bin/python bench/parity.py [TREE] [--write]

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
    "bamboo": ["bamboo", "--length", "both"],
    "100-longbench": ["100-longbench", "--judge", "sim", "--lengths", "2k,4k,8k", "--rows", "2"],
}


REL = 1e-6
ABS = 1e-9


def differences(found: object, recorded: object, path: str = "scores") -> list[str]:
    """Where two score trees differ: a missing or extra key, another type, or a number
    further apart than REL (relative) and ABS (absolute)."""
    if isinstance(found, dict) and isinstance(recorded, dict):
        out = [f"{path}.{k}: missing" for k in recorded.keys() - found.keys()]
        out += [f"{path}.{k}: not recorded" for k in found.keys() - recorded.keys()]
        for k in found.keys() & recorded.keys():
            out += differences(found[k], recorded[k], f"{path}.{k}")
        return sorted(out)
    if isinstance(found, list) and isinstance(recorded, list):
        if len(found) != len(recorded):
            return [f"{path}: {len(found)} items, recorded {len(recorded)}"]
        return [d for i, (a, b) in enumerate(zip(found, recorded)) for d in differences(a, b, f"{path}[{i}]")]
    numbers = (int, float)
    if (isinstance(found, numbers) and isinstance(recorded, numbers)
            and not isinstance(found, bool) and not isinstance(recorded, bool)):
        if abs(found - recorded) <= max(ABS, REL * max(abs(found), abs(recorded))):
            return []
    elif found == recorded:
        return []
    return [f"{path}: {found!r}, recorded {recorded!r}"]


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
    return {"scores": run["scores"],
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
