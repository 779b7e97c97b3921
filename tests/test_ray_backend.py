"""`--backend ray` on a real two-node Ray cluster (loopback only, each node with its own
ports and temp dir) against simulator subprocesses: work on both nodes, the same answers
and scores as the local backend, a global RPM shared by the workers, a node killed
mid-run, scoring spread over the nodes, and a dead or silent cluster said in one line."""

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
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("ray")
# a Ray start-up problem fails the test, never stalls CI; one cluster at a time under xdist
pytestmark = [pytest.mark.timeout(420), pytest.mark.slow, pytest.mark.xdist_group("ray")]

RAY = str(Path(sys.executable).with_name("ray"))
# The driver (`asyncbench run`) gets no Ray settings: it must keep a 127.0.0.1 address
# as given by itself. Token auth is off for this throwaway loopback cluster.
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
# The nodes: registered on 127.0.0.1 (not the host's other address), and a lost node
# noticed within a few seconds rather than the default ~30.
NODE_ENV = {**ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_health_check_period_ms": "1000",
            "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(root: int) -> dict[int, str]:
    """Every descendant of `root` (PID -> command line), and nothing else on the host:
    read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            found[pid] = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        todo.extend(children.get(pid, []))
    return found


@dataclass
class Node:
    """One `ray start --block` process (head or worker node) and its temp dir."""

    proc: subprocess.Popen
    temp: str

    def processes(self) -> dict[int, str]:
        return _tree(self.proc.pid)

    def kill(self) -> None:
        """The node lost at once: SIGKILL to its whole process tree, by PID."""
        members = self.processes()
        with contextlib.suppress(OSError):
            os.kill(self.proc.pid, signal.SIGKILL)
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """`ray start --block` stops its node's processes on SIGTERM; whatever outlives
        it is killed by PID. Never `ray stop`, which stops every Ray on the host."""
        members = self.processes()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


@dataclass
class Cluster:
    """A Ray head on 127.0.0.1 and the worker nodes started beside it by this module."""

    address: str
    head: Node
    workers: list[Node] = field(default_factory=list)

    def processes(self) -> dict[int, str]:
        return {pid: cmd for node in (self.head, *self.workers) for pid, cmd in node.processes().items()}

    def add_node(self) -> Node:
        node = _start_node(["--address", self.address])
        self.workers.append(node)
        _wait_for_nodes(self.address, 1 + sum(n.proc.poll() is None for n in self.workers))
        return node


def _start_node(role: list[str], port: int | None = None) -> Node:
    """`ray start` with one CPU, a 100 MB object store, its own ports and temp dir (short:
    Ray's socket paths must fit 107 bytes), in a session of its own."""
    temp = tempfile.mkdtemp(prefix="abray", dir="/tmp")
    ports = {flag: _free_port() for flag in ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
                                             "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                             "--runtime-env-agent-port")}
    first_worker = _free_port()
    cmd = [RAY, "start", "--block", *role, "--node-ip-address=127.0.0.1", f"--temp-dir={temp}", "--num-cpus=1",
           "--object-store-memory=100000000", "--disable-usage-stats", *[f"{k}={v}" for k, v in ports.items()],
           f"--min-worker-port={first_worker}", f"--max-worker-port={first_worker + 40}"]
    proc = subprocess.Popen(cmd, env=NODE_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    return Node(proc, temp)


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


ALIVE_NODES = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + 120
while sum(n["Alive"] for n in ray.nodes()) != int(sys.argv[2]):
    assert time.monotonic() < deadline, ray.nodes()
    time.sleep(0.5)
print(sorted({n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}))
"""


def _wait_for_nodes(address: str, n: int) -> None:
    done = subprocess.run([sys.executable, "-c", ALIVE_NODES, address, str(n)], env=NODE_ENV, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['127.0.0.1']", done.stdout  # every node on loopback


@pytest.fixture(scope="module")
def ray_cluster():
    """A head and one worker node, one CPU each, started for these tests and stopped after
    by their own process trees and temp dirs."""
    port = _free_port()
    head = _start_node(["--head", f"--port={port}", "--include-dashboard=false"])
    cluster = Cluster(f"127.0.0.1:{port}", head)
    try:
        _wait_for_port(port, head.proc, 120)
        cluster.add_node()
        yield cluster
    finally:
        for node in (*cluster.workers, head):
            node.stop()


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
    nodes = ray["backend"]["nodes"]  # one worker on each node, and both answered requests
    assert len(nodes) == 2 and all(n["requests"] > 0 and n["workers"] == 1 for n in nodes), nodes
    assert sum(n["requests"] for n in nodes) == ray["samples"]["total"]

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


def test_a_node_killed_mid_run_repeats_only_its_in_flight_requests(tmp_path, start_sim, ray_cluster):
    """The worker node's whole process tree SIGKILLed mid-run: the run completes on the
    head, and the only requests sent twice are ones in flight on the lost node."""
    n = 300
    prompts = {f"s{i}": f"Passage {i}: " + " ".join(f"w{(i * 13 + k) % 97}" for k in range(40)) + "\nAnswer:"
               for i in range(n)}
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": sid, "prompt": p, "answers": ["w1"], "max_tokens": 8}) + "\n"
                            for sid, p in prompts.items()))
    sims = [start_sim("--latency-ms", "150"), start_sim("--latency-ms", "150")]
    victim = ray_cluster.workers[-1]
    proc = _run(tmp_path, "kill", [s.base_url for s in sims], "--backend", "ray", "--ray-address", ray_cluster.address,
                "--ray-workers", "2", "--concurrency", "4", bench=f"jsonl:{data}", wait=False)
    try:
        deadline = time.monotonic() + 120
        while sum(s.stats()["requests"] for s in sims) < 60:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        assert any("GenerationWorker" in cmd for cmd in victim.processes().values()), "no worker on the node"
        victim.kill()
        killed_at = time.time()
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        ray_cluster.workers.remove(victim)
        victim.stop()
        ray_cluster.add_node()  # two nodes again for the tests after this one
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((tmp_path / "kill" / "run.json").read_text())
    assert summary["samples"]["answered"] == summary["samples"]["total"] == n
    backend = summary["backend"]
    assert backend["workers_replaced"] == 1 and sum(n["requests"] for n in backend["nodes"]) == n

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
    # Sent twice: at most what the lost node had in flight, its one worker's share of
    # --concurrency 4 on each of the two endpoints (2 x 2), and at most the jobs the
    # driver handed again (its queued ones among them, which had never been sent).
    assert len(log) - len(set(log)) == len(seen_twice) <= min(2 * 2, backend["requests_resent"])


SCORING_SCRIPT = r"""
import sys
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
    import ray  # where tasks run: spread over both nodes
    nodes = backend.map_chunks(lambda i: ray.get_runtime_context().get_node_id(), [(i,) for i in range(8)])
finally:
    backend.close()
assert calls and calls[0] > 1, calls  # the work really went out in chunks
assert remote == score_many(*columns, jobs=1), "Ray and local scores differ"
assert len(set(nodes)) == 2, nodes
print("ok", calls[0])
"""


def test_scoring_on_ray_tasks_equals_local(ray_cluster):
    """CPU-heavy scoring through `map_chunks` (what `--backend ray` hands the benchmarks),
    in a driver process of its own as `asyncbench run` would be, on both nodes."""
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
from asyncbench.scheduler import Budget, Job

address, url, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = RunConfig(benchmark="jsonl:x", model="openai-compat:sim", base_urls=[url], concurrency=4)
client = make_client(parse_model_spec("openai-compat:sim", [url]), cfg, PriceTable(), None, None)
delays = (0.4, 0.0) if mode == "slow" else ()
runner = RayRunner(address, workers=2, concurrency=4, timeout_s=60, max_attempts=3, worker_delays=delays)
events = []

async def main():
    answered = anyio.Event()

    def on_outcome(outcome):
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

    outcomes = await runner.run(client, jobs(), budget=Budget(None), on_outcome=on_outcome)
    assert len(outcomes) == 60 and all(o.response is not None for o in outcomes)

try:
    anyio.run(main)
    print(json.dumps({"describe": runner.describe(), "events": [e for e, _ in events[:3]]}))
finally:
    runner.close()
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


CONNECT_SCRIPT = r"""
import sys, time
from asyncbench.errors import UserError
from asyncbench.runners.ray import RayRunner
started = time.monotonic()
try:
    RayRunner(sys.argv[1], workers=1, concurrency=1, timeout_s=5, max_attempts=1, connect_timeout_s=5)
except UserError as exc:
    print(exc)
    print(round(time.monotonic() - started))
"""


def test_a_port_without_ray_is_one_line_naming_it(tmp_path):
    """Nothing on the port: `asyncbench run` says so at once (exit 2, no traceback)."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "prompt": "p", "answers": ["x"], "max_tokens": 4}) + "\n")
    address = f"127.0.0.1:{_free_port()}"
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
                           "--base-url", "http://127.0.0.1:9/v1", "--backend", "ray", "--ray-address", address,
                           "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"), "--no-progress"],
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach Ray at {address}" in lines[0], done.stderr


def test_a_silent_ray_address_ends_after_the_timeout():
    """A port that takes the connection and never answers (a hung GCS): `ray.init` alone
    would wait for minutes; the runner gives up after its timeout, naming the address."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        done = subprocess.run([sys.executable, "-c", CONNECT_SCRIPT, address], env=ENV, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    message, seconds = done.stdout.strip().splitlines()
    assert message.startswith(f"no answer from Ray at {address} within 5 s"), message
    assert 4 <= int(seconds) < 60
