"""`--backend ray` on a real local Ray cluster (head + two generation workers, loopback
only) against simulator subprocesses: same answers and scores as the local backend, a
global RPM shared by the workers, and a worker killed mid-run."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("ray")
# a Ray start-up problem fails the test, never stalls CI; one cluster at a time under xdist
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow, pytest.mark.xdist_group("ray")]

RAY = str(Path(sys.executable).with_name("ray"))
# loopback only; token auth off for this throwaway cluster (nothing outside 127.0.0.1 can reach it)
ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Cluster:
    """A Ray head started by this module: its address and the `ray start --block` process."""

    address: str
    pid: int

    def processes(self) -> dict[int, str]:
        """Every process of this cluster (the head's descendants, PID -> command line), and
        nothing else on the host: read from /proc."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(entry.name))
        found: dict[int, str] = {}
        todo = list(children.get(self.pid, []))
        while todo:
            pid = todo.pop()
            with contextlib.suppress(OSError):
                found[pid] = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            todo.extend(children.get(pid, []))
        return found


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ray start exited with {proc.returncode}: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the Ray head did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray head on 127.0.0.1 with 2 CPUs and a temp dir of its own, started for these
    tests and stopped after by its own process tree: never `ray stop`, which stops every
    Ray cluster on the host (other users' included)."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="abray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    proc = subprocess.Popen([RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             f"--temp-dir={temp}", "--num-cpus=2", "--include-dashboard=false",
                             "--disable-usage-stats"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    cluster = Cluster(f"127.0.0.1:{port}", proc.pid)
    try:
        _wait_for_port(port, proc, 120)
        yield cluster
    finally:
        members = cluster.processes()
        proc.terminate()  # `ray start --block` stops its node's processes on SIGTERM
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        for pid in members:  # whatever outlived it, by PID
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def _run(tmp: Path, name: str, urls: list[str], *extra: str, bench: str = "minilongbench", wait: bool = True):
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", bench, "--model", "openai-compat:sim",
           *[a for u in urls for a in ("--base-url", u + "/v1")], "--endpoint-id", "two-sims",
           "--data-dir", str(Path(__file__).resolve().parents[2] / "shared" / "data"),
           "--cache", str(tmp / f"{name}.duckdb"), "--out", str(tmp / name), "--no-progress", *extra]
    if not wait:
        return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp / name / "run.json").read_text())


def _answers(path: Path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT key, text, finish_reason, completion_tokens FROM responses ORDER BY key").fetchall()
    finally:
        con.close()


def test_ray_matches_local_and_keeps_the_global_rpm(tmp_path, shared_data, start_sim, ray_cluster):
    sims = [start_sim("--latency-ms", "20"), start_sim("--latency-ms", "20")]
    urls = [s.base_url for s in sims]
    local = _run(tmp_path, "local", urls, "--limit", "3")
    for s in sims:
        s.reset()
    rpm = 1200  # 20 requests/s for the whole group, whatever the number of workers
    ray = _run(tmp_path, "ray", urls, "--limit", "3", "--backend", "ray", "--ray-address", ray_cluster.address,
               "--ray-workers", "2", "--rpm", str(rpm))
    assert ray["backend"]["name"] == "ray" and ray["samples"] == local["samples"] and ray["complete"]
    assert ray["scores"] == local["scores"]
    assert _answers(tmp_path / "ray.duckdb") == _answers(tmp_path / "local.duckdb")
    assert all(e["served"] > 0 for e in ray["endpoints"])  # both endpoints used

    stats = [s.stats(log=True) for s in sims]
    assert sum(st["requests"] for st in stats) == ray["samples"]["total"] and sum(st["rate_limited"] for st in stats) == 0
    arrivals = sorted(t for st in stats for t in st["times"])
    # A bucket of one second's worth, refilled at rpm/60 per second: in any window of
    # w seconds the two simulators together may see at most rpm/60 * (w + 1) requests.
    # Two workers each keeping their own limit would send twice that.
    for w in (1.0, 2.0):
        allowed = rpm / 60 * (w + 1)
        busiest = max(sum(1 for t in arrivals[i:] if t < start + w) for i, start in enumerate(arrivals))
        assert busiest <= allowed, (w, busiest, allowed)


def test_killing_a_worker_mid_run_requests_nothing_twice(tmp_path, start_sim, ray_cluster):
    n = 300
    prompts = {f"s{i}": f"Passage {i}: " + " ".join(f"w{(i * 13 + k) % 97}" for k in range(40)) + "\nAnswer:"
               for i in range(n)}
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": sid, "prompt": p, "answers": ["w1"], "max_tokens": 8}) + "\n"
                            for sid, p in prompts.items()))
    sims = [start_sim("--latency-ms", "150"), start_sim("--latency-ms", "150")]
    proc = _run(tmp_path, "kill", [s.base_url for s in sims], "--backend", "ray", "--ray-address", ray_cluster.address,
                "--ray-workers", "2", "--concurrency", "4", bench=f"jsonl:{data}", wait=False)
    try:
        deadline = time.monotonic() + 120
        while sum(s.stats()["requests"] for s in sims) < 60:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        # this cluster's own worker: a host-wide pgrep could hit another cluster's
        victims = [pid for pid, cmd in ray_cluster.processes().items() if "GenerationWorker" in cmd]
        assert victims, "no generation worker process found"
        os.kill(victims[0], signal.SIGKILL)
        killed_at = time.time()
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((tmp_path / "kill" / "run.json").read_text())
    assert summary["samples"]["answered"] == summary["samples"]["total"] == n
    assert summary["backend"]["workers_replaced"] >= 1

    con = duckdb.connect(str(tmp_path / "kill.duckdb"), read_only=True)
    done_before = [sid for (sid,) in con.execute(
        "SELECT r.sample_id FROM results r JOIN responses p ON p.key = r.key WHERE p.created_at < ?",
        [killed_at]).fetchall()]
    con.close()
    assert 0 < len(done_before) < n
    # the simulator logs sha256 of the prompt text of every request it receives
    log = [fp for s in sims for fp in s.stats(log=True)["log"]]
    seen_twice = {fp for fp in set(log) if log.count(fp) > 1}
    fingerprint = {sid: hashlib.sha256(p.encode("utf-8")).hexdigest() for sid, p in prompts.items()}
    assert set(fingerprint.values()) == set(log)  # every sample reached a simulator
    assert not seen_twice & {fingerprint[sid] for sid in done_before}
    # only the dead worker's in-flight requests (its concurrency share on two endpoints) go again
    assert len(seen_twice) <= 2 * 2


SCORING_SCRIPT = r"""
import sys
import anyio
from asyncbench.runners.ray import RayRunner
from asyncbench.benchmarks.longbench.score import score_many

words = [f"w{k}" for k in range(60)]
items = []
for i in range(900):
    ref = " ".join(words[(i + k) % 60] for k in range(40))
    pred = " ".join(words[(i * 7 + k) % 60] for k in range(35))
    dataset = ("hotpotqa", "gov_report", "vcsum")[i % 3]
    if dataset == "vcsum":
        ref, pred = "会议讨论了预算和进度。" * (1 + i % 5), "会议讨论了进度。" * (1 + i % 3)
    items.append((dataset, pred, [ref], None))
columns = list(zip(*items))
backend = RayRunner(sys.argv[1], workers=2, concurrency=4, timeout_s=60, max_attempts=3)
calls = []

def counting(fn, args):
    calls.append(len(args))
    return backend.map_chunks(fn, args)

try:
    remote = score_many(*columns, map_chunks=counting)
finally:
    anyio.run(backend.aclose)
assert calls and calls[0] > 1, calls  # the work really went out in chunks
assert remote == score_many(*columns, jobs=1), "Ray and local scores differ"
print("ok", calls[0])
"""


def test_scoring_on_ray_tasks_equals_local(ray_cluster):
    """CPU-heavy scoring through `map_chunks` (what `--backend ray` hands the benchmarks),
    in a driver process of its own as `asyncbench run` would be."""
    done = subprocess.run([sys.executable, "-c", SCORING_SCRIPT, ray_cluster.address], env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-3000:]


PULL_SCRIPT = r"""
import json, sys, time
import anyio
from asyncbench.client import make_client
from asyncbench.config import RunConfig
from asyncbench.pricing import PriceTable
from asyncbench.providers import parse_model_spec
from asyncbench.runners.ray import RayRunner
from asyncbench.scheduler import Budget, Job, Outcome

address, url, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = RunConfig(benchmark="jsonl:x", model="openai-compat:sim", base_urls=[url], concurrency=4)
client = make_client(parse_model_spec("openai-compat:sim", [url]), cfg, PriceTable(), None, None)
delays = (0.4, 0.0) if mode == "slow" else ()
runner = RayRunner(address, workers=2, concurrency=4, timeout_s=60, max_attempts=3, worker_delays=delays)
events = []
outcomes = []

async def main():
    answered = anyio.Event()

    def on_event(event):
        if isinstance(event, Outcome):
            outcomes.append(event)
            events.append(("outcome", time.monotonic()))
            answered.set()

    async def jobs():
        for i in range(60):
            if i == 1 and mode == "stream":
                # the rest of the stream waits for an answer: a runner that drained the
                # stream before sending would never get one (and time out here)
                with anyio.fail_after(60):
                    await answered.wait()
                events.append(("rest of the stream read after an answer", time.monotonic()))
            req = client.request(prompt=f"question {i} " + "word " * 20, max_tokens=4)
            yield Job(index=i, request=req, tokens=30)
        events.append(("stream exhausted", time.monotonic()))

    report = await runner.run(client, jobs(), on_event, budget=Budget(None))
    assert len(outcomes) == 60 and all(o.response is not None for o in outcomes)
    return report

try:
    report = anyio.run(main)
    print(json.dumps({"describe": report.backend, "events": [e for e, _ in events[:3]]}))
finally:
    anyio.run(runner.aclose)
"""


def _pull(mode: str, ray_cluster: Cluster, url: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PULL_SCRIPT, ray_cluster.address, url + "/v1", mode], env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_slow_worker_takes_fewer_jobs(start_sim, ray_cluster):
    """Pull-based: worker 0 spends 0.4 s per request, worker 1 none; free slots take the
    next job, so the fast worker answers most of them (static halves would give 30/30)."""
    sim = start_sim("--latency-ms", "20")
    served = _pull("slow", ray_cluster, sim.base_url)["describe"]["jobs_per_worker"]
    assert sum(served) == 60 and served[1] >= 45, served


def test_the_first_request_leaves_before_the_stream_is_read(start_sim, ray_cluster):
    sim = start_sim("--latency-ms", "20")
    events = _pull("stream", ray_cluster, sim.base_url)["events"]
    assert events[0] == "outcome" and "stream exhausted" not in events[:2], events
