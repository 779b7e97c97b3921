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

import pytest

from asyncbench.runners.ray import HOLD
from asyncbench.store import Store

pytest.importorskip("ray")
# a Ray start-up problem fails the test, never stalls CI; one cluster at a time under xdist
pytestmark = [pytest.mark.timeout(420), pytest.mark.slow, pytest.mark.xdist_group("ray")]

# The driver (`asyncbench run`) gets no Ray settings: it must keep a 127.0.0.1 address
# as given by itself. Token auth is off for this throwaway loopback cluster.
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
# The nodes register on 127.0.0.1 and listen there only (Ray's switch for a one-host
# cluster), and a lost node is noticed within seconds rather than the default ~30.
NODE_ENV = {**ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_health_check_period_ms": "1000",
            "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}

# Holds a head and N worker nodes (`ray.cluster_utils.Cluster`, one CPU and a 100 MB
# object store each, under one temp dir of its own; `ray start` refuses a second node on
# loopback) and obeys lines on stdin: `kill` SIGKILLs the last worker node's processes,
# `add` starts one more; EOF stops them all. Prints the state as JSON after each.
HOLDER = r"""
import json, sys
import ray._common.utils, ray._private.utils
from ray.cluster_utils import Cluster
# Cluster() records its address in /tmp/ray/ray_current_cluster, where any `ray.init()`
# without an address on this host would find and join it, and its shutdown deletes that
# file whoever wrote it: neither, for a cluster of tests
ray._private.utils.write_ray_address = lambda *args, **kwargs: None
ray._common.utils.reset_ray_address = lambda *args, **kwargs: None

temp, agent_port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
node_args = {"num_cpus": 1, "object_store_memory": 100_000_000, "temp_dir": temp}
cluster = Cluster(initialize_head=True, shutdown_at_exit=True, head_node_args={
    **node_args, "include_dashboard": False, "dashboard_agent_listen_port": agent_port})
workers = [cluster.add_node(**node_args) for _ in range(n)]

def state():
    return json.dumps({"address": cluster.address, "workers": [w.all_processes["raylet"][0].process.pid for w in workers]})

print(state(), flush=True)
for line in sys.stdin:
    if line.strip() == "kill":
        node = workers.pop()
        node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
        cluster.worker_nodes.discard(node)
    elif line.strip() == "add":
        workers.append(cluster.add_node(**node_args))
    print(state(), flush=True)
cluster.shutdown()
"""


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


def _state(pid: int) -> str:
    """A process's state letter (Z: a zombie, dead but not yet reaped), "" once gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@dataclass
class Cluster:
    """The holder process of a Ray cluster started by this module, and its state."""

    proc: subprocess.Popen
    temp: str
    state: dict = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.state["address"]

    def processes(self) -> dict[int, str]:
        """Every process of this cluster, and nothing else on the host."""
        return _tree(self.proc.pid)

    def worker_node_processes(self) -> dict[int, str]:
        """The last worker node's raylet and the Ray workers under it."""
        raylet = self.state["workers"][-1]
        return {raylet: "raylet", **_tree(raylet)}

    def command(self, line: str) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        self.state = json.loads(self.proc.stdout.readline())

    def stop(self) -> None:
        """EOF: the holder stops its nodes; whatever outlives it is killed by PID. Never
        `ray stop`, which stops every Ray on the host."""
        members = self.processes()
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster():
    """A head and one worker node on 127.0.0.1, started for these tests in a session of
    their own and stopped after by their own holder process and temp dir."""
    temp = tempfile.mkdtemp(prefix="abray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, temp, str(_free_port()), "1"], env=NODE_ENV,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    cluster = Cluster(proc, temp)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, f"the Ray cluster did not start (exit {proc.poll()})"
        cluster.state = json.loads(line)
        yield cluster
    finally:
        cluster.stop()


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
    """The stored answers (key, text, finish reason, completion tokens), by key."""
    with Store(path) as store:
        return [(r["key"], r["text"], r["finish_reason"], r["completion_tokens"]) for r in store.cache.rows()]


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
    # fewer actor calls than requests: jobs in batches, rate-limit tokens leased in blocks
    total = ray["samples"]["total"]
    assert ray["backend"]["batches"] < total and 0 < ray["backend"]["limiter_leases"] < total, ray["backend"]

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
    head, the only requests sent twice are ones in flight on the lost node, and the run's
    request count is what the servers received, the lost node's requests included."""
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
        # Answers held: every worker's slots fill with requests the servers received, and
        # then nothing moves. The kill comes at a moment when what each worker sent is
        # settled (a request leaving in the instant of a kill could be unknown to the
        # driver, and to the test, either way).
        for s in sims:
            s.hold()
        seen, still = -1, 0
        while still < 10:  # one second with no new request
            now = sum(s.stats()["requests"] for s in sims)
            still, seen = (still + 1 if now == seen else 0), now
            time.sleep(0.1)
        victims = ray_cluster.worker_node_processes()
        assert any("GenerationWorker" in cmd for cmd in victims.values()), f"no worker on the node: {victims}"
        ray_cluster.command("kill")
        killed_at = time.time()
        # A Ray worker outlives its raylet for a moment: released now, it could send its
        # queued jobs to the servers while nothing it says reaches the driver any more
        # (a node cut off, not lost). The answers flow again once it is gone.
        gone_by = time.monotonic() + 60
        while any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in victims):
            assert time.monotonic() < gone_by, f"the killed node's processes still run: {victims}"
            time.sleep(0.05)
        for s in sims:
            s.hold(False)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        ray_cluster.command("add")  # two nodes again for the tests after this one
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((tmp_path / "kill" / "run.json").read_text())
    assert summary["samples"]["answered"] == summary["samples"]["total"] == n
    backend = summary["backend"]
    assert backend["workers_replaced"] >= 1 and sum(n["requests"] for n in backend["nodes"]) == n, backend
    assert backend["batches"] < n and backend["limiter_leases"] == 0, backend  # no limit: no limiter call

    with Store(tmp_path / "kill.duckdb") as store:
        stored_at = {r["key"]: r["created_at"] for r in store.cache.rows()}
        done_before = [r.sample_id for r in store.runs.results(summary["run_id"])
                       if r.key in stored_at and stored_at[r.key] < killed_at]
    assert 0 < len(done_before) < n
    # the simulator logs sha256 of the prompt text of every request it receives
    log = [fp for s in sims for fp in s.stats(log=True)["log"]]
    seen_twice = {fp for fp in set(log) if log.count(fp) > 1}
    fingerprint = {sid: hashlib.sha256(p.encode("utf-8")).hexdigest() for sid, p in prompts.items()}
    assert set(fingerprint.values()) == set(log)  # every sample reached a simulator
    assert not seen_twice & {fingerprint[sid] for sid in done_before}
    # Sent twice: only jobs the driver handed again, the lost node's jobs with no outcome
    # back (in flight there, queued there and never sent, or answered there but not yet
    # delivered when it died: more of those on a loaded machine, where a worker's next
    # request leaves before its last answer reaches the driver, 5 once at a load of 650);
    # and those are at most what the driver lets one worker hold, HOLD (3) of its
    # capacities (its share of --concurrency 4, 2, on each of the two endpoints: 3 x 2 x 2).
    print(f"node kill: {len(seen_twice)} sent twice, {backend['requests_resent']} handed again, {backend}")
    assert len(log) - len(set(log)) == len(seen_twice) <= backend["requests_resent"] <= HOLD * 2 * 2, (seen_twice, backend)
    # every request counted, the lost node's too: run.json's count is the servers'
    this = summary["this_invocation"]
    assert this["requests"] == len(log) == sum(n["sent"] for n in backend["nodes"]), (this, len(log), backend)
    assert [n["lost"] for n in backend["nodes"]].count(True) == 1, backend["nodes"]
    lost = next(n for n in backend["nodes"] if n["lost"])  # and the summary on the terminal says so
    assert any(line.split()[:1] == [lost["node"]] and line.split()[-2:] == [str(lost["sent"]), "lost"]
               for line in out.splitlines()), out
    assert len(seen_twice) > 0  # the lost node had requests in flight: its share of the held ones


# Pasted into the driver scripts that check work ran on both nodes: a node just added (or
# re-added after the node-kill test) can take a while, on a loaded machine, before the
# head's scheduler offers it tasks. Ask until both nodes have run one, or give up after
# 120 s saying which nodes Ray knows.
BOTH_NODES = r"""
def wait_for_both_nodes(backend, limit_s=120.0):
    import time
    import ray
    deadline, seen = time.monotonic() + limit_s, set()
    while len(seen) < 2 and time.monotonic() < deadline:
        seen |= set(backend.map_chunks(lambda i: ray.get_runtime_context().get_node_id(), [(i,) for i in range(8)]))
        if len(seen) < 2:
            time.sleep(1.0)
    known = [(n["NodeID"][:8], n["Alive"], n["Resources"].get("CPU")) for n in ray.nodes()]
    assert len(seen) == 2, f"tasks ran on {len(seen)} node(s) in {limit_s:g} s; Ray knows {known}"
"""


SCORING_SCRIPT = BOTH_NODES + r"""
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
    wait_for_both_nodes(backend)  # where tasks run: both nodes take them
    remote = score_many(*columns, map_chunks=counting)
finally:
    anyio.run(backend.aclose)
assert calls and calls[0] > 1, calls  # the work really went out in chunks
assert remote == score_many(*columns, jobs=1), "Ray and local scores differ"
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
from asyncbench.pricing import PriceTable
from asyncbench.providers import parse_model_spec
from asyncbench.runners.ray import RayRunner
from asyncbench.scheduler import Budget, Job, Outcome

address, url, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = make_client(parse_model_spec("openai-compat:sim", [url]), PriceTable(), concurrency=4)
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


def test_ray_address_from_the_environment_is_the_cluster_joined_in_one_line(tmp_path):
    """RAY_ADDRESS without --ray-address is the cluster a run joins, as for Ray's own
    tools (it once said "no answer from Ray at a new local instance" after 63-74 s):
    a silent head there ends in one line naming the variable, in a running cluster's
    deadline (15 s), with none of Ray's C++ warnings on the terminal (they go to the
    file the line names)."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "prompt": "p", "answers": ["x"], "max_tokens": 4}) + "\n")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model",
                               "openai-compat:sim", "--base-url", "http://127.0.0.1:9/v1", "--backend", "ray",
                               "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"),
                               "--no-progress"], env={**ENV, "RAY_ADDRESS": address}, capture_output=True,
                              text=True, timeout=120)
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"no answer from Ray at {address} within 15 s" in lines[0] and "RAY_ADDRESS" in lines[0], lines[0]
    assert took < 60, took  # 15 s and the interpreter's start; Ray's own wait was over a minute


PRIVATE_EVAL_SCRIPT = BOTH_NODES + r"""
import json, sys
from pathlib import Path
import anyio
from asyncbench.benchmarks.bamboo import metrics as M
from asyncbench.benchmarks.bamboo.benchmark import load_private_eval, read_jsonl, run_programs
from asyncbench.runners.ray import RayRunner

address, data, python = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
res = load_private_eval(data)
rows = [r for _, r in read_jsonl(data / "private_eval_4k.jsonl")[0] if M.domain_of(r["task_id"]) in ("numpy", "pandas")]
programs = []
for r in rows[:5]:  # canonical solutions (most pass) and empty completions (never pass)
    for completion in (r["canonical_solution"][0], ""):
        program = M.private_eval_program(res.problem(r["task_id"]), completion, res.keywords)
        if program is not None:
            programs.append(program)
options = {"sandbox_python": python}
local = anyio.run(run_programs, programs, options)
backend = RayRunner(address, workers=1, concurrency=1, timeout_s=60, max_attempts=1)
nodes = []

def spread(fn, calls):
    def where(*args):
        import ray
        return ray.get_runtime_context().get_node_id(), fn(*args)

    out = backend.map_chunks(where, calls)
    nodes.extend(node for node, _ in out)
    return [result for _, result in out]

try:
    wait_for_both_nodes(backend)
    remote = anyio.run(run_programs, programs, options, spread)
finally:
    anyio.run(backend.aclose)
print(json.dumps({"local": [o.status for o in local], "remote": [o.status for o in remote], "chunks": len(nodes),
                  "nodes": len(set(nodes))}))
"""


def test_private_eval_programs_checked_on_both_nodes_equal_local(ray_cluster, shared_data):
    """PrivateEval's sandboxed programs in chunks on Ray tasks (each node probing its own
    sandbox): the same verdicts as the local path, and chunks ran on both nodes."""
    from asyncbench.benchmarks.bamboo.benchmark import SANDBOX_PYTHON_ENV
    from asyncbench.benchmarks.bamboo.sandbox import isolation

    python = os.environ.get(SANDBOX_PYTHON_ENV) or sys.executable
    if not isolation(python).safe:
        pytest.skip(f"no sandbox mode works here: {isolation(python).why}")
    if subprocess.run([python, "-c", "import numpy, pandas"], capture_output=True).returncode != 0:
        pytest.skip("numpy and pandas (the 'bamboo' extra) are not installed")
    done = subprocess.run([sys.executable, "-c", PRIVATE_EVAL_SCRIPT, ray_cluster.address, str(shared_data / "bamboo"),
                           python], env=ENV, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["remote"] == out["local"], out
    assert 1 <= sum(s == "passed" for s in out["local"]) < len(out["local"]), out  # passes and failures both
    assert out["chunks"] >= 2 and out["nodes"] == 2, out


SHARED_CHECK = r"""
import sys, time
import ray
from asyncbench.runners.ray_connect import connect
from asyncbench.runners.ray_shared import NAMESPACE, PREFIX

release = connect(ray, sys.argv[1], 60)
deadline = time.monotonic() + float(sys.argv[2])
try:
    while True:  # a killed actor's name is freed a moment later
        left = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                if a["namespace"] == NAMESPACE and a["name"].startswith(PREFIX)]
        if left and len(sys.argv) > 3:  # where it runs: the head node
            head = [n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"]]
            actor = ray.get_actor(left[0], namespace=NAMESPACE)
            where = ray.get(actor.__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id()), timeout=30)
            print("on head" if [where] == head else f"not on the head: {where} {head}")
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
finally:
    ray.shutdown()
    release.set()
print(len(left))
"""


def _shared_limiters_left(ray_cluster: Cluster, wait_s: float, on_head: bool = False) -> int:
    done = subprocess.run([sys.executable, "-c", SHARED_CHECK, ray_cluster.address, str(wait_s),
                           *(["head"] if on_head else [])], env=ENV, capture_output=True, text=True, timeout=120 + wait_s)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    if on_head:
        assert "on head" in lines, lines
    return int(lines[-1])


def test_two_drivers_share_one_rate_limit(tmp_path, start_sim, ray_cluster):
    """Two `asyncbench run` processes on one cluster with `--ray-shared-limiter`, against
    one simulator enforcing the RPM they were given: together they keep it (at most two
    429s; the requests take at least 0.9x the time the limit allows for them), and the
    shared limiter is gone once both have ended."""
    # 2 requests/s: a request is 429'd when it reaches the server more than a slot
    # (500 ms) earlier, relative to the one before, than the limiter granted it (at 300
    # RPM, 200 ms of scheduling jitter on a loaded 2-core host gave 1-2 429s)
    rpm, n = 120, 20
    sim = start_sim("--rpm", str(rpm), "--latency-ms", "20")
    prompts: dict[str, list[str]] = {}
    procs = {}
    for d in ("a", "b"):
        prompts[d] = [f"Driver {d}, passage {i}: " + " ".join(f"w{(i * 7 + k) % 89}" for k in range(30)) + "\nAnswer:"
                      for i in range(n)]
        data = tmp_path / f"{d}.jsonl"
        data.write_text("".join(json.dumps({"id": f"{d}{i}", "prompt": p, "answers": ["w1"], "max_tokens": 4}) + "\n"
                                for i, p in enumerate(prompts[d])))
        procs[d] = _run(tmp_path, d, [sim.base_url], "--backend", "ray", "--ray-address", ray_cluster.address,
                        "--ray-workers", "1", "--rpm", str(rpm), "--ray-shared-limiter", "sharedtest",
                        bench=f"jsonl:{data}", wait=False)
    for d, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        summary = json.loads((tmp_path / d / "run.json").read_text())
        assert summary["samples"]["answered"] == n and summary["backend"]["shared_limiter"] == "sharedtest"
    stats = sim.stats(log=True)
    assert stats["ok"] == 2 * n and stats["rate_limited"] <= 2, stats
    when = dict(zip(stats["log"], stats["times"]))  # the answered attempt (the last) of each prompt
    start = min(stats["times"])
    refused = [round(t - start, 2) for i, (fp, t) in enumerate(zip(stats["log"], stats["times"]))
               if fp in stats["log"][i + 1:]]  # seconds into the run of each 429
    spans = {d: [when[hashlib.sha256(p.encode()).hexdigest()] for p in ps] for d, ps in prompts.items()}
    overlap = min(max(s) for s in spans.values()) - max(min(s) for s in spans.values())
    wall = max(stats["times"]) - min(stats["times"])
    ideal = (2 * n - rpm / 60) / (rpm / 60)  # a full bucket (one second's worth) at once, then the rate
    print(f"shared limiter: {stats['rate_limited']} x 429, wall {wall:.1f} s, ideal {ideal:.1f} s, "
          f"overlap {overlap:.1f} s, achieved {60 * (2 * n - 1) / wall:.0f} RPM of {rpm}; 429s at {refused} s")
    assert overlap > 2, spans  # both drivers sent at the same time (else nothing was shared)
    assert wall >= 0.9 * ideal, (wall, ideal)
    assert _shared_limiters_left(ray_cluster, 20) == 0  # the last driver to end removed it


CRASH_SCRIPT = r"""
import os, sys
import anyio
from asyncbench.errors import UserError
from asyncbench.providers import parse_model_spec
from asyncbench.runners.ray import RayRunner

runner = RayRunner(sys.argv[1], workers=1, concurrency=1, timeout_s=5, max_attempts=1, shared_limiter="crashtest",
                   shared_ttl_s=10.0)
spec = parse_model_spec("openai-compat:sim", ["http://127.0.0.1:9/v1"])
anyio.run(runner.group, spec, "sk-not-used", 60.0, None)
print("attached", flush=True)
other = RayRunner(sys.argv[1], workers=1, concurrency=1, timeout_s=5, max_attempts=1, shared_limiter="crashtest")
try:  # another run asking for another limit under the same name
    anyio.run(other.group, spec, "sk-not-used", 120.0, None)
except UserError as exc:
    print(exc, flush=True)
os._exit(1)  # a driver that dies without detaching
"""


def test_a_shared_limiter_outlives_a_crashed_driver_by_its_ttl_only(ray_cluster):
    """A driver killed before it could detach: its attachment lapses after the TTL and the
    actor removes itself; meanwhile a run asking for other limits under the name is refused."""
    done = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, ray_cluster.address], env=ENV, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 1 and "attached" in done.stdout, done.stderr[-3000:]
    refused = done.stdout.strip().splitlines()[-1]  # other limits under the same name: one line
    assert refused.startswith("--ray-shared-limiter crashtest: the runs sharing it use other limits (it holds "
                              "--rpm 60 --tpm none); this run asks --rpm 120 --tpm none: give every run the same limits, or another name"), done.stdout
    assert _shared_limiters_left(ray_cluster, 0, on_head=True) == 1  # still there right after the crash
    assert _shared_limiters_left(ray_cluster, 60) == 0  # expired: 10 s without renewal, then 10 s idle


POOL_SCRIPT = r"""
import sys, time
import anyio, ray
from asyncbench.providers import parse_model_spec
from asyncbench.runners.ray import RayRunner

spec = parse_model_spec("openai-compat:sim", ["http://127.0.0.1:9/v1"])

def pooled():
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "pooltest" in a["name"])

async def one_run():
    runner = RayRunner(sys.argv[1], workers=2, concurrency=2, timeout_s=5, max_attempts=1, idle_s=3.0,
                       pool_tag="pooltest")
    started = time.monotonic()
    group = await runner.group(spec, "sk-not-used", None, None)
    took = time.monotonic() - started
    names = pooled()
    await runner.aclose()
    return group.reused, took, names

for run in (1, 2):
    reused, took, names = anyio.run(one_run)
    print(run, reused, f"{took:.2f}", ",".join(names), flush=True)
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + 60
while pooled() and time.monotonic() < deadline:
    time.sleep(0.5)
print("left", len(pooled()), f"{60 - (deadline - time.monotonic()):.1f}", flush=True)
"""


def test_workers_are_reused_by_the_next_run_and_end_when_idle(ray_cluster):
    """A second run on a running cluster finds the first run's workers and limiter host
    (no Ray worker process started for it); with no run attached they end themselves
    after their idle time (3 s here, 10 min by default)."""
    done = subprocess.run([sys.executable, "-c", POOL_SCRIPT, ray_cluster.address], env=ENV, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second, left = (line.split() for line in done.stdout.strip().splitlines()[-3:])
    print(first, second, left)
    assert first[1] == "0" and second[1] == "2", done.stdout  # two workers made, then both reused
    assert first[3] == second[3] and first[3].count("asyncbench-gen") == 2, done.stdout  # the same actors
    assert "asyncbench-limits" in first[3], done.stdout
    assert left[1] == "0", done.stdout  # all ended once idle


def test_a_run_without_an_address_starts_its_own_instance_beside_a_cluster(tmp_path, start_sim, ray_cluster):
    """No --ray-address and no RAY_ADDRESS: a private local instance, even while a
    cluster started on this host is recorded in /tmp/ray/ray_current_cluster (which
    Ray's own `ray.init()` would join: another user's, or a test's, cluster)."""
    recorded = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    before = recorded.read_text() if recorded.exists() else None
    recorded.parent.mkdir(exist_ok=True)
    recorded.write_text(ray_cluster.address)  # what `ray start` / the cluster's head writes
    try:
        _run_without_address(tmp_path, start_sim)
    finally:  # the host's record as it was
        if before is None:
            recorded.unlink(missing_ok=True)
        else:
            recorded.write_text(before)


def _run_without_address(tmp_path: Path, start_sim) -> None:
    sim = start_sim()
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"p {i}", "answers": ["x"], "max_tokens": 4}) + "\n"
                            for i in range(5)))
    env = {k: v for k, v in ENV.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
                           "--base-url", sim.base_url + "/v1", "--backend", "ray", "--ray-workers", "2",
                           "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"), "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    backend = json.loads((tmp_path / "out" / "run.json").read_text())["backend"]
    assert backend["address"] == "local" and len(backend["nodes"]) == 1, backend  # one node: its own
