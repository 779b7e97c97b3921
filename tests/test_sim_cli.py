"""`asyncbench simulate` / `python -m asyncbench.sim` as a separate process."""

from __future__ import annotations

import subprocess
import sys

import httpx

from asyncbench.cli import main as cli_main
from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess


def test_subprocess_serves_with_flags_and_port_file(tmp_path):
    port_file = tmp_path / "port"
    proc, base_url = start_sim_subprocess(
        ["--rpm", "60", "--model-id", "tiny-sim", "--max-context-tokens", "4096", "--port-file", str(port_file)]
    )
    try:
        assert base_url.startswith("http://127.0.0.1:")
        assert port_file.read_text().strip() == base_url.rsplit(":", 1)[1]
        with httpx.Client(base_url=base_url, timeout=10) as http:
            info = http.get("/info").json()
            assert info["model_id"] == "tiny-sim" and info["max_total_tokens"] == 4096
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            assert http.post("/v1/chat/completions", json=body).status_code == 200
            assert http.post("/v1/chat/completions", json=body).status_code == 429  # rpm 60: bucket of 1
            stats = http.get("/stats").json()
            assert (stats["requests"], stats["ok"], stats["rate_limited"]) == (2, 1, 1)
    finally:
        stop_sim_subprocess(proc)
    assert proc.poll() is not None


def test_refuses_remote_host_without_flag(capsys):
    assert cli_main(["simulate", "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_bad_rate_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "asyncbench.sim", "--error-rate", "2"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "between 0 and 1" in result.stderr


def test_port_in_use_is_a_user_error():
    proc, base_url = start_sim_subprocess([])
    try:
        port = base_url.rsplit(":", 1)[1]
        result = subprocess.run([sys.executable, "-m", "asyncbench.sim", "--port", port],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and "cannot listen" in result.stderr
    finally:
        stop_sim_subprocess(proc)
