"""Figures that disagree (issue 36 item 6): every count, token and dollar a command shows
comes from the ledger, and where it counts requests it counts what the servers received.
Each test runs the real CLI against simulator subprocesses (tests/conftest.py) and checks
a figure the command prints against its source: the simulator's /stats, or the run's
ledger summed by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path, data: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if data is not None:
        env["ASYNCBENCH_DATA_DIR"] = str(data)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _data(tmp: Path, n: int) -> str:
    import json

    path = tmp / "d.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "task": "t", "prompt": f"Question {i}: what is {i} plus one?",
                                "answers": [str(i + 1)], "max_tokens": 8, "metric": "contains"}) + "\n")
    return f"jsonl:{path}"


def test_set_requests_are_what_the_servers_received(tmp_path: Path, start_sim: Any) -> None:
    """The set summary once counted answered requests (163) where the servers received
    214: a retry after a 500, a 429 and a request that failed for good are requests sent
    too. Two models on two faulty simulators (500s on one, an RPM limit on the other):
    the set's "requests sent" is the sum of what both servers' /stats say they received,
    and it is more than the answers, so counting answers would fail here."""
    flaky = start_sim("--error-rate", "0.35", "--seed", "7")
    limited = start_sim("--rpm", "300")  # TGI sends no limit headers: its client meets 429s
    (tmp_path / "set.toml").write_text(f"""benchmarks = ["{_data(tmp_path, 12)}"]
[options]
max_input_tokens = 1000
[[models]]
model = "openai-compat:a"
base_urls = ["{flaky.base_url}/v1"]
[[models]]
model = "tgi:b"
base_urls = ["{limited.base_url}"]
concurrency = 8
""")
    done = _cli("run", "--set", str(tmp_path / "set.toml"), "--cache", str(tmp_path / "c.duckdb"),
                "--out", str(tmp_path / "set"), "--no-progress", cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr
    one, two = flaky.stats(), limited.stats()
    received = one["requests"] + two["requests"]
    assert one["requests"] > one["ok"] and two["rate_limited"] > 0  # the faults happened
    line = next(x for x in done.stdout.splitlines() if x.startswith("set: "))
    sent = re.search(r"([\d,]+) requests sent; this time ([\d,]+) sent", line)
    assert sent is not None, line
    assert int(sent.group(1).replace(",", "")) == received
    assert int(sent.group(2).replace(",", "")) == received
