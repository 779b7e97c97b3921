"""A cache that is not ours, damaged, or on a disk that fills; a set file with wrong
types; a kill while a report is written: one line, exit 2, and nothing paid is lost.

Each case was an attacker's finding (issue 35): 10 asyncbench tables added to another
application's DuckDB file; tracebacks on a truncated cache, a full disk and `model = 5`;
`cache recover` salvaging 0 of 20 answers; a report killed mid-write left 0 bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _data(tmp: Path, n: int, pad: int = 0) -> Path:
    path = tmp / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"question {i} " + "a" * pad, "answers": ["x"]}) + "\n"
                            for i in range(n)))
    return path


def _one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("asyncbench: error:") and says in lines[0], done.stderr


def _run(tmp: Path, sim: Any, cache: Path, data: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return _cli("run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url", f"{sim.base_url}/v1",
                "--cache", str(cache), "--out", str(tmp / "out"), "--no-progress", "--max-input-tokens", "4000",
                *more, cwd=tmp)


def test_a_duckdb_file_of_another_application_is_refused_untouched(tmp_path: Path, start_sim: Any) -> None:
    import duckdb

    other = tmp_path / "app" / "customers.duckdb"
    other.parent.mkdir()
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
    con.execute("INSERT INTO customers VALUES (1, 'Ada')")
    con.close()
    before = other.read_bytes()
    done = _run(tmp_path, start_sim(), other, _data(tmp_path, 3))
    _one_line_error(done, "not an asyncbench cache")
    assert other.read_bytes() == before
    assert sorted(p.name for p in other.parent.iterdir()) == ["customers.duckdb"]  # no journal or prompt folders


def test_a_truncated_cache_is_one_line_and_recover_salvages_every_paid_answer(tmp_path: Path, start_sim: Any) -> None:
    sim, data, cache = start_sim(), _data(tmp_path, 20), tmp_path / "c.duckdb"
    assert _run(tmp_path, sim, cache, data).returncode == 0
    assert sim.stats()["ok"] == 20
    with cache.open("r+b") as fh:  # the file cut short, as by a crash mid-copy or a full disk
        fh.truncate(cache.stat().st_size // 4)
    _one_line_error(_run(tmp_path, sim, cache, data), "cache recover")
    recovered = tmp_path / "r.duckdb"
    done = _cli("cache", "recover", "--cache", str(cache), "--out", str(recovered), cwd=tmp_path)
    assert done.returncode == 0 and "20 answers from the journal" in done.stdout, done.stdout + done.stderr
    again = _run(tmp_path, sim, recovered, data, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["this_invocation"]["requests"] == 0  # nothing paid twice
    assert sim.stats()["ok"] == 20


def test_recover_copies_every_row_of_an_undamaged_cache(tmp_path: Path, start_sim: Any) -> None:
    """The ledger has no key, and DuckDB refuses INSERT OR IGNORE there: recover once
    copied 0 of its rows."""
    import duckdb

    sim, cache = start_sim(), tmp_path / "c.duckdb"
    assert _run(tmp_path, sim, cache, _data(tmp_path, 5)).returncode == 0
    done = _cli("cache", "recover", "--cache", str(cache), "--out", str(tmp_path / "r.duckdb"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    counts = []
    for path in (cache, tmp_path / "r.duckdb"):
        con = duckdb.connect(str(path), read_only=True)
        counts.append({t: con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in
                       ("responses", "ledger_requests", "results", "runs", "invocations", "prompt_refs")})
        con.close()
    assert counts[0] == counts[1] and counts[0]["ledger_requests"] == (5,)


def test_a_full_disk_is_one_line_and_what_was_paid_is_kept(tmp_path: Path, start_sim: Any) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to mount a small tmpfs as the full disk")
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {tmp_path}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()[:120]}")
    sim, n = start_sim(), 400
    data = _data(tmp_path, n, pad=3000)  # 1.2 MB of prompts: the 1 MB disk fills on the way
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    kept.mkdir()
    run = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url",
           f"{sim.base_url}/v1", "--cache", f"{disk}/c.duckdb", "--out", str(tmp_path / "out"), "--no-progress",
           "--max-input-tokens", "4000", "--concurrency", "4"]
    script = (f"mount -t tmpfs -o size=1m tmpfs {disk} && {{ {' '.join(run)}; rc=$?; cp -a {disk}/. {kept}/; "
              "exit $rc; }")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    _one_line_error(done, "the disk is full")
    paid = sim.stats()["ok"]
    assert 0 < paid < n
    again = _run(tmp_path, sim, kept / "c.duckdb", data, "--concurrency", "4", "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    assert summary["complete"] and summary["samples"]["total"] == n
    # what was paid before the disk filled is served from the journal: at most the
    # requests in flight when it filled (--concurrency 4) are sent again
    assert sim.stats()["ok"] <= n + 4


@pytest.mark.parametrize(("entry", "says"), [
    ('model = 5', "model = \"provider:name\""),
    ('model = "sim"\nbase_urls = 5', "--base-url must be a list of text values"),
    ('model = "sim"\ntokenizer = 5', "--tokenizer must be text"),
    ('model = "sim"\njudge = ["sim"]', "--judge must be text"),
    ('model = "sim"\nconcurrency = "x"', "--concurrency must be a whole number"),
])
def test_wrong_types_in_a_set_file_are_one_line(tmp_path: Path, entry: str, says: str) -> None:
    data = _data(tmp_path, 2)
    (tmp_path / "set.toml").write_text(f'benchmarks = ["jsonl:{data}"]\n[[models]]\n{entry}\n'
                                       f'[options]\ncache = "{tmp_path / "c.duckdb"}"\n')
    _one_line_error(_cli("run", "--set", str(tmp_path / "set.toml"), "--dry-run", cwd=tmp_path), says)


@pytest.mark.parametrize("option", [('cache = 5', "--cache must be text"), ('progress = "yes"', "--progress must be")])
def test_wrong_types_in_a_set_files_options_are_one_line(tmp_path: Path, option: tuple[str, str]) -> None:
    data = _data(tmp_path, 2)
    (tmp_path / "set.toml").write_text(f'benchmarks = ["jsonl:{data}"]\n[[models]]\nmodel = "sim"\n[options]\n'
                                       f"{option[0]}\n")
    _one_line_error(_cli("run", "--set", str(tmp_path / "set.toml"), "--dry-run", cwd=tmp_path), option[1])


def test_reports_exports_and_run_json_replace_the_old_file_whole(tmp_path: Path, start_sim: Any) -> None:
    """Each is written to a temporary file and renamed over the old one, so a kill mid-write
    leaves the old file: a second name (a hard link) for the old file keeps its content,
    where writing in place would have changed (or emptied) it."""
    sim, cache = start_sim(), tmp_path / "c.duckdb"
    done = _run(tmp_path, sim, cache, _data(tmp_path, 3), "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    targets = {
        "run.json": ("run", f"jsonl:{tmp_path / 'd.jsonl'}", "--model", "openai-compat:m", "--base-url",
                     f"{sim.base_url}/v1", "--cache", str(cache), "--out", str(tmp_path / "out"), "--no-progress",
                     "--max-input-tokens", "4000"),
        "report.md": ("report", run_id, "--cache", str(cache), "--out", "OUT"),
        "report.txt": ("report", run_id, "--cache", str(cache), "--out", "OUT", "--format", "table"),
        "samples.csv": ("samples", run_id, "--cache", str(cache), "--out", "OUT"),
        "samples.parquet": ("samples", run_id, "--cache", str(cache), "--out", "OUT"),
        "export.jsonl": ("cache", "export", "--cache", str(cache), "--out", "OUT"),
    }
    for name, args in targets.items():
        path = tmp_path / "out" / "run.json" if name == "run.json" else tmp_path / name
        path.write_text("the previous file\n")
        os.link(path, tmp_path / f"{name}.link")
        done = _cli(*(str(path) if a == "OUT" else a for a in args), cwd=tmp_path)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert (tmp_path / f"{name}.link").read_text() == "the previous file\n", name
        assert path.stat().st_size > 100 and path.read_bytes() != b"the previous file\n", name
        assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_runs_on_two_caches_write_two_run_json_files(tmp_path: Path, start_sim: Any) -> None:
    """The run id does not depend on the cache, and the default folder was runs/RUN_ID: a
    run on a second cache replaced the first run's run.json (issue 36)."""
    sim, data = start_sim(), _data(tmp_path, 3)
    home = {**os.environ, "PYTHONPATH": str(REPO), "ASYNCBENCH_CACHE": str(tmp_path / "default.duckdb")}
    outs = []
    for cache in (None, tmp_path / "a.duckdb", tmp_path / "b.duckdb"):
        args = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:m",
                "--base-url", f"{sim.base_url}/v1", "--no-progress", "--max-input-tokens", "4000", "--json",
                *(["--cache", str(cache)] if cache else [])]
        done = subprocess.run(args, cwd=tmp_path, env=home, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(json.loads(done.stdout))
    assert len({o["run_id"] for o in outs}) == 1  # one run id for the three
    folders = [Path(o["out_dir"]) for o in outs]
    assert folders[0].name == outs[0]["run_id"]  # the default cache keeps runs/RUN_ID
    assert len(set(folders)) == 3 and all((tmp_path / f / "run.json").is_file() for f in folders)
