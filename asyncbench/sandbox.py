"""Run model-written code so that it can neither harm anything nor forge its verdict.

Two processes per sample, and only plain data between them:

- The **sandbox** runs the model's module (prompt + completion) in a fresh `python -I`
  under the strongest isolation this machine offers (below), then answers requests for
  module-level values and for calls of its functions, each value encoded by
  `sandbox_wire` (JSON, `.npy` without pickle, Arrow IPC). It never sees the test.
- The **checker**, a trusted process, runs the benchmark's test: `check()` reads
  module-level names, which it fetched as values from the sandbox; `check(candidate)`
  gets a proxy that sends the arguments to the sandbox and returns the decoded result.
  The verdict is the checker's alone. It reports it to us on its stdout behind a nonce it
  read from its stdin, after making itself non-dumpable (so a same-uid sandbox cannot open
  its `/proc/PID/fd` or memory).

So writing a result marker, scanning file descriptors, walking frames, `os._exit`,
`sys.exit`, `atexit`, `sys.excepthook`, profile hooks or patched builtins in the model's
code can at most make its own process die or answer data; an object that is "equal to
everything" cannot be encoded and fails its sample.

Isolation of the sandbox, probed once (`isolation()`), recorded in run.json:

- `bwrap` (bubblewrap, as any user): new user, PID, network, IPC, UTS and mount
  namespaces, a fresh `/proc`, only the interpreter and system libraries mounted
  read-only, a private tmpfs and working directory, `--die-with-parent`,
  `--new-session`, no capabilities;
- `namespaces` (root without bwrap): private network and PID namespaces (`unshare`) and
  an unprivileged per-run uid (`setpriv`) when the interpreter is readable by one;
- `none`: only resource limits and an audit hook, which model code can switch off. A
  scorer refuses to run then unless `allow_unsafe=True` (`--allow-unsafe-sandbox`).

In every mode: CPU, memory, file-size and process-count limits set before the model's
code starts, an empty environment, a wall-clock timeout after which everything is killed,
and children that die with their parent.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

_WIRE_SOURCE = (Path(__file__).with_name("sandbox_wire.py")).read_text(encoding="utf-8")

# The untrusted side: limits, then the model's module, then a loop answering the
# checker's requests with encoded values. Passed with -c: it imports nothing of ours.
_SANDBOX = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the checker dies
except Exception:
    pass
def _limit(name, soft, hard=None):
    resource.setrlimit(getattr(resource, name), (soft, soft if hard is None else hard))
_limit("RLIMIT_CORE", 0)
_limit("RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1)
_limit("RLIMIT_AS", cfg["memory_bytes"])
_limit("RLIMIT_FSIZE", cfg["file_size_bytes"])
if cfg["nproc"] is not None:
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
_BLOCKED = frozenset(cfg["blocked_events"])
def _guard(event, args):
    if event in _BLOCKED:
        raise PermissionError("sandbox: " + event + " is not allowed")
sys.addaudithook(_guard)
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

# The trusted side: runs the benchmark's test against values from the sandbox.
_CHECKER = r"""
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None)
libc.prctl(4, 0)  # PR_SET_DUMPABLE 0: no same-uid process can read our fds or memory
libc.prctl(1, 9)  # PR_SET_PDEATHSIG
cfg = json.loads(sys.stdin.readline())
report = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
wire = {}
exec(compile(cfg["wire"], "sandbox_wire.py", "exec"), wire)
class SandboxGone(Exception):
    pass
proc = subprocess.Popen(cfg["sandbox_cmd"], cwd=cfg["cwd"], env=cfg["env"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True, text=True)
def receive():
    line = proc.stdout.readline()
    if not line:
        raise SandboxGone("the program's process ended without answering")
    return json.loads(line)
def ask(req):
    try:
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
    except OSError:
        raise SandboxGone("the program's process ended") from None
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
    loaded = receive().get("loaded")
    if loaded != "ok":
        return str(loaded)[:500] if str(loaded).startswith("failed: ") else "failed: no module"
    if not cfg["test"]:
        return "passed"
    ns = {}
    exec(cfg["imports"], ns)
    values = ask({"op": "get", "names": cfg["names"]}).get("values", {})
    for name, data in values.items():
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
except BaseException as exc:
    result = ("failed: " + type(exc).__name__ + ": " + str(exc))[:500]
os.write(report, (cfg["nonce"] + json.dumps(result) + "\n").encode())
proc.kill()
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
    """How one sample ended: `status` is "passed", "failed: <reason>" or "timed out",
    the vocabulary of HumanEval-style harnesses."""

    status: str
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Isolation:
    """What this machine allows for `python`; probed once."""

    mode: str  # "bwrap" | "namespaces" | "none"
    private_network: bool
    private_uid: bool
    # bwrap: the read-only paths the interpreter needs
    binds: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if self.mode == "bwrap":
            return "bwrap: user, PID, network, IPC and mount namespaces; read-only interpreter; private tmpfs"
        if self.mode == "namespaces":
            uid = "unprivileged per-run uid" if self.private_uid else "the caller's uid"
            return f"private network and PID namespaces; {uid}"
        return "none: resource limits and an audit hook only (unsafe)"


class SandboxUnavailable(UserError):
    """No real isolation here, and the caller did not accept running without it."""


def _probe(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              env=_MINIMAL_ENV).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _interpreter_paths(python: str) -> tuple[str, ...]:
    """Directories the interpreter reads: its prefixes and the system library paths."""
    done = subprocess.run([python, "-I", "-c", "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, "
                           "sys.exec_prefix, sys.base_exec_prefix]))"], capture_output=True, text=True, timeout=30,
                          env=_MINIMAL_ENV)
    prefixes = json.loads(done.stdout) if done.returncode == 0 else []
    paths = {os.path.realpath(p) for p in prefixes} | {p for p in prefixes}
    paths.add(os.path.dirname(os.path.realpath(python)))
    for system in ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives",
                   "/etc/ssl", "/etc/localtime"):
        if os.path.exists(system):
            paths.add(system)
    # a parent listed after its child would hide the child's mount: shortest first
    return tuple(sorted(paths, key=len))


# Where the sample's working directory appears inside bwrap (a path nothing else uses).
SANDBOX_DIR = "/asyncbench-sandbox"


def _bwrap_prefix(binds: tuple[str, ...], work: str) -> list[str]:
    cmd = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]
    for path in binds:
        cmd += ["--ro-bind", path, path]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", work, SANDBOX_DIR, "--chdir", SANDBOX_DIR,
            "--clearenv"]
    for key, value in {**_MINIMAL_ENV, "HOME": SANDBOX_DIR, "TMPDIR": "/tmp"}.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--"]


@functools.lru_cache(maxsize=8)
def isolation(python: str = sys.executable) -> Isolation:
    """The strongest isolation that works here for `python` (see the module docstring)."""
    if shutil.which("bwrap"):
        binds = _interpreter_paths(python)
        with tempfile.TemporaryDirectory(prefix="asyncbench-probe-") as work:
            if _probe(_bwrap_prefix(binds, work) + [python, "-I", "-c", "import encodings, json, resource"]):
                return Isolation("bwrap", True, False, binds)
    if os.geteuid() == 0:
        unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
        net = bool(unshare) and _probe([unshare or "unshare", *_NAMESPACES, "true"])
        uid = bool(setpriv) and _probe(_drop_privileges(setpriv or "setpriv", _random_uid())
                                       + [python, "-I", "-c", "import encodings, json, resource"])
        if net:
            return Isolation("namespaces", True, uid)
    return Isolation("none", False, False)


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


_IMPORT_LINE = ("import ", "from ")


def trusted_imports(prompt: str) -> str:
    """The prompt's top-level import statements, which the checker runs itself so the
    test's module names (`np`, `pd`) are real modules, never objects from the sandbox."""
    lines = []
    for line in prompt.splitlines():
        if line.startswith(_IMPORT_LINE):
            try:
                tree = ast.parse(line)
            except SyntaxError:
                continue
            if all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in tree.body):
                lines.append(line)
    return "\n".join(lines)


def free_names(test: str, imports: str) -> list[str]:
    """Names the test reads but neither defines nor imports: the module-level values it
    needs from the model's code."""
    try:
        tree = ast.parse(test + "\n" + imports)
    except SyntaxError:
        return []
    loaded: set[str] = set()
    bound: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return sorted(loaded - bound)


def require_isolation(python: str, allow_unsafe: bool) -> Isolation:
    """The isolation model-written code will run under; SandboxUnavailable (one line,
    before anything is paid for) when there is none and the caller did not accept that."""
    iso = isolation(python)
    if not iso.safe and not allow_unsafe:
        raise SandboxUnavailable("no sandbox here for model-written code: install bubblewrap (bwrap) or run as root "
                                 "(for namespaces), or pass --allow-unsafe-sandbox to run it unisolated")
    return iso


def check(module: str, test: str = "", entry_point: str | None = None, prompt: str = "",
          limits: Limits = Limits(), python: str | None = None, allow_unsafe: bool = False) -> Outcome:
    """Run `module` (model-written code) in the sandbox and `test` (the benchmark's
    `check` function; `check(entry_point)` when one is named, else `check()`) in the
    checker. Without a test, the verdict is whether the module ran to its end (used by
    the containment tests; that one is the sandbox's word, so never a score)."""
    python = python or sys.executable
    iso = require_isolation(python, allow_unsafe)
    uid = _random_uid() if iso.mode == "namespaces" and iso.private_uid else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asyncbench-sandbox-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "program.py").write_text(module, encoding="utf-8")
        if uid is not None:
            os.chmod(tmp, 0o711)
            os.chown(work, uid, uid)
            os.chown(work / "program.py", uid, uid)
            os.chmod(work, 0o700)
        root_exempt = os.geteuid() == 0 and iso.mode == "namespaces" and uid is None
        nproc = limits.max_processes if uid is not None else None if root_exempt else _caller_process_budget(limits)
        cfg = {"cpu_s": limits.cpu_s, "memory_bytes": limits.memory_bytes, "file_size_bytes": limits.file_size_bytes,
               "nproc": nproc, "blocked_events": list(BLOCKED_EVENTS), "wire": _WIRE_SOURCE}
        prefix: list[str] = []
        if iso.mode == "bwrap":
            prefix = _bwrap_prefix(iso.binds, str(work))
            if os.geteuid() == 0:
                # As root, bwrap's own PID namespace does not take a fork bomb down with
                # it (root is exempt from RLIMIT_NPROC); an outer `unshare --pid
                # --kill-child` does: when it dies, the kernel kills the whole namespace.
                prefix = [shutil.which("unshare") or "unshare", *_NAMESPACES, *prefix]
        elif iso.mode == "namespaces":
            prefix = [shutil.which("unshare") or "unshare", *_NAMESPACES]
            if uid is not None:
                prefix += _drop_privileges(shutil.which("setpriv") or "setpriv", uid)
        imports = trusted_imports(prompt)
        nonce = secrets.token_hex(16)
        job = {"nonce": nonce, "wire": _WIRE_SOURCE, "test": test, "entry": entry_point, "imports": imports,
               "names": free_names(test, imports) if test else [], "cwd": str(work),
               "env": dict(_MINIMAL_ENV, HOME=str(work), TMPDIR=str(work)),
               "sandbox_cmd": [*prefix, python, "-I", "-c", _SANDBOX, json.dumps(cfg)]}
        proc = subprocess.Popen([python, "-I", "-c", _CHECKER], cwd=tmp, env=_MINIMAL_ENV, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True)
        timed_out = False
        try:
            out, _ = proc.communicate(json.dumps(job).encode() + b"\n", timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            out = b""
        finally:
            _cleanup(proc, uid)
    duration = time.monotonic() - started
    if timed_out:
        return Outcome("timed out", duration)
    return Outcome(_verdict(out.decode("utf-8", "replace"), nonce, proc.returncode), duration)


def execute(code: str, limits: Limits = Limits(), python: str | None = None, allow_unsafe: bool = False) -> Outcome:
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


def _verdict(text: str, nonce: str, returncode: int) -> str:
    for line in text.splitlines():
        if line.startswith(nonce):
            return str(json.loads(line[len(nonce):]))
    return f"failed: the checker ended without a verdict (status {returncode})"


@dataclass(frozen=True)
class Program:
    """One sample to check: the model's module, the benchmark's test and entry point."""

    module: str
    test: str = ""
    entry_point: str | None = None
    prompt: str = ""


async def check_many(programs: Sequence[Program], limits: Limits = Limits(), workers: int = 2,
                     python: str | None = None, allow_unsafe: bool = False) -> list[Outcome]:
    """Check samples in parallel with at most `workers` at once; identical samples run
    once (pass@1 of the 4k and 16k PrivateEval files shares many programs)."""
    import anyio

    python = python or sys.executable
    require_isolation(python, allow_unsafe)  # once, before any sample
    limiter = anyio.CapacityLimiter(max(1, workers))
    unique = list(dict.fromkeys(programs))
    results: dict[Program, Outcome] = {}

    async def one(p: Program) -> None:
        results[p] = await anyio.to_thread.run_sync(
            lambda: check(p.module, p.test, p.entry_point, p.prompt, limits, python, allow_unsafe), limiter=limiter)

    async with anyio.create_task_group() as tg:
        for p in unique:
            tg.start_soon(one, p)
    return [results[p] for p in programs]


async def execute_many(codes: Sequence[str], limits: Limits = Limits(), workers: int = 2,
                       python: str | None = None, allow_unsafe: bool = False) -> list[Outcome]:
    """`execute` for many programs (see `check_many`)."""
    return await check_many([Program(c) for c in codes], limits, workers, python, allow_unsafe)
