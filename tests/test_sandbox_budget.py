"""One sample, one budget, in total (issue 35 item 6): a PrivateEval sample's memory,
process and CPU limits hold for all its processes and the kernel memory they hold, and
the dataset's test code runs inside the sandbox, not as root in the checker.

Before, the limits were per process: a program forking through libc (past the audit
hook) held 2 GiB in each of 16 processes, 333 MB in socket buffers at 13 MB resident,
5.7 CPU-s under a 2 s limit and passed; a test calling `os.system` ran as root on the
host. Each test runs in every mode this machine has (tests/sandbox_modes.py), with a
cgroup per sample and without one (no fork at all then), and as an ordinary user.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_modes import NO_CGROUP, forced, run_as_user, unavailable, user_python

from asyncbench.benchmarks.bamboo import sandbox, sandbox_cgroup
from asyncbench.benchmarks.bamboo.sandbox import Limits, Program

MODES = ("bwrap", "mountns", "bwrap" + NO_CGROUP, "mountns" + NO_CGROUP, "user-bwrap")
# every test that starts sandboxes runs in one xdist worker (see test_sandbox_forgery)
pytestmark = pytest.mark.xdist_group("sandbox")
MB = 1 << 20
# what the sandbox's own processes (checker, bwrap or sandbox_root) hold beside the program,
# and the interpreter's pages a fork shares, which a sum of RSS counts once per process
HARNESS_SLACK = 128 * MB


def _why_not(mode: str) -> str:
    why = unavailable(mode)
    if not why and mode in ("bwrap", "mountns") and not sandbox_cgroup.available().version:
        why = f"no cgroup can be made here: {sandbox_cgroup.available().why}"
    return why


@pytest.fixture(params=MODES, name="mode")
def mode_fixture(request: pytest.FixtureRequest) -> Iterator[str]:
    why = _why_not(request.param)
    if why:
        pytest.skip(why)
    if request.param == "user-bwrap":
        yield request.param
        return
    with forced(request.param):
        yield request.param


def _run(mode: str, prog: Program, limits: Limits) -> sandbox.ProgramVerdict:
    if mode != "user-bwrap":
        # as root without a cgroup bwrap runs as a per-run uid: an interpreter any uid can run
        python = user_python() if mode == "bwrap" + NO_CGROUP and os.geteuid() == 0 else None
        return sandbox.check(prog.module, prog.test, prog.entry_point, prog.setup, prog.outputs, limits, python)
    python = user_python()
    assert python
    with tempfile.TemporaryDirectory() as d:
        iso, statuses = run_as_user([prog], Path(d), python, limits)
    assert iso == "bwrap"
    return sandbox.ProgramVerdict(statuses[0], 0.0)


class TreeMemory:
    """Independent of the sandbox's word: the largest sum of resident memory over all
    processes descended from this one, sampled every 20 ms while the block runs."""

    def __init__(self) -> None:
        self.peak = 0
        self._before: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._before = set(self._descendants()[0])  # an earlier test's processes still exiting
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _descendants(self) -> tuple[dict[int, int], int]:
        """{pid: resident bytes} of every process below this one, and their sum (without
        those already there when the block began)."""
        me = os.getpid()
        page = os.sysconf("SC_PAGE_SIZE")
        parent: dict[int, int] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parent[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * page
        mine = {}
        for pid, size in rss.items():
            up, seen = parent.get(pid), 0
            while up and up != me and seen < 64:
                up, seen = parent.get(up), seen + 1
            if up == me:
                mine[pid] = size
        return mine, sum(size for pid, size in mine.items() if pid not in self._before)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._descendants()[1])


# Forks through libc (the audit hook never sees it); each child writes 200 MB and holds
# it; the parent fails unless every child ended well.
FORKING_HOG = """
import ctypes, os, time
libc = ctypes.CDLL(None)
kids = []
for _ in range(6):
    pid = libc.fork()
    assert pid >= 0, "fork failed"
    if pid == 0:
        block = b"\\x01" * (200 << 20)
        time.sleep(3)
        libc._exit(0)
    kids.append(pid)
mine = b"\\x01" * (200 << 20)
assert all(os.waitpid(pid, 0)[1] == 0 for pid in kids), "a child died"
"""


def test_a_forking_memory_hog_stays_within_the_sample_limit(mode: str) -> None:
    """Seven processes of 200 MB under a 384 MB sample limit: on the old per-process
    limits all seven held theirs (1.4 GB) and the sample passed."""
    limit = 384 * MB
    _run(mode, Program("x = 1"), Limits(cpu_s=10.0, wall_s=60.0, memory_bytes=limit))  # probes before measuring
    with TreeMemory() as tree:
        out = _run(mode, Program(FORKING_HOG), Limits(cpu_s=10.0, wall_s=60.0, memory_bytes=limit))
    assert not out.passed, out
    assert tree.peak <= limit + HARNESS_SLACK, (tree.peak / MB, out)
    if out.peak_bytes is not None:  # the cgroup's own count, kernel memory included
        assert out.peak_bytes <= limit, out


# Fills socketpairs through libc (kernel memory, outside RLIMIT_AS; the audit hook refuses
# Python's socket module) and tells the test how much it queued.
SOCKET_FILLER = """
import ctypes
libc = ctypes.CDLL(None)
queued = 0
block = b"x" * 65536
size = ctypes.c_int(1 << 30)
for _ in range(64):
    fds = (ctypes.c_int * 2)()
    if libc.socketpair(1, 1, 0, fds) != 0:  # AF_UNIX, SOCK_STREAM, past the audit hook
        break
    for fd in fds:
        libc.setsockopt(fd, 1, 7, ctypes.byref(size), 4)  # SO_SNDBUF: up to 2 x wmem_max
        while True:
            sent = libc.send(fd, block, len(block), 0x40)  # MSG_DONTWAIT
            if sent <= 0:
                break
            queued += sent
"""


def test_socket_buffers_count_against_the_sample(mode: str) -> None:
    """Up to 8 MiB of kernel memory per socket (2 x wmem_max): 64 socketpairs would hold
    about 1 GB, and did (at a few MB resident). Now the cgroup charges them (and kills
    the program at the limit) or, without one, 16 descriptors bound them."""
    limit = 256 * MB
    test = "def check():\n    raise AssertionError('queued %d' % queued)\n"
    out = _run(mode, Program(SOCKET_FILLER, test, None, "", ("queued",)),
               Limits(cpu_s=10.0, wall_s=60.0, memory_bytes=limit))
    assert not out.passed, out
    if "queued " in out.status:
        assert int(out.status.rsplit("queued ", 1)[1]) <= limit, out
    else:  # killed at the cgroup's limit before it could answer
        assert out.peak_bytes is not None and out.peak_bytes <= limit, out
    if out.peak_bytes is not None:
        assert out.peak_bytes <= limit, out


def _burner(children: str) -> str:
    return f"""
import ctypes, os, time
libc = ctypes.CDLL(None)
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
{children}
"""


# Four children of 1.5 CPU-s each, waited for: 6 CPU-s under a 2 s limit (where a fork
# fails, the program burns that share itself).
SPREAD = _burner("""
kids = []
for _ in range(4):
    pid = libc.fork()
    if pid == 0:
        burn(1.5)
        libc._exit(0)
    if pid < 0:
        burn(1.5)
    kids.append(pid)
for pid in kids:
    if pid > 0:
        os.waitpid(pid, 0)
""")
# Three orphans (double forks) burn 2.5 CPU-s each and say so on a pipe; the program
# ends once they have, leaving them to the sandbox.
ORPHAN = _burner("""
r, w = os.pipe()
for _ in range(3):
    pid = libc.fork()
    if pid == 0:
        if libc.fork() == 0:
            burn(2.5)
            os.write(w, b"x")
            time.sleep(600)
        libc._exit(0)
    if pid < 0:
        burn(2.5)
        os.write(w, b"x")
    else:
        os.waitpid(pid, 0)
got = b""
while len(got) < 3:
    got += os.read(r, 3)
""")


@pytest.mark.parametrize("code", [SPREAD, ORPHAN], ids=["children", "orphan"])
def test_cpu_spread_over_forked_processes_cannot_pass(mode: str, code: str) -> None:
    """The CPU limit is the sum over every process of the sample (the checker reaps them
    all, so RUSAGE_CHILDREN counts them): before, each child had its own RLIMIT_CPU and
    the sample passed with 6 CPU-s under 2 s."""
    out = _run(mode, Program(code), Limits(cpu_s=2.0, wall_s=120.0))
    assert out.status.startswith("timed out: the CPU limit"), out


def test_the_datasets_test_code_runs_inside_the_sandbox(mode: str) -> None:
    """Data fetched from the hub is code we run: a test that calls os.system or writes
    a file runs as the sandbox's uid, without capabilities, and cannot touch the host."""
    host = Path(tempfile.mkdtemp(prefix="asyncbench-host-"))
    host.chmod(0o777)  # writable by anyone: only the isolation can keep the test out
    try:
        test = (f"import os\nos.system('id > {host}/id.txt')\n"
                f"try:\n    open('{host}/written.txt', 'w').write('x')\nexcept OSError:\n    pass\n"
                "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
                "def check():\n    raise AssertionError('uid=%d caps=%s' % (os.getuid(), caps))\n")
        out = _run(mode, Program("x = 1\n", test, None, "", ("x",)), Limits(cpu_s=5.0, wall_s=60.0))
        assert sorted(p.name for p in host.iterdir()) == [], out
        assert out.status.startswith("failed: AssertionError: uid="), out
        assert out.status.endswith("caps=0000000000000000"), out
        if mode.startswith("mountns"):
            assert not out.status.startswith("failed: AssertionError: uid=0 "), out
    finally:
        for p in host.iterdir():
            p.unlink()
        host.rmdir()


def test_no_cgroup_is_said_in_one_line_before_a_run() -> None:
    """Where a limit cannot hold for a sample as a whole, the isolation says so in one
    line (PrivateEval's prepare prints it before any request is sent)."""
    mode = "mountns" if not unavailable("mountns") else "bwrap"
    if unavailable(mode):
        pytest.skip(unavailable(mode))
    with forced(mode + NO_CGROUP):
        note = sandbox.isolation().limits_note()
    assert note.startswith("PrivateEval: no cgroup can be made here") and "RLIMIT_NPROC=0" in note
    assert "\n" not in note
    if sandbox_cgroup.available().version:
        with forced(mode):
            assert sandbox.isolation().limits_note() == ""


def test_every_sample_cgroup_is_removed_even_after_a_timeout() -> None:
    """A sample killed at its wall-clock cap leaves no cgroup (nor process) behind."""
    where = sandbox_cgroup.available()
    if not where.version or unavailable("mountns"):
        pytest.skip(where.why or unavailable("mountns"))

    def ours() -> list[str]:
        return [str(p) for parent in where.parents
                for p in Path(parent).glob(f"{sandbox_cgroup.PREFIX}{os.getpid()}-*")]

    with forced("mountns"):
        out = sandbox.execute("import ctypes, time\nctypes.CDLL(None).fork()\ntime.sleep(600)",
                              Limits(cpu_s=1.0, wall_s=3.0))
    assert out.status.startswith("timed out: the wall-clock cap"), out
    assert ours() == []


def test_prepare_says_the_missing_cgroup_in_one_line_before_any_request(capsys: pytest.CaptureFixture[str]) -> None:
    """PrivateEval's prepare (before any request is sent) prints the one line and records
    it in run.json's `prepare.sandbox`; with a cgroup it prints nothing."""
    import asyncio

    from asyncbench.benchmarks.bamboo.benchmark import BambooBenchmark
    from asyncbench.benchmarks.base import RunContext
    from asyncbench.types import Sample

    if unavailable("mountns"):
        pytest.skip(unavailable("mountns"))
    python = user_python()
    sample = Sample(id="private_eval_4k/0", task="private_eval_4k", prompt="p", answers=[], max_tokens=8,
                    metric="pass", chat=True, meta={"dataset": "private_eval"})
    ctx = RunContext("fake:model", None, None, {"sandbox_python": python})  # type: ignore[arg-type]

    def prepared(mode: str) -> dict[str, object]:
        with forced(mode), pytest.MonkeyPatch.context() as mp:
            mp.setattr("asyncbench.benchmarks.bamboo.sandbox_env.PROBE_IMPORTS", "import json")
            _, report = asyncio.run(BambooBenchmark().prepare([sample], ctx))
        return dict(report["sandbox"])

    without = prepared("mountns" + NO_CGROUP)
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "PrivateEval" in line] == [f"asyncbench: {without['limits_note']}"]
    assert str(without["limits_note"]).startswith("PrivateEval: no cgroup can be made here")
    if sandbox_cgroup.available().version:
        with_cgroup = prepared("mountns")
        assert "limits_note" not in with_cgroup and with_cgroup["cgroup"] == sandbox_cgroup.available().version
        assert "PrivateEval" not in capsys.readouterr().err
