"""A TGI fleet: endpoints from a file, every replica's /info consulted (the smallest
context wins, mixed models refused), replicas that are down routed around."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _data(tmp: Path, n: int = 12, words: int = 3000) -> Path:
    path = tmp / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"Doc {i}: " + " ".join(f"w{k % 50}" for k in range(words)),
                                        "answers": ["w1"], "max_tokens": 8}) + "\n" for i in range(n)))
    return path


def test_fleet_file_uses_every_replica_and_the_smallest_context(tmp_path, start_sim):
    big = [start_sim("--max-context-tokens", "8192"), start_sim("--max-context-tokens", "8192")]
    small = start_sim("--max-context-tokens", "2048")
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("# three TGI replicas, one launched with a shorter context, one down\n"
                     + "\n".join(s.base_url for s in (*big, small)) + "\nhttp://127.0.0.1:9  # down\n")
    done = _cli("run", f"jsonl:{_data(tmp_path)}", "--model", "tgi:sim", "--base-urls-file", str(fleet),
                "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "o" / "run.json").read_text())
    assert summary["samples"]["answered"] == 12 and summary["complete"]
    # the small replica's context (2048) decides: context - 500 as the official rule, and
    # every prompt (~3000 words) was cut to fit it with room for the answer
    trunc = summary["truncation"]
    assert trunc["max_input_tokens"] == 2048 - 500 and trunc["budget"]["max_total_tokens"] == 2048
    assert trunc["n_truncated"] == 12
    served = {e["url"]: e["served"] for e in summary["endpoints"]}
    assert len(served) == 4 and served["http://127.0.0.1:9"] == 0
    assert all(served[s.base_url] > 0 for s in (*big, small))
    assert small.stats()["context_length_errors"] == 0


def test_fleet_of_different_models_is_refused(tmp_path, start_sim):
    a, b = start_sim("--model-id", "org/model-a"), start_sim("--model-id", "org/model-b")
    done = _cli("run", f"jsonl:{_data(tmp_path, 2, 10)}", "--model", "tgi:sim", "--base-url", a.base_url,
                "--base-url", b.base_url, "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "different models" in done.stderr and "Traceback" not in done.stderr
    assert a.stats()["requests"] == b.stats()["requests"] == 0


def test_bad_fleet_file_names_the_line(tmp_path):
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("http://127.0.0.1:8080\ntgi-1:80\n")
    done = _cli("run", f"jsonl:{_data(tmp_path, 2, 10)}", "--model", "tgi:sim", "--base-urls-file", str(fleet))
    assert done.returncode == 2 and f"{fleet}:2" in done.stderr and len(done.stderr.strip().splitlines()) == 1
