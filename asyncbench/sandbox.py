"""Run untrusted Python (model-written code) so that it can only harm its own sample.

Each program runs in a fresh `python -I` interpreter (never a fork of this process, which
holds API keys, sockets and caches), in its own session and throwaway working directory,
with an empty environment. Layers, each useful on its own:

- resource limits set before the program starts: CPU seconds, address space (memory),
  file size, no core dumps, and a process count;
- a Python audit hook that refuses sockets, fork/exec/spawn, signals and ctypes, so the
  common hostile programs fail with an exception instead of doing anything;
- when this process is root: private network and PID namespaces (`unshare`: no network
  interface but a downed loopback; the program is the namespace's init, so when it dies
  the kernel kills and reaps everything it started, leaving no orphans or zombies on the
  host) and an unprivileged uid picked at random for this run
  (`setpriv`), which makes RLIMIT_NPROC effective (root ignores it), keeps the program out
  of files it does not own, and lets cleanup kill every process of that uid;
- a wall-clock timeout, after which the whole process group (and, with a private uid,
  every process of that uid) is killed.

What is available is probed once per process; `isolation()` reports it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# Printed by the bootstrap on the result descriptor; user output goes to /dev/null.
_MARK = "@@asyncbench-sandbox@@ "

# Runs inside the sandboxed interpreter before the program. Kept as source (passed with
# -c) so the child imports nothing from this package.
_BOOTSTRAP = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
def _limit(name, soft, hard=None):
    resource.setrlimit(getattr(resource, name), (soft, soft if hard is None else hard))
_limit("RLIMIT_CORE", 0)
_limit("RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1)
_limit("RLIMIT_AS", cfg["memory_bytes"])
_limit("RLIMIT_FSIZE", cfg["file_size_bytes"])
if cfg["nproc"] is not None:
    _limit("RLIMIT_NPROC", cfg["nproc"])
with open("program.py", encoding="utf-8") as fh:
    source = fh.read()
result_fd = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
_BLOCKED = frozenset(cfg["blocked_events"])
def _guard(event, args):
    if event in _BLOCKED:
        raise PermissionError("sandbox: " + event + " is not allowed")
sys.addaudithook(_guard)
try:
    exec(compile(source, "program.py", "exec"), {})
    verdict = "passed"
except BaseException as exc:
    verdict = ("failed: " + type(exc).__name__ + ": " + str(exc))[:500]
os.write(result_fd, (cfg["mark"] + json.dumps(verdict) + "\n").encode())
os._exit(0)
"""

# Audit events refused inside the sandbox. ctypes stays allowed (numpy loads its libraries
# through it); calling libc's fork or socket through ctypes is what the process limit,
# the private uid and the network namespace are for.
BLOCKED_EVENTS: tuple[str, ...] = (
    "socket.__new__",
    "socket.connect",
    "socket.bind",
    "socket.getaddrinfo",
    "socket.sendto",
    "os.fork",
    "os.forkpty",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.kill",
    "os.killpg",
    "subprocess.Popen",
    "pty.spawn",
)

_MINIMAL_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # BLAS thread pools would count against the process limit and the CPU budget.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Limits:
    """Per-program limits. The wall-clock timeout includes interpreter start-up and the
    program's imports (pandas alone takes about a second on a busy 2-core machine)."""

    timeout_s: float = 10.0
    memory_bytes: int = 2 << 30
    file_size_bytes: int = 16 << 20
    max_processes: int = 16

    @property
    def cpu_s(self) -> int:
        return int(self.timeout_s) + 1


@dataclass
class Outcome:
    """How one program ended: `status` is "passed", "failed: <reason>" or "timed out",
    the same vocabulary as HumanEval-style harnesses."""

    status: str
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Isolation:
    """What this machine allows; probed once."""

    private_network: bool
    private_uid: bool

    def describe(self) -> str:
        net = "private network and PID namespaces" if self.private_network else "audit-hook socket guard only"
        uid = "unprivileged per-run uid" if self.private_uid else "same uid as the caller"
        return f"{net}; {uid}"


def _probe(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=_MINIMAL_ENV).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=8)
def isolation(python: str = sys.executable) -> Isolation:
    """Probe `unshare --net` and `setpriv` (both need root). The uid probe starts the real
    interpreter as a fresh uid: an interpreter installed under a private home directory
    cannot be run by another uid, and then the sandbox keeps the caller's uid."""
    if os.geteuid() != 0:
        return Isolation(False, False)
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    net = bool(unshare) and _probe([unshare, *_NAMESPACES, "true"])
    uid = bool(setpriv) and _probe(_drop_privileges(setpriv, _random_uid()) + [python, "-I", "-c", "import encodings, json, resource"])
    return Isolation(net, uid)


_NAMESPACES = ("--net", "--pid", "--fork", "--kill-child", "--")


def _random_uid() -> int:
    # A uid no account uses, so RLIMIT_NPROC and the cleanup sweep see only this run.
    return random.randint(3_000_000, 3_999_999)


def _drop_privileges(setpriv: str, uid: int) -> list[str]:
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        # Zombies are already dead; counting them would keep the sweep spinning.
        if fields.get("State", "").strip().startswith("Z"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            pids.append(int(entry))
    return pids


def _kill_uid(uid: int) -> None:
    """Kill every process of `uid` until none is left (a fork bomb keeps spawning while
    we kill, but RLIMIT_NPROC bounds how many there can be)."""
    for _ in range(200):
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _caller_process_budget(limits: Limits) -> int:
    """Without a private uid, RLIMIT_NPROC counts every process of the caller's uid, so
    the cap is what the caller already runs plus the sandbox's allowance."""
    threads = 0
    uid = os.getuid()
    for pid in _processes_of(uid):
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                threads += next((int(l.split()[1]) for l in fh if l.startswith("Threads:")), 1)
        except OSError:
            continue
    return threads + limits.max_processes


def execute(code: str, limits: Limits = Limits(), python: str | None = None) -> Outcome:
    """Run `code` as a program and report whether it finished without an exception.
    `python` is the interpreter (default: this one), e.g. an environment with the library
    versions a benchmark was written for."""
    python = python or sys.executable
    iso = isolation(python)
    uid = _random_uid() if iso.private_uid else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asyncbench-sandbox-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "program.py").write_text(code, encoding="utf-8")
        if uid is not None:
            os.chmod(tmp, 0o711)
            os.chown(work, uid, uid)
            os.chown(work / "program.py", uid, uid)
            os.chmod(work, 0o700)
        if uid is not None or os.geteuid() == 0:
            nproc = limits.max_processes if uid is not None else None  # root ignores RLIMIT_NPROC
        else:
            nproc = _caller_process_budget(limits)
        cfg = {
            "cpu_s": limits.cpu_s,
            "memory_bytes": limits.memory_bytes,
            "file_size_bytes": limits.file_size_bytes,
            "nproc": nproc,
            "blocked_events": list(BLOCKED_EVENTS),
            "mark": _MARK,
        }
        cmd: list[str] = []
        if iso.private_network:
            cmd += [shutil.which("unshare") or "unshare", *_NAMESPACES]
        if uid is not None:
            cmd += _drop_privileges(shutil.which("setpriv") or "setpriv", uid)
        cmd += [python, "-I", "-c", _BOOTSTRAP, json.dumps(cfg)]
        env = dict(_MINIMAL_ENV, HOME=str(work), TMPDIR=str(work))
        with open(Path(tmp) / "result", "w+b") as out:
            proc = subprocess.Popen(
                cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True, close_fds=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _cleanup(proc, uid)
            out.seek(0)
            text = out.read(64 * 1024).decode("utf-8", errors="replace")
    duration = time.monotonic() - started
    if timed_out:
        return Outcome("timed out", duration)
    return Outcome(_verdict(text, proc.returncode), duration)


def _cleanup(proc: subprocess.Popen, uid: int | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if uid is not None:
        _kill_uid(uid)


def _verdict(text: str, returncode: int) -> str:
    for line in text.splitlines():
        if line.startswith(_MARK):
            return str(json.loads(line[len(_MARK):]))
    # A signal death shows as -N, or as 128 + N through unshare --fork.
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if signum in {s.value for s in signal.Signals}:
        name = signal.Signals(signum).name
        return "timed out (CPU limit)" if name == "SIGXCPU" else f"failed: killed by {name}"
    tail = text.strip().splitlines()[-1:] or ["no result"]
    return f"failed: exited with status {returncode} ({tail[0][:200]})"


async def execute_many(codes: Sequence[str], limits: Limits = Limits(), workers: int = 2,
                       python: str | None = None) -> list[Outcome]:
    """Run programs in parallel with at most `workers` at once; identical programs run
    once (pass@1 of the 4k and 16k PrivateEval files shares many programs)."""
    import anyio

    limiter = anyio.CapacityLimiter(max(1, workers))
    unique = list(dict.fromkeys(codes))
    results: dict[str, Outcome] = {}

    async def one(code: str) -> None:
        results[code] = await anyio.to_thread.run_sync(execute, code, limits, python, limiter=limiter)

    async with anyio.create_task_group() as tg:
        for code in unique:
            tg.start_soon(one, code)
    return [results[code] for code in codes]
