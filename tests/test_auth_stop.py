"""A key the server refuses stops the run after the first request (issue 36).

The simulator answers any key but the one in `--api-key-env VAR` as the real APIs do
(OpenAI 401 `Incorrect API key provided`, Anthropic 401 `authentication_error`). A wrong
key once sent every request (237 x 401) and closed with "run the same command again";
inspect-ai stops at the first authentication error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _data(tmp: Path, n: int) -> Path:
    path = tmp / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"question {i}", "answers": ["x"]}) + "\n"
                            for i in range(n)))
    return path


@pytest.mark.parametrize(("model", "env", "variable"), [
    ("openai-compat:m", {"ASYNCBENCH_API_KEY": "wrong"}, "ASYNCBENCH_API_KEY"),
    ("openai-compat:m", {}, "ASYNCBENCH_API_KEY"),  # no key at all
    ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": "{url}/v1"}, "OPENAI_API_KEY"),
    ("anthropic:claude-3-5-haiku-20241022", {"ANTHROPIC_API_KEY": "wrong", "ANTHROPIC_BASE_URL": "{url}"},
     "ANTHROPIC_API_KEY"),
])
def test_a_refused_key_stops_the_run_after_one_request(model: str, env: dict[str, str], variable: str, tmp_path: Path,
                                                       start_sim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIM_ACCEPTED_KEY", "the-right-key")
    sim = start_sim("--api-key-env", "SIM_ACCEPTED_KEY")
    clean = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    run_env = {**clean, "PYTHONPATH": str(REPO), **{k: v.format(url=sim.base_url) for k, v in env.items()}}
    urls = [] if "BASE_URL" in "".join(env) else ["--base-url", f"{sim.base_url}/v1"]
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{_data(tmp_path, 40)}", "--model", model,
                           *urls, "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"), "--no-progress",
                           "--max-input-tokens", "1000"], cwd=tmp_path, env=run_env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert sim.stats()["requests"] == 1  # the first refusal stops it: nothing else is sent
    last = done.stderr.strip().splitlines()[-1]
    assert "refused the API key" in last and variable in last and "Traceback" not in done.stderr
    assert "run the same command again to retry" not in done.stdout + done.stderr  # the fix is the key, not a re-run
    # with the right key the same command completes
    monkeypatch.setenv(variable, "the-right-key")
    good = {**run_env, variable: "the-right-key"}
    again = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{tmp_path / 'd.jsonl'}", "--model",
                            model, *urls, "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"),
                            "--no-progress", "--max-input-tokens", "1000"], cwd=tmp_path, env=good, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert sim.stats()["ok"] == 40
