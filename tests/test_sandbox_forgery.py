"""Model code cannot forge a PrivateEval pass, and hostile code is contained as root and
as an ordinary user (issue 18).

The forgery suite: completions that try to report success without computing anything —
writing result markers to every descriptor, walking frames to the harness, exiting early
through every door, hooks, objects equal to everything, patched builtins. Their pass@1
must equal that of empty completions (0 here): the verdict comes from the checker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from asyncbench import sandbox
from asyncbench.sandbox import Limits, Program, check_many

REPO = Path(__file__).resolve().parents[1]
LIMITS = Limits(timeout_s=5.0, memory_bytes=512 << 20)
pytestmark = pytest.mark.skipif(not sandbox.isolation().safe, reason="no sandbox on this machine (bwrap, or root)")

# A PrivateEval-shaped problem with an entry point, and one whose test reads module names.
CALL_PROMPT = "import math\n\n\ndef area(r):\n    "
CALL_TEST = "def check(candidate):\n    assert candidate(1.0) == math.pi\n    assert candidate(2.0) == 4 * math.pi\n"
NAME_PROMPT = "import math\n\n# the circumference of a circle of radius 3\nresult = "
NAME_TEST = "def check():\n    assert result == 6 * math.pi\n    assert isinstance(result, float)\n"

FORGERIES = {
    "marker on every fd": "import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'passed\\n\"passed\"\\n')\n"
                          "    except OSError:\n        pass\nos._exit(0)\n",
    "fd scan of /proc/self/fd": "import os, json\nfor fd in os.listdir('/proc/self/fd'):\n    try:\n"
                                "        os.write(int(fd), (json.dumps({'loaded': 'ok'}) + '\\n').encode())\n"
                                "    except OSError:\n        pass\n",
    "frame walk to the harness": "import sys\nf = sys._getframe(1)\nwhile f is not None:\n"
                                 "    g = f.f_globals\n    if 'send' in g:\n        g['send']({'loaded': 'ok'})\n"
                                 "        g['send']({'value': 3.141592653589793})\n    f = f.f_back\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "atexit": "import atexit, os\natexit.register(lambda: os.write(1, b'passed\\n'))\nraise SystemExit(0)\n",
    "excepthook": "import sys\nsys.excepthook = lambda *a: print('passed')\nraise AssertionError\n",
    "profile hook": "import sys\nsys.setprofile(lambda *a: None)\nsys.settrace(lambda *a: None)\n",
    "always-equal object": "class E(float):\n    def __eq__(self, other):\n        return True\n"
                           "    __hash__ = float.__hash__\n",
    "patched builtins": "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.AssertionError = KeyError\n",
    "killing the checker": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
}


def programs(body_for_call: str, body_for_name: str) -> list[Program]:
    return [Program(CALL_PROMPT + body_for_call, CALL_TEST, "area", CALL_PROMPT),
            Program(NAME_PROMPT + body_for_name, NAME_TEST, None, NAME_PROMPT)]


def pass_count(progs: list[Program]) -> int:
    return sum(o.passed for o in anyio.run(check_many, progs, LIMITS, 2))


def test_honest_solutions_pass_and_empty_ones_do_not() -> None:
    assert pass_count(programs("return math.pi * r * r\n", "2 * math.pi * 3\n")) == 2
    assert pass_count(programs("\n", "\n")) == 0


@pytest.mark.parametrize("name", list(FORGERIES))
def test_forgery_does_better_than_an_empty_completion_never(name: str) -> None:
    attack = FORGERIES[name]
    as_function_body = "return E(0.0)\n" + attack if name == "always-equal object" else \
        "pass\n" + attack  # the attack runs at module level after the function
    as_value = ("E(0.0)\n" + attack) if name == "always-equal object" else "None\n" + attack
    if name == "always-equal object":  # the class must exist before it is used
        as_function_body = "return E(0.0)\n\n" + attack
        as_value = "0.0\n" + attack + "result = E(1.0)\n"
    assert pass_count(programs(as_function_body, as_value)) == 0


def test_a_subclass_of_a_builtin_cannot_cross() -> None:
    body = "return Pi(0)\n\n\nclass Pi(float):\n    def __eq__(self, other):\n        return True\n"
    out = sandbox.check(CALL_PROMPT + body, CALL_TEST, "area", CALL_PROMPT, LIMITS)
    assert not out.passed and "cannot be compared safely" in out.status


HOSTILE = {
    "loop": "while True:\n    pass\n",
    "fork bomb": "import ctypes\nlibc = ctypes.CDLL(None)\nwhile True:\n    libc.fork()\n",
    "memory": "x = []\nwhile True:\n    x.append(bytearray(50 << 20))\n",
    "environment": "import os\nassert 'hostile-secret-4242' in repr(dict(os.environ)), 'not found'\n",
    "hook switched off": "import sys\nsys.modules['__main__'].__dict__.get('_BLOCKED')\n"
                         "import gc\nfor o in gc.get_objects():\n    if isinstance(o, frozenset) and 'os.fork' in o:\n"
                         "        pass\nimport socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\n",
    "parent environ": textwrap.dedent("""
        import os
        found = []
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try:
                    found.append(open(f'/proc/{pid}/environ', 'rb').read())
                except OSError:
                    pass
        assert any(b'hostile-secret-4242' in e for e in found), 'not found'
    """),
    "socket": "import socket\ns = socket.create_connection(('127.0.0.1', 22), timeout=1)\n",
    "ctypes socket": textwrap.dedent("""
        import ctypes, struct
        libc = ctypes.CDLL(None)
        fd = libc.socket(2, 1, 0)
        addr = struct.pack('!HH4s8x', 2, 22, bytes([127, 0, 0, 1]))
        assert libc.connect(fd, addr, len(addr)) == 0
    """),
    "file outside tmp": "open({target!r}, 'w').write('x')\n",
    "daemon": textwrap.dedent("""
        import ctypes, time
        libc = ctypes.CDLL(None)
        if libc.fork() == 0:
            libc.setsid()
            if libc.fork() == 0:
                for _ in range(200):
                    try:
                        open({target!r}, 'a').write('.')
                    except OSError:
                        pass
                    time.sleep(0.05)
    """),
}


def _run_hostile(python: str, tmp: Path, as_user: bool) -> dict[str, str]:
    """Run each hostile program through asyncbench.sandbox in a driver process (as an
    ordinary user when asked) whose environment holds a secret; report the outcomes."""
    driver = tmp / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp / 'pkg')!r})
        from asyncbench import sandbox
        programs = json.loads(open({str(tmp / 'programs.json')!r}).read())
        limits = sandbox.Limits(timeout_s=4.0, memory_bytes=512 << 20)
        out = {{name: sandbox.execute(code, limits).status for name, code in programs.items()}}
        out['isolation'] = sandbox.isolation().mode
        print(json.dumps(out))
    """))
    import json

    target = str(tmp / "outside" / "planted.txt")
    (tmp / "outside").mkdir()
    os.chmod(tmp / "outside", 0o777)
    (tmp / "programs.json").write_text(json.dumps({k: v.replace("{target!r}", repr(target))
                                                   for k, v in HOSTILE.items()}))
    pkg = tmp / "pkg" / "asyncbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name in ("sandbox.py", "sandbox_wire.py", "errors.py", "secrets.py"):
        shutil.copy(REPO / "asyncbench" / name, pkg / name)
    for path in [tmp, *tmp.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    cmd = [python, str(driver)]
    if as_user:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *cmd]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "OPENAI_API_KEY": "hostile-secret-4242"}
    before_procs = len(os.listdir("/proc"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    deadline = time.monotonic() + 10  # a fork bomb's thousands take the kernel a moment to reap
    while len(os.listdir("/proc")) > before_procs + 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(os.listdir("/proc")) <= before_procs + 10, "processes outlived their sample"
    time.sleep(1.0)  # a daemon that escaped would still be writing now
    before = Path(target).read_text() if Path(target).exists() else ""
    time.sleep(0.5)
    after = Path(target).read_text() if Path(target).exists() else ""
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    result["planted"] = after
    result["still writing"] = str(after != before)
    return result


def _assert_contained(result: dict[str, str]) -> None:
    for name in HOSTILE:
        assert not result[name].startswith("passed") or name == "daemon", (name, result[name])
    assert result["loop"].startswith("timed out")
    assert result["planted"] == "", "a file outside the sandbox was written"
    assert result["still writing"] == "False", "a daemon outlived its sample"


@pytest.mark.skipif(os.geteuid() != 0, reason="the root case needs root")
def test_hostile_code_is_contained_as_root() -> None:
    with tempfile.TemporaryDirectory() as d:
        _assert_contained(_run_hostile(sys.executable, Path(d), as_user=False))


def _user_python() -> str | None:
    """An interpreter an unprivileged uid can run (ours may live under /root)."""
    for python in ("/usr/bin/python3", sys.executable):
        if shutil.which("setpriv") and subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", python, "-c", "pass"],
                capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap") or _user_python() is None,
                    reason="the ordinary-user case needs root to become one (setpriv), bwrap, and an interpreter "
                           "that user can run")
def test_hostile_code_is_contained_as_an_ordinary_user() -> None:
    with tempfile.TemporaryDirectory() as d:
        result = _run_hostile(_user_python() or sys.executable, Path(d), as_user=True)
    assert result["isolation"] == "bwrap"
    _assert_contained(result)


def test_without_isolation_model_code_is_refused_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "isolation", lambda python=sys.executable: sandbox.Isolation("none", False, False))
    with pytest.raises(sandbox.SandboxUnavailable, match="--allow-unsafe-sandbox"):
        sandbox.check("x = 1", "def check():\n    assert x == 1\n", None, "")
    assert sandbox.check("x = 1", "def check():\n    assert x == 1\n", None, "", allow_unsafe=True).passed
