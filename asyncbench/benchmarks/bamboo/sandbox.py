"""Run model-written code so that it can neither harm anything nor forge its verdict.

Two processes per sample, and only plain data between them:

- The **sandbox** runs the model's module (prompt + completion) in a fresh `python -I`
  under the isolation below, then answers requests for module-level values and for calls
  of its functions, each value encoded by `sandbox_wire` (JSON, `.npy` without pickle,
  Arrow IPC). It never sees the test.
- The **checker** runs the prompt's set-up code itself (the complete statements before
  the completion: the test's inputs), then takes from the sandbox only
  the names the reference solution binds or changes (`split_prompt`), never the inputs,
  and runs the benchmark's test: `check()` reads those names, `check(candidate)` gets a
  proxy that sends the arguments to the sandbox and returns the decoded result. The
  verdict is the checker's alone, reported on its stdout behind a nonce it read from its
  stdin, after making itself non-dumpable. The set-up and the test are the dataset's
  code (fetched from a hub), so the checker runs inside the same isolation as the
  program, as the same uid, and starts the program itself: non-dumpable, the program can
  neither read its memory nor its descriptors, only kill it (a failed sample).

So writing a result marker, scanning file descriptors, walking frames, exiting early,
hooks, patched builtins, always-equal objects, rebinding the test's inputs or answering
with names nobody asked for can at most make the sample fail.

Isolation (`isolation()`, probed once per interpreter by running a real program through
the mode as the sandbox's uid; recorded in run.json). `ASYNCBENCH_SANDBOX_MODE=bwrap` or
`mountns` forces one mode (tests use it to run both on one machine):

- `bwrap` (bubblewrap, as any user): new user, PID, network, IPC, UTS and mount
  namespaces, a fresh `/proc`, only the interpreter and system libraries mounted
  read-only, size-bounded tmpfs for the working directory, /tmp and /dev/shm,
  `--die-with-parent`, `--new-session`, no capabilities (as root, inside an outer PID
  namespace so a fork bomb dies with it);
- `mountns` (root without bwrap, `sandbox_root.py`): new mount, PID, network, IPC and UTS
  namespaces, a fresh read-only root with only the interpreter, its libraries and the
  working directory, private size- and inode-bounded /tmp, /dev/shm and working
  directory, a fresh `/proc`, an unprivileged per-run uid without capabilities;
- `none`: only resource limits and an audit hook, which model code can switch off. A
  scorer refuses to run then unless `allow_unsafe=True` (`--allow-unsafe-sandbox`).

Limits in every mode: the program's CPU time after its imports (`Limits.cpu_s`, the
RLIMIT_CPU set once the prompt's imports are loaded, so a loaded machine does not change
verdicts), a generous wall-clock cap, memory, file size, process count, an empty
environment; the checker's own memory and the length of an answer line are bounded, and
no process survives its sample (PID namespaces; without them the checker is a child
subreaper and kills what its sandbox left).

One sample, one budget: rlimits are per process, so a program forking through libc had
2 GiB in each of 16 processes and a CPU limit per child. Where a cgroup can be made
(`sandbox_cgroup.py`) the checker, the program and all they start run in the sample's
own, whose memory limit (kernel socket buffers included) and task count hold for them
together. The CPU limit is summed in every mode: the checker, their subreaper, reaps
every process of the sample before it says "passed", and a sum of their CPU time
(RUSAGE_CHILDREN) over the program's budget is "timed out". Without a cgroup the
program may not fork or start a thread (RLIMIT_NPROC 0; root is exempt, so as root bwrap
then runs as a per-run uid by util-linux's setpriv) and holds at most NO_CGROUP_FILES
descriptors, which bound its socket buffers.
"""

from __future__ import annotations

import functools
import json
import os
import random
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...errors import UserError
from .sandbox_cgroup import JOIN, Cgroups, SampleCgroup, available
from .sandbox_split import imported_modules, split_prompt, trusted_imports

_HERE = Path(__file__).parent
_WIRE_SOURCE = (_HERE / "sandbox_wire.py").read_text(encoding="utf-8")
_ROOT_SOURCE = (_HERE / "sandbox_root.py").read_text(encoding="utf-8")
# Inputs a prompt draws at random (np.random.randn) are the same on both sides.
SEED = 0

# The untrusted side: limits, the prompt's imports (before the CPU clock starts), then
# the model's module, then a loop answering the checker's requests with encoded values.
# Passed with -c: it imports nothing of ours. "ready" comes before any model code runs,
# so a failure before it is the sandbox's, never the program's.
_SANDBOX = r"""
import json, math, os, resource, sys
cfg = json.loads(sys.argv[1])
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the checker dies
except Exception:
    pass
try:  # the sample's cgroup runs out of memory: the kernel kills the program, not its checker
    with open("/proc/self/oom_score_adj", "w") as fh:
        fh.write("1000")
except OSError:
    pass
def _limit(name, soft, hard=None):
    resource.setrlimit(getattr(resource, name), (soft, soft if hard is None else hard))
_limit("RLIMIT_CORE", 0)
_limit("RLIMIT_AS", cfg["memory_bytes"])
_limit("RLIMIT_FSIZE", cfg["file_size_bytes"])
if cfg["nproc"]:
    _limit("RLIMIT_NPROC", cfg["nproc"])
wire = {}
exec(compile(cfg["wire"], "sandbox_wire.py", "exec"), wire)
with open("program.py", encoding="utf-8") as fh:
    source = fh.read()
inbox = os.fdopen(os.dup(0), "r", encoding="utf-8")
outbox = os.fdopen(os.dup(1), "w", encoding="utf-8")
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
def send(obj):
    outbox.write(json.dumps(obj) + "\n")
    outbox.flush()
try:
    exec(compile(cfg["preload"], "imports.py", "exec"), {})
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] in cfg["provided"]:  # the environment promised it
        send({"error": "cannot import the prompt's modules: ModuleNotFoundError: " + str(exc)[:400]})
        raise SystemExit(0)
    # a module this environment does not have: the program fails when it imports it
except BaseException as exc:
    send({"error": ("cannot import the prompt's modules: " + type(exc).__name__ + ": " + str(exc))[:500]})
    raise SystemExit(0)
import random
random.seed(cfg["seed"])
if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed(cfg["seed"])
used = resource.getrusage(resource.RUSAGE_SELF)
cpu = math.ceil(used.ru_utime + used.ru_stime + cfg["cpu_s"])
_limit("RLIMIT_CPU", cpu, cpu + 1)
if cfg["nproc"] == 0:  # no cgroup: no process or thread more, so per-process limits are the sample's
    _limit("RLIMIT_NPROC", 0)
_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
_limit("RLIMIT_NOFILE", cfg["nofile"] if _files < 0 else min(cfg["nofile"], _files))
_BLOCKED = frozenset(cfg["blocked_events"])
def _guard(event, args):
    if event in _BLOCKED:
        raise PermissionError("sandbox: " + event + " is not allowed")
sys.addaudithook(_guard)
send({"ready": True, "cpu": cpu})
module = {}
try:
    exec(compile(source, "program.py", "exec"), module)
    send({"loaded": "ok"})
except BaseException as exc:
    send({"loaded": ("failed: " + type(exc).__name__ + ": " + str(exc))[:500]})
def value_of(name):
    if name not in module:
        return {"t": "missing"}
    value = module[name]
    if callable(value) and not isinstance(value, type(module)):
        return {"t": "callable"}
    try:
        return wire["encode"](value)
    except BaseException as exc:
        return {"t": "unencodable", "why": str(exc)[:200]}
for line in inbox:
    try:
        req = json.loads(line)
        if req["op"] == "get":
            send({"values": {n: value_of(n) for n in req["names"]}})
        else:
            fn = module[req["target"]]
            result = fn(*wire["decode"](req["args"]), **wire["decode"](req["kwargs"]))
            send({"value": wire["encode"](result)})
    except BaseException as exc:
        send({"raised": type(exc).__name__, "message": str(exc)[:300]})
"""

# The checker: runs the prompt's set-up and the benchmark's test (the dataset's code, so
# inside the sandbox too, as the sandbox's uid) against the values it asked the program
# for. Non-dumpable before the program exists, so the program (same uid) cannot read its
# memory or descriptors: the nonce and the verdict's pipe stay its own. A child
# subreaper, so what the program leaves behind becomes its child and is killed with it;
# reaping them all sums their CPU time (RUSAGE_CHILDREN), the sample's CPU budget.
_CHECKER = r"""
import ctypes, json, os, resource, subprocess, sys, threading
libc = ctypes.CDLL(None)
libc.prctl(4, 0)  # PR_SET_DUMPABLE 0: no same-uid process can read our fds or memory
libc.prctl(1, 9)  # PR_SET_PDEATHSIG
libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
cfg = json.loads(sys.stdin.readline())
resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
report = os.dup(1)
os.write(report, (cfg["nonce"] + "started\n").encode())
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
wire = {}
exec(compile(cfg["wire"], "sandbox_wire.py", "exec"), wire)
class SandboxGone(Exception):
    pass
state = {"ready": False, "cpu": None}
done = threading.Lock()
def wall_cap():
    if state["ready"]:
        finish("timed out: the wall-clock cap of " + str(cfg["wall_s"]) + " s")
    finish("error: the sandbox did not start within " + str(cfg["wall_s"]) + " s")
timer = threading.Timer(cfg["wall_s"], wall_cap)
timer.daemon = True
timer.start()
proc = subprocess.Popen(cfg["sandbox_cmd"], cwd=cfg["cwd"], env=cfg["env"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True, text=True)
if cfg["checker_nproc"]:  # no cgroup: the test's code starts few processes (its libraries' threads count)
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["checker_nproc"], cfg["checker_nproc"]))
def sweep():
    # kill our descendants until none is left: the sandbox and what it orphaned
    me = str(os.getpid())
    for _ in range(200):
        kids = []
        for entry in os.listdir("/proc"):
            try:
                with open("/proc/" + entry + "/stat") as fh:
                    if entry.isdigit() and fh.read().rsplit(")", 1)[1].split()[1] == me:
                        kids.append(int(entry))
            except (OSError, IndexError):
                pass
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
def finish(result):
    done.acquire()
    sweep()
    if result == "passed":  # every process of the program is reaped now: their CPU time, summed
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        if state["cpu"] is None or used.ru_utime + used.ru_stime > state["cpu"]:
            result = ("timed out: the CPU limit of " + str(cfg["cpu_s"]) + " s (" +
                      format(used.ru_utime + used.ru_stime, ".1f") + " CPU-s in all its processes)")
    os.write(report, (cfg["nonce"] + json.dumps(result) + "\n").encode())
    os._exit(0)
def gone():
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        rc = None
    if not state["ready"]:
        os.set_blocking(proc.stderr.fileno(), False)
        why = (proc.stderr.read(2000) or "").strip().splitlines()
        return SandboxGone("error: the sandbox did not start (status " + str(rc) + ")" + (": " + why[-1] if why else ""))
    if rc in (-24, 152):
        return SandboxGone("timed out: the CPU limit of " + str(cfg["cpu_s"]) + " s")
    if rc in (-9, 137):
        return SandboxGone("timed out: the CPU limit of " + str(cfg["cpu_s"]) + " s, or killed at the sample's memory limit")
    return SandboxGone("failed: the program's process ended without answering")
def receive():
    line = proc.stdout.readline(cfg["max_line"])
    if not line:
        raise gone()
    if not line.endswith("\n"):
        raise SandboxGone("failed: an answer longer than " + str(cfg["max_line"]) + " characters")
    return json.loads(line)
def ask(req):
    try:
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
    except OSError:
        raise gone() from None
    return receive()
class Candidate:
    def __init__(self, name):
        self.name = name
    def __call__(self, *args, **kwargs):
        reply = ask({"op": "call", "target": self.name, "args": wire["encode"](list(args)),
                     "kwargs": wire["encode"](kwargs)})
        if "raised" in reply:
            cls = getattr(__builtins__, str(reply["raised"]), None)
            if not (isinstance(cls, type) and issubclass(cls, Exception)):
                cls = RuntimeError
            raise cls(reply.get("message", ""))
        return wire["decode"](reply["value"])
def verdict():
    first = receive()
    if "ready" not in first:
        return "error: " + str(first.get("error", "the sandbox did not start"))[:500]
    state["ready"] = True
    state["cpu"] = first.get("cpu")
    loaded = receive().get("loaded")
    if loaded != "ok":
        return str(loaded)[:500] if str(loaded).startswith("failed: ") else "failed: no module"
    if not cfg["test"]:
        return "passed"
    import random
    ns = {}
    exec(compile(cfg["imports"], "imports.py", "exec"), ns)
    random.seed(cfg["seed"])
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(cfg["seed"])
    exec(compile(cfg["setup"], "prompt.py", "exec"), ns)
    values = ask({"op": "get", "names": cfg["outputs"]}).get("values")
    if not isinstance(values, dict):
        return "failed: a malformed answer"
    for name in cfg["outputs"]:  # only the names asked for; the inputs stay the set-up's
        if name not in values:
            continue
        data = values[name]
        tag = data.get("t") if isinstance(data, dict) else None
        if tag == "missing":
            continue
        if tag == "unencodable":
            return "failed: " + name + " cannot be compared safely (" + str(data.get("why")) + ")"
        ns[name] = Candidate(name) if tag == "callable" else wire["decode"](data)
    exec(compile(cfg["test"], "test.py", "exec"), ns)
    if cfg["entry"]:
        ns["check"](Candidate(cfg["entry"]))
    else:
        ns["check"]()
    return "passed"
try:
    result = verdict()
except SandboxGone as exc:
    result = str(exc)
except BaseException as exc:
    result = ("failed: " + type(exc).__name__ + ": " + str(exc))[:500]
finish(result)
"""

# Audit events refused inside the sandbox: a first line that makes common hostile code
# fail with an exception. Model code can remove the hook; the isolation is what holds.
BLOCKED_EVENTS: tuple[str, ...] = (
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.kill", "os.killpg",
    "subprocess.Popen", "pty.spawn",
)

_MINIMAL_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # BLAS thread pools would count against the process limit and the CPU budget.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# Where the sample's working directory appears inside bwrap and mountns.
SANDBOX_DIR = "/asyncbench-sandbox"
MODE_ENV = "ASYNCBENCH_SANDBOX_MODE"
Mode = Literal["bwrap", "mountns", "none"]  # how a program is isolated (Isolation)
MODES: tuple[Mode, ...] = ("bwrap", "mountns")
_SETPRIV = shutil.which("setpriv") or ""
NO_CGROUPS = Cgroups("")
# Tasks of the sandbox's own in a sample's cgroup besides the program's max_processes:
# unshare, bwrap's two or sandbox_root, the checker and its timer thread, slack for a
# library's thread in the checker.
HARNESS_TASKS = 8
# The checker's tasks (main and timer threads), which share the program's uid in mountns.
CHECKER_TASKS = 2
# Without a cgroup: descriptors the program may hold. A socket's queued bytes are kernel
# memory no rlimit counts (up to 2 x net.core.wmem_max, 8 MiB by default, per socket), so
# the descriptors are what bound them (bench/privateeval_isolation.md).
NO_CGROUP_FILES = 16


@dataclass(frozen=True)
class Limits:
    """Per-program limits. `cpu_s` is CPU time of the program after the prompt's imports
    (the release's 3 s was meant for the program, not for `import pandas` on a loaded
    host); `wall_s` caps everything, start-up included (default: the larger of 30 s and
    ten times `cpu_s`). Each tmpfs (working directory, /tmp, /dev/shm) holds at most
    `tmpfs_bytes` and, in mountns, `max_files` files; the checker's own memory and the
    length of one answer line are bounded too."""

    cpu_s: float = 10.0
    wall_s: float | None = None
    memory_bytes: int = 2 << 30
    file_size_bytes: int = 16 << 20
    max_processes: int = 16
    tmpfs_bytes: int = 64 << 20
    max_files: int = 4096
    checker_memory_bytes: int = 4 << 30
    max_answer_chars: int = 64 << 20
    open_files: int = 1024

    @property
    def wall_cap_s(self) -> float:
        return self.wall_s if self.wall_s is not None else max(30.0, 10 * self.cpu_s)


@dataclass
class ProgramVerdict:
    """How one sample ended: "passed", "failed: <reason>" or "timed out: <limit>" are the
    program's doing; "error: <reason>" is the sandbox's (it did not start, or the
    interpreter cannot import the prompt's modules), which must fail the sample, never
    score it."""

    status: str
    duration_s: float
    peak_bytes: int | None = None  # the sample cgroup's peak memory, kernel memory included

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def error(self) -> bool:
        return self.status.startswith("error: ")


@dataclass(frozen=True)
class Isolation:
    """What this machine allows for `python`; probed once. `why` says, for `none`, what
    the stronger modes lacked."""

    mode: Mode
    binds: tuple[str, ...] = ()  # the read-only paths the interpreter needs
    why: str = ""
    cgroups: Cgroups = NO_CGROUPS  # where each sample's cgroup is made ("" version: nowhere)

    @property
    def safe(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if self.mode == "bwrap":
            text = "bwrap: user, PID, network, IPC and mount namespaces; read-only interpreter; bounded private tmpfs"
        elif self.mode == "mountns":
            text = ("mountns: mount, PID, network, IPC and UTS namespaces; a fresh read-only root with the interpreter; "
                    "bounded private tmpfs; unprivileged per-run uid")
        else:
            text = "none: resource limits and an audit hook only (unsafe)"
        if self.cgroups.version:
            return f"{text}; a cgroup {self.cgroups.version} per sample (memory and tasks of all its processes)"
        return f"{text}; no cgroup: no fork in a sample"

    def limits_note(self) -> str:
        """One line on the limits that do not hold for a sample as a whole here ("" when
        they all do): said before a run pays for anything."""
        if self.cgroups.version:
            return ""
        note = (f"PrivateEval: no cgroup can be made here ({self.cgroups.why}); samples run with no fork at all "
                f"(RLIMIT_NPROC=0, RLIMIT_NOFILE={NO_CGROUP_FILES}), so per-process limits are the sample's")
        if os.geteuid() == 0 and (self.mode == "none" or (self.mode == "bwrap" and not _SETPRIV)):
            note += "; but root is exempt from RLIMIT_NPROC: a sample's processes are bounded by its wall-clock cap only"
        return note


class SandboxUnavailable(UserError):
    """No real isolation here, and the caller did not accept running without it; or the
    sandbox cannot import what the programs need."""


def _interpreter_paths(python: str) -> tuple[str, ...]:
    """Directories the interpreter reads: its prefixes and the system library paths."""
    done = subprocess.run([python, "-I", "-c", "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, "
                           "sys.exec_prefix, sys.base_exec_prefix]))"], capture_output=True, text=True, timeout=30,
                          env=_MINIMAL_ENV)
    prefixes = json.loads(done.stdout) if done.returncode == 0 else []
    paths = {os.path.realpath(p) for p in prefixes} | {p for p in prefixes}
    paths.add(os.path.dirname(os.path.realpath(python)))
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives",
                   "/etc/ssl", "/etc/localtime"):
        if os.path.lexists(system):
            paths.add(system)
    # a parent listed after its child would hide the child's mount: shortest first
    return tuple(sorted(paths, key=len))


def _bwrap_prefix(binds: tuple[str, ...], work: str, limits: Limits, uid: int | None = None) -> list[str]:
    """bwrap's command line; as `uid` (from root, by setpriv) when given."""
    cmd = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]
    # the private /tmp and /dev/shm first, the interpreter's binds over them: a checkout
    # (its venv) under /tmp stays visible inside (its tests once all skipped there)
    size = str(limits.tmpfs_bytes)
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"]
    for path in binds:
        cmd += ["--ro-bind", path, path]
    cmd += ["--size", size, "--tmpfs", SANDBOX_DIR, "--ro-bind", f"{work}/program.py", f"{SANDBOX_DIR}/program.py",
            "--chdir", SANDBOX_DIR, "--remount-ro", "/", "--clearenv"]
    for key, value in {**_MINIMAL_ENV, "HOME": SANDBOX_DIR, "TMPDIR": "/tmp"}.items():
        cmd += ["--setenv", key, value]
    if uid is not None:
        cmd = [_SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *cmd]
    if os.geteuid() == 0:
        # As root, bwrap's own PID namespace does not take a fork bomb down with it (root
        # is exempt from RLIMIT_NPROC); an outer `unshare --pid --kill-child` does: when
        # it dies, the kernel kills the whole namespace.
        cmd = [shutil.which("unshare") or "unshare", "--pid", "--kill-child", "--", *cmd]
    return [*cmd, "--"]


def _mountns_cmd(binds: tuple[str, ...], tmp: str, uid: int, argv: list[str], limits: Limits) -> list[str]:
    """`unshare` into new namespaces, then sandbox_root.py builds the fresh root and
    starts `argv` as `uid` (see that module)."""
    cfg = {"root": f"{tmp}/root", "binds": list(binds), "work": SANDBOX_DIR, "program": f"{tmp}/work/program.py",
           "uid": uid, "tmpfs_bytes": limits.tmpfs_bytes, "max_files": limits.max_files, "argv": argv,
           "env": dict(_MINIMAL_ENV, HOME=SANDBOX_DIR, TMPDIR="/tmp")}
    return [shutil.which("unshare") or "unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--kill-child",
            "--", sys.executable, "-I", "-c", _ROOT_SOURCE, json.dumps(cfg)]


def _candidates() -> tuple[list[Mode], str]:
    """Modes to try, strongest first, and why the others are out."""
    forced = os.environ.get(MODE_ENV, "").strip()
    if forced:
        for mode in MODES:
            if forced == mode:
                return [mode], ""
        raise UserError(f"{MODE_ENV}={forced!r} is not a sandbox mode; use one of {', '.join(MODES)} (or unset it)")
    modes: list[Mode] = ["bwrap"] if shutil.which("bwrap") else []
    if os.geteuid() == 0 and shutil.which("unshare"):
        modes.append("mountns")
    return modes, "" if modes else "bubblewrap (bwrap) is not installed and this is not root"


@functools.lru_cache(maxsize=8)
def isolation(python: str = sys.executable) -> Isolation:
    """The strongest isolation that works here for `python`: each mode is probed by
    running a program through it (see the module docstring)."""
    modes, why = _candidates()
    reasons = [why] if why else []
    binds = _interpreter_paths(python)
    cgroups = available()
    for mode in modes:
        iso = Isolation(mode, binds, cgroups=cgroups)
        out = _run(iso, python, "import encodings, json, resource", "", None, "", (), "", Limits(cpu_s=5.0))
        if out.passed:
            return iso
        reasons.append(f"{mode}: {out.status}")
    return Isolation("none", binds, "; ".join(reasons), cgroups)


@functools.lru_cache(maxsize=8)
def _imports_ok(iso: Isolation, python: str, imports: str) -> str:
    out = _run(iso, python, imports, "", None, "", (), "", Limits(cpu_s=30.0))
    return "" if out.passed else out.status


def require_isolation(python: str, allow_unsafe: bool, imports: str = "") -> Isolation:
    """The isolation model-written code will run under; SandboxUnavailable (one line,
    before anything is paid for) when there is none and the caller did not accept that,
    or when `imports` (what the programs import) fails in the sandbox as its uid."""
    iso = isolation(python)
    if not iso.safe and not allow_unsafe:
        raise SandboxUnavailable(f"no sandbox here for model-written code ({iso.why}): install bubblewrap (bwrap) or "
                                 "run as root (a mount namespace), or pass --allow-unsafe-sandbox to run it unisolated")
    if imports:
        failed = _imports_ok(iso, python, imports)
        if failed:
            raise SandboxUnavailable(f"the sandbox ({iso.mode}) cannot run {imports!r} with {python}: "
                                     f"{failed.split(': ', 1)[-1]}; give every user read access to that "
                                     "interpreter's environment, or pass --sandbox-python PATH")
    return iso


def _bwrap_uid(cgroups: Cgroups) -> bool:
    """As root with no cgroup, bwrap runs as a per-run uid (setpriv): root is exempt from
    RLIMIT_NPROC, which then is what bars a sample's forks."""
    return os.geteuid() == 0 and not cgroups.version and bool(_SETPRIV)


def _random_uid() -> int:
    # A uid no account uses, so RLIMIT_NPROC and the cleanup sweep see only this run.
    return random.randint(3_000_000, 3_999_999)


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
    """Kill every process of `uid` until none is left (the PID namespace's end kills them
    too, asynchronously; this waits for it)."""
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
    """RLIMIT_NPROC counts every process of the real uid, so the cap is what that uid
    already runs plus the sandbox's allowance."""
    threads = 0
    for pid in _processes_of(os.getuid()):
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                threads += next((int(line.split()[1]) for line in fh if line.startswith("Threads:")), 1)
        except OSError:
            continue
    return threads + limits.max_processes


@dataclass(frozen=True)
class Program:
    """One sample to check: the model's module (prompt + completion), the benchmark's
    test and entry point, and from the trusted side the prompt's set-up and the names to
    take from the sandbox (`program()` derives both)."""

    module: str
    test: str = ""
    entry_point: str | None = None
    setup: str = ""
    outputs: tuple[str, ...] = ()


def program(prompt: str, completion: str, test: str, entry_point: str | None, reference: str) -> Program:
    """The release's program (prompt + completion, run as one module) with what the
    checker needs: the set-up and outputs of `split_prompt(prompt, reference)`."""
    setup, outputs = split_prompt(prompt, reference)
    return Program(f"{prompt}{completion}\n", test, entry_point, setup, outputs)


def check(module: str, test: str = "", entry_point: str | None = None, setup: str = "",
          outputs: Sequence[str] = (), limits: Limits = Limits(), python: str | None = None,
          allow_unsafe: bool = False) -> ProgramVerdict:
    """Run `module` (model-written code) in the sandbox and `test` (the benchmark's
    `check` function; `check(entry_point)` when one is named, else `check()`) in the
    checker, after the checker ran `setup` and took `outputs` from the sandbox. Without a
    test, the verdict is whether the module ran to its end (used by the containment
    tests; that one is the sandbox's word, so never a score)."""
    python = python or sys.executable
    iso = require_isolation(python, allow_unsafe)
    return _run(iso, python, module, test, entry_point, setup, tuple(outputs), trusted_imports(setup), limits)


def _run(iso: Isolation, python: str, module: str, test: str, entry_point: str | None, setup: str,
         outputs: tuple[str, ...], imports: str, limits: Limits, provided: frozenset[str] = frozenset()) -> ProgramVerdict:
    """One sample; `provided` are the modules the interpreter promises (a failure to
    import one of them is the sandbox's error, not the program's). The checker and the
    program both run inside the isolation, in the sample's cgroup where there is one."""
    uid = _random_uid() if iso.mode == "mountns" or (iso.mode == "bwrap" and _bwrap_uid(iso.cgroups)) else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asyncbench-sandbox-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "program.py").write_text(module, encoding="utf-8")
        cgroup = iso.cgroups.version != ""
        # mountns: a fresh uid, shared with the checker's tasks only; else RLIMIT_NPROC counts the caller's
        nproc = (limits.max_processes + CHECKER_TASKS if uid is not None else _caller_process_budget(limits)) \
            if cgroup else 0
        cfg = {"cpu_s": limits.cpu_s, "memory_bytes": limits.memory_bytes, "file_size_bytes": limits.file_size_bytes,
               "nproc": nproc, "nofile": limits.open_files if cgroup else NO_CGROUP_FILES,
               "blocked_events": list(BLOCKED_EVENTS), "wire": _WIRE_SOURCE, "preload": imports, "seed": SEED,
               "provided": sorted(provided)}
        inside = iso.mode in MODES
        cwd = SANDBOX_DIR if inside else str(work)
        checker = [python, "-I", "-c", _CHECKER]
        if iso.mode == "bwrap":
            if uid is not None:  # bwrap binds the program as that uid
                for path, mode in ((tmp, 0o711), (work, 0o711), (work / "program.py", 0o644)):
                    os.chmod(path, mode)
            argv = [*_bwrap_prefix(iso.binds, str(work), limits, uid), *checker]
        elif iso.mode == "mountns" and uid is not None:
            (Path(tmp) / "root").mkdir()
            argv = _mountns_cmd(iso.binds, tmp, uid, checker, limits)
        else:
            argv = checker
        nonce = secrets.token_hex(16)
        job = {"nonce": nonce, "wire": _WIRE_SOURCE, "test": test, "entry": entry_point, "imports": imports,
               "setup": setup, "outputs": list(outputs), "seed": SEED, "cwd": cwd,
               "env": dict(_MINIMAL_ENV, HOME=cwd, TMPDIR="/tmp" if inside else str(work)),
               "sandbox_cmd": [python, "-I", "-c", _SANDBOX, json.dumps(cfg)],
               # without a cgroup: the uid's tasks the checker may reach (the program's own limit is 0)
               "checker_nproc": None if cgroup else
               limits.max_processes + CHECKER_TASKS + 1 if uid is not None else _caller_process_budget(limits),
               "wall_s": limits.wall_cap_s, "cpu_s": limits.cpu_s, "memory_bytes": limits.checker_memory_bytes,
               "max_line": limits.max_answer_chars}
        try:
            group = SampleCgroup(iso.cgroups, limits.memory_bytes, limits.max_processes + HARNESS_TASKS) \
                if cgroup else None
        except OSError as exc:
            return ProgramVerdict(f"error: cannot make the sample's cgroup: {exc}", time.monotonic() - started)
        peak = None
        try:
            if group is not None:
                argv = ["/bin/sh", "-c", JOIN, "sh", *group.procs, "--", *argv]
            status = _exchange(argv, tmp, json.dumps(job).encode() + b"\n", nonce, limits.wall_cap_s + 15, uid)
        finally:
            if group is not None:
                peak = group.peak_bytes()
                group.close()
    return ProgramVerdict(status, time.monotonic() - started, peak)


def _exchange(argv: list[str], cwd: str, job: bytes, nonce: str, timeout_s: float, uid: int | None) -> str:
    """Start the sandboxed checker, hand it its job and read its verdict; at most
    `timeout_s` (the checker keeps the wall-clock cap itself: this is the backstop, for
    a checker the program stopped) and a bounded amount of output."""
    proc = subprocess.Popen(argv, cwd=cwd, env=_MINIMAL_ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
    try:
        out, err, finished = _read_bounded(proc, job, timeout_s)
        if not finished:
            return f"timed out: the checker did not answer within {timeout_s:g} s"
        proc.wait()
        return _verdict(out.decode("utf-8", "replace"), nonce, proc.returncode, err.decode("utf-8", "replace"))
    finally:
        _cleanup(proc, uid)


def _read_bounded(proc: subprocess.Popen[bytes], job: bytes, timeout_s: float,
                  cap: int = 1 << 20) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr, whether both ended) of `proc` after writing `job` to its stdin:
    what lies past `cap` bytes of either is dropped, and reading stops at `timeout_s`."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(job)
        proc.stdin.close()
    except OSError:
        pass
    deadline = time.monotonic() + timeout_s
    chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    sizes = dict.fromkeys(chunks, 0)
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", b"", False
            for key, _ in sel.select(left):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fd)
                elif sizes[key.fd] < cap:
                    chunks[key.fd].append(data)
                    sizes[key.fd] += len(data)
    return b"".join(chunks[proc.stdout.fileno()]), b"".join(chunks[proc.stderr.fileno()]), True


def execute(code: str, limits: Limits = Limits(), python: str | None = None, allow_unsafe: bool = False) -> ProgramVerdict:
    """Run a whole program in the sandbox: "passed" when it ran to its end."""
    return check(code, limits=limits, python=python, allow_unsafe=allow_unsafe)


def _cleanup(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if uid is not None:
        _kill_uid(uid)


def _verdict(text: str, nonce: str, returncode: int, stderr: str = "") -> str:
    lines = [line[len(nonce):] for line in text.splitlines() if line.startswith(nonce)]
    if not lines:  # the sandbox or the interpreter cannot even run the checker: not the program's doing
        why = stderr.strip().splitlines()
        return f"error: the checker did not start (status {returncode})" + (f": {why[-1][:300]}" if why else "")
    if len(lines) > 1:
        return str(json.loads(lines[1]))
    # Only the program can plausibly have taken a started checker down: never an error for it.
    return f"failed: the checker ended without a verdict (status {returncode})"


async def check_many(programs: Sequence[Program], limits: Limits = Limits(), workers: int = 2,
                     python: str | None = None, allow_unsafe: bool = False, imports: str = "") -> list[ProgramVerdict]:
    """Check samples in parallel with at most `workers` at once; identical samples run
    once (pass@1 of the 4k and 16k PrivateEval files shares many programs). `imports`,
    what the programs need, is tried once in the sandbox before any of them."""
    import anyio

    python = python or sys.executable
    iso = require_isolation(python, allow_unsafe, imports)  # once, before any sample
    provided = frozenset(imported_modules(imports))
    limiter = anyio.CapacityLimiter(max(1, workers))
    unique = list(dict.fromkeys(programs))
    results: dict[Program, ProgramVerdict] = {}

    async def one(p: Program) -> None:
        results[p] = await anyio.to_thread.run_sync(
            lambda: _run(iso, python, p.module, p.test, p.entry_point, p.setup, p.outputs, trusted_imports(p.setup),
                         limits, provided), limiter=limiter)

    async with anyio.create_task_group() as tg:
        for p in unique:
            tg.start_soon(one, p)
    return [results[p] for p in programs]


async def execute_many(codes: Sequence[str], limits: Limits = Limits(), workers: int = 2,
                       python: str | None = None, allow_unsafe: bool = False) -> list[ProgramVerdict]:
    """`execute` for many programs (see `check_many`)."""
    return await check_many([Program(c) for c in codes], limits, workers, python, allow_unsafe)
