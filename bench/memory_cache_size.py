"""A run's peak memory against what else its cache holds (issue 41, item 5).

    PYTHONPATH=$PWD .venv/bin/python bench/memory_cache_size.py N K [C]

Builds a cache holding K answers of another run (responses, their prompt_refs and ledger
rows, and K sample rows of that run: what K answers leave in a real cache), written by
SQL in a few seconds, then runs N small jsonl prompts (bench/engine_throughput.write_data)
into it through the real CLI against the simulator (its own process), and prints the CLI
process's CPU and peak RSS (RUSAGE_CHILDREN of a wrapper, as bench/cold_warm.py). K = 0
is the same run into an empty cache. REPO=DIR measures another checkout.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_throughput import write_data
from raw_client_ratio import cost_line, wrapped

from asyncbench.sim.testing import sim_subprocess
from asyncbench.store.file import Store


def fill(path: Path, k: int) -> None:
    """K answers of a run 'other' (keys sha256 of their index, ~60-character answers)."""
    with Store(path) as store, store.session():
        con = store.con
        con.execute("SET enable_progress_bar = false")
        con.execute("INSERT INTO responses (key, provider, model, endpoint, request_json, text, finish_reason, "
                    "prompt_tokens, completion_tokens, cached_prompt_tokens, latency_ms, cost_usd, served_by, "
                    "created_at) SELECT sha256(i::VARCHAR), 'openai-compat', 'other', 'chat', "
                    "'{\"model\":\"other\",\"prompt_sha256\":\"' || sha256(i::VARCHAR || 'p') || '\"}', "
                    "'answer number ' || i::VARCHAR || ' of the other run, about sixty chars', 'stop', 20, 12, 0, "
                    "15.0, 0.0, 'http://127.0.0.1:1', 0 FROM range($1) t(i)", [k])
        con.execute("INSERT INTO prompt_refs SELECT sha256(i::VARCHAR), 'prompts-0.txt', i * 100, 100 "
                    "FROM range($1) t(i)", [k])
        con.execute("INSERT INTO ledger_requests (run_id, invocation, purpose, task, source, key, sample_id, "
                    "prompt_tokens, completion_tokens, cached_prompt_tokens, cost_usd, saved_usd, latency_ms, "
                    "attempts) SELECT 'other', 1, 'eval', 'jsonl', 'sent', sha256(i::VARCHAR), 's' || i::VARCHAR, "
                    "20, 12, 0, 0, 0, 15.0, 1 FROM range($1) t(i)", [k])
        con.execute("INSERT INTO results (run_id, sample_id, task, purpose, key, status, score, prediction, cached, "
                    "prompt_tokens, completion_tokens, cost_usd, latency_ms, truncated_tokens, meta_json, invocation) "
                    "SELECT 'other', 's' || i::VARCHAR, 'jsonl', 'eval', sha256(i::VARCHAR), 'answered', 1.0, "
                    "'answer', false, 20, 12, 0, 15.0, 0, '{}', 1 FROM range($1) t(i)", [k])
        con.execute("CHECKPOINT")


def main() -> None:
    n, k = int(sys.argv[1]), int(sys.argv[2])
    c = sys.argv[3] if len(sys.argv) > 3 else "256"
    repo = os.environ.get("REPO", str(Path(__file__).resolve().parent.parent))
    work = Path("/tmp/memory_cache_size")
    work.mkdir(exist_ok=True)
    data = work / f"small{n}.jsonl"
    if not data.exists():
        write_data(data, n, (5, 20), 4)
    cache = work / f"cache{k}.duckdb"
    for stale in work.glob(f"cache{k}.duckdb*"):
        if stale.is_dir():
            import shutil

            shutil.rmtree(stale)
        else:
            stale.unlink()
    started = time.time()
    fill(cache, k)
    print(f"cache of {k} answers: {cache.stat().st_size / 2**20:.0f} MB, filled in {time.time() - started:.1f} s")
    with sim_subprocess(["--latency-ms", "0"]) as url:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
               "--base-url", url + "/v1", "--cache", str(cache), "--out", str(work / "out"), "--no-progress",
               "--concurrency", c]
        started = time.time()
        res = wrapped(cmd, repo)
        print(f"run of {n} into {k}: {cost_line(res, time.time() - started)}")


if __name__ == "__main__":
    main()
