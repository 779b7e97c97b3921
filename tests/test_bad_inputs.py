"""Every bad input a user can give: exit 2, exactly one line on stderr naming what is
wrong, no traceback (issue 18's list). Each case runs the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

ROW = b'{"id": "a", "prompt": "x"}\n'
DEEP = b"[" * 100_000 + b"]" * 100_000
# name -> (files to write {name: bytes}, argv after `asyncbench`, text the line must contain)
Case = tuple[dict[str, bytes], list[str], str]
CASES: dict[str, Case] = {
    "jsonl prompt not a string": ({"d.jsonl": b'{"id": "a", "prompt": 5}\n'},
                                  ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], '"prompt" must be a string'),
    "jsonl messages a string": ({"d.jsonl": b'{"id": "a", "messages": "hi"}\n'},
                                ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], '"messages" must be'),
    "jsonl answers a number": ({"d.jsonl": b'{"id": "a", "prompt": "x", "answers": 5}\n'},
                               ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], '"answers" must be'),
    "jsonl max_tokens Infinity": ({"d.jsonl": b'{"id": "a", "prompt": "x", "max_tokens": Infinity}\n'},
                                  ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], '"max_tokens" must be'),
    "jsonl undecodable bytes": ({"d.jsonl": b'{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": "\xff"}\n'},
                                ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], "d.jsonl:2: not UTF-8"),
    "rpm zero": ({}, ["run", "minilongbench", "--model", "sim", "--rpm", "0", "--dry-run"], "--rpm must be"),
    "tpm nan": ({}, ["run", "minilongbench", "--model", "sim", "--tpm", "nan", "--dry-run"], "--tpm must be"),
    "timeout negative": ({}, ["run", "minilongbench", "--model", "sim", "--timeout", "-1", "--dry-run"], "--timeout must"),
    "max-cost negative": ({}, ["run", "minilongbench", "--model", "sim", "--max-cost", "-1", "--dry-run"], "--max-cost"),
    "max-cost nan": ({}, ["run", "minilongbench", "--model", "sim", "--max-cost", "nan", "--dry-run"], "--max-cost"),
    "max-input-tokens zero": ({}, ["run", "minilongbench", "--model", "sim", "--max-input-tokens", "0", "--dry-run"],
                              "--max-input-tokens"),
    "concurrency huge": ({}, ["run", "minilongbench", "--model", "sim", "--concurrency", "1000000", "--dry-run"],
                         "from 1 to 4,096"),
    "port out of range": ({}, ["run", "minilongbench", "--model", "tgi:m", "--base-url", "http://127.0.0.1:99999",
                               "--dry-run"], "Port out of range"),
    "unclosed ipv6": ({}, ["run", "minilongbench", "--model", "tgi:m", "--base-url", "http://[::1", "--dry-run"],
                      "not a valid URL"),
    "ftp base url": ({}, ["run", "minilongbench", "--model", "tgi:m", "--base-url", "ftp://h/x", "--dry-run"],
                     "not an http(s) URL"),
    "fleet file port": ({"fleet.txt": b"http://127.0.0.1:8080\nhttp://127.0.0.1:70000\n"},
                        ["run", "minilongbench", "--model", "tgi:m", "--base-urls-file", "{tmp}/fleet.txt", "--dry-run"],
                        "fleet.txt:2"),
    "fleet file binary": ({"fleet.txt": b"http://a:80\n\xff\xfe\x00\n"},
                          ["run", "minilongbench", "--model", "tgi:m", "--base-urls-file", "{tmp}/fleet.txt", "--dry-run"],
                          "fleet.txt:2: not text"),
    "prices nan": ({"p.json": b'{"models": {"m": {"input": NaN, "output": 1}}}', "d.jsonl": ROW},
                   ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--prices", "{tmp}/p.json", "--dry-run"], "m.input must be"),
    "prices negative": ({"p.json": b'{"models": {"m": {"input": 1, "output": -2}}}', "d.jsonl": ROW},
                        ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--prices", "{tmp}/p.json", "--dry-run"],
                        "m.output must be"),
    "prices wrong shape": ({"p.json": b'[1, 2]', "d.jsonl": ROW},
                           ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--prices", "{tmp}/p.json", "--dry-run"], "expected"),
    "unwritable out": ({"f": b"x", "d.jsonl": b'{"id": "a", "prompt": "x"}\n'}, ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--out", "{tmp}/f/out",
                                     "--cache", "{tmp}/c.duckdb"], "cannot write the output folder"),
    "cache path under a file": ({"f": b"x"}, ["cache", "stats", "--cache", "{tmp}/f/c.duckdb"], "is part of that path a file"),
    "cache path a folder": ({}, ["cache", "stats", "--cache", "{tmp}"], "is a folder"),
    "cache not a duckdb file": ({"c.duckdb": b"not a database" * 1000}, ["cache", "stats", "--cache", "{tmp}/c.duckdb"],
                                "asyncbench cache recover"),
    "export into a missing folder": ({}, ["cache", "export", "--cache", "{tmp}/c.duckdb", "--out", "{tmp}/no/x.parquet"],
                                     "does not exist"),
    # issue 24's eight
    "answers nested 100,000 deep": ({"d.jsonl": b'{"id": "a", "prompt": "x", "answers": ' + DEEP + b'}\n'},
                                    ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], "nested too deeply"),
    "prices nested 100,000 deep": ({"p.json": b'{"models": ' + DEEP + b'}', "d.jsonl": ROW},
                                   ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--prices", "{tmp}/p.json",
                                    "--dry-run"], "nested too deeply"),
    "lone surrogate in a prompt": ({"d.jsonl": b'{"id": "a", "prompt": "x\\ud800y"}\n'},
                                   ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--dry-run"], "d.jsonl:1: holds a lone"),
    "cache a jsonl file": ({"x.jsonl": b'{"a": 1}\n', "d.jsonl": ROW},
                           ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--cache", "{tmp}/x.jsonl"], "not a DuckDB"),
    "cache stats on a jsonl file": ({"x.jsonl": b'{"a": 1}\n'}, ["cache", "stats", "--cache", "{tmp}/x.jsonl"],
                                    "not a DuckDB"),
    "cache export from a jsonl file": ({"x.jsonl": b'{"a": 1}\n'},
                                       ["cache", "export", "--cache", "{tmp}/x.jsonl", "--out", "{tmp}/o.jsonl"],
                                       "not a DuckDB"),
    "cache a json file of another name": ({"c.db": b'{"responses": []}'}, ["cache", "stats", "--cache", "{tmp}/c.db"],
                                          "is not a DuckDB file"),
    "anchor scores a binary file": ({"a.json": bytes(range(256)) * 4},
                                    ["estimate", "minilongbench", "--anchor-scores", "{tmp}/a.json"], "not UTF-8"),
    "simulate port out of range": ({}, ["simulate", "--port", "99999"], "--port 99999 is not a TCP port"),
    "max-response-bytes too small": ({}, ["run", "minilongbench", "--model", "sim", "--max-response-bytes", "10",
                                          "--dry-run"], "--max-response-bytes must be"),
}


def run_cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    check_one_line(CASES[name], tmp_path)


@pytest.mark.slow
def test_a_200_mb_prompt_the_server_cannot_tokenize_is_one_line(tmp_path: Path) -> None:
    """The simulator's /tokenize (as vLLM's) cannot tokenize 200 MB within the run's
    --timeout (which tokenize calls obey too): one line naming the sample and its size,
    not a traceback."""
    row = json.dumps({"id": "huge", "prompt": "word " * 40_000_000}).encode() + b"\n"
    check_one_line(({"d.jsonl": row}, ["run", "jsonl:{tmp}/d.jsonl", "--model", "sim", "--cache", "{tmp}/c.duckdb",
                                       "--timeout", "3"],
                    "sample huge: cannot tokenize its 200.0M-character prompt"), tmp_path)


def check_one_line(case: Case, tmp_path: Path) -> None:
    files, argv, expected = case
    for fname, content in files.items():
        (tmp_path / fname).write_bytes(content)
    done = run_cli([a.replace("{tmp}", str(tmp_path)) for a in argv], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert expected in lines[0], lines[0]


def test_an_endpoint_that_fails_everything_ends_the_run_partial(tmp_path: Path) -> None:
    """Default settings, 20 samples, every answer a 500: the run ends within 60 s, partial,
    with one line naming the endpoint and the last error."""
    from asyncbench.sim.testing import sim_subprocess

    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"id": "{i}", "prompt": "question {i}", "answers": ["a"]}}\n' for i in range(20)))
    with sim_subprocess(["--error-rate", "1.0"]) as url:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model",
                               "openai-compat:m", "--base-url", url + "/v1", "--cache", str(tmp_path / "c.duckdb"),
                               "--out", str(tmp_path / "out"), "--no-progress"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncbench: run ended partial: "), done.stderr
    assert url in lines[0] and "HTTP 50" in lines[0] and "partial 0/20" in lines[0]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["samples"]["failed"] == 20 and run["aborted"] and not run["complete"]


def _cache_with_rows(path: Path, n: int = 50) -> None:
    from asyncbench.store import Store

    with Store(path) as store:
        store.cache.put_responses([{"key": f"k{i}", "provider": "p", "model": "m", "endpoint": "e",
                                    "request_json": "{}", "text": f"answer {i}", "finish_reason": "stop",
                                    "prompt_tokens": 1, "completion_tokens": 1, "cached_prompt_tokens": 0,
                                    "latency_ms": 1.0, "cost_usd": 0.0, "served_by": "x", "created_at": 0.0}
                                   for i in range(n)])


def test_cache_export_paths_never_become_sql(tmp_path: Path) -> None:
    """A quote, or a path crafted to add a second COPY, is just a file name."""
    _cache_with_rows(tmp_path / "c.duckdb")
    hostile = tmp_path / "x'); COPY responses TO 'PWNED.csv"
    done = run_cli(["cache", "export", "--cache", str(tmp_path / "c.duckdb"), "--out", str(hostile) + ".jsonl"],
                   tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED.csv").exists() and not Path("PWNED.csv").exists()
    rows = (Path(str(hostile) + ".jsonl")).read_text().splitlines()
    assert len(rows) == 50 and json.loads(rows[0])["key"] == "k0"
    done = run_cli(["cache", "export", "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "a'b.parquet")],
                   tmp_path)
    assert done.returncode == 0 and (tmp_path / "a'b.parquet").stat().st_size > 0, done.stderr


def test_a_damaged_cache_names_recover_and_recover_copies_what_is_readable(tmp_path: Path) -> None:
    good = tmp_path / "good.duckdb"
    _cache_with_rows(good)
    done = run_cli(["cache", "recover", "--cache", str(good), "--out", str(tmp_path / "copy.duckdb")], tmp_path)
    assert done.returncode == 0 and "50 responses" in done.stdout, done.stderr
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(good.read_bytes()[:4096] + os.urandom(200_000))
    done = run_cli(["cache", "stats", "--cache", str(bad)], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "asyncbench cache recover" in lines[0], done.stderr
    done = run_cli(["cache", "recover", "--cache", str(bad), "--out", str(tmp_path / "new.duckdb")], tmp_path)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr


def test_the_sim_model_server_dies_with_a_killed_run(tmp_path: Path) -> None:
    """`--model sim` starts a simulator; SIGKILL of the run must not leave it running."""
    import signal
    import time

    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"id": "{i}", "prompt": "question {i}"}}\n' for i in range(400)))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "sim",
                             "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--concurrency",
                             "1", "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid and "asyncbench.sim" in \
                        Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry))
        return found

    deadline = time.monotonic() + 30
    while not (sims := children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sims, "the run did not start a simulator"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
              for pid in sims) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
                   for pid in sims)
