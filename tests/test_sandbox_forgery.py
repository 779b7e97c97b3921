"""Model code cannot forge a PrivateEval pass nor choose the test's inputs, and hostile
code is contained, as root (bwrap, and the mount-namespace mode without it) and as an
ordinary user (bwrap) (issues 18 and 24).

The forgery suite: completions that try to report success without computing anything —
writing result markers to every descriptor, walking frames to the harness, exiting early
through every door, hooks, objects equal to everything, patched builtins. The poisoning
suite: completions that rebind the test's inputs (`a = b = c = empty`), replace the
sandbox's encoder so every name it is asked for is empty, or answer names nobody asked
for. Their pass@1 must equal that of empty completions (0 here): the verdict comes from
the checker, which runs the prompt's set-up itself and takes only the outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from sandbox_modes import (
    copy_package,
    mode_fixture,  # noqa: F401  (each in-process isolation mode)
    open_up,
    run_as_user,
    unavailable,
    user_python,
)

from asyncbench.benchmarks.bamboo import sandbox
from asyncbench.benchmarks.bamboo.sandbox import Limits, Program, check_many, program
from asyncbench.benchmarks.bamboo.sandbox_split import split_prompt

# every test that starts sandboxes in one xdist worker, one at a time: the forgery tests
# count the sandbox's live processes machine-wide, and another worker's samples (the budget
# tests' orphans, a canonical run's 152) were counted as outliving theirs
pytestmark = pytest.mark.xdist_group("sandbox")

LIMITS = Limits(cpu_s=5.0, wall_s=30.0, memory_bytes=512 << 20)

# A PrivateEval-shaped problem with an entry point, and one whose test reads module names.
CALL_PROMPT = "import math\n\n\ndef area(r):\n    "
CALL_TEST = "def check(candidate):\n    assert candidate(1.0) == math.pi\n    assert candidate(2.0) == 4 * math.pi\n"
CALL_REFERENCE = "return math.pi * r * r\n"
NAME_PROMPT = "import math\n\n# the circumference of a circle of radius 3\nresult = "
NAME_TEST = "def check():\n    assert result == 6 * math.pi\n    assert isinstance(result, float)\n"
NAME_REFERENCE = "2 * math.pi * 3\n"
# NumpyEval/5's shape: the expected value is computed from the inputs a and b.
INPUT_PROMPT = "import numpy as np\n\na = np.array([[1, 2], [3, 4]])\nb = np.array([[5, 6]])\n# stack b under a\nc = "
INPUT_TEST = "def check():\n    assert np.array_equal(c, np.concatenate((a, b)))\n"
INPUT_REFERENCE = "np.concatenate((a, b))\n"

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


# each takes an `empty` value in the sandbox and makes every name the checker asks for it
POISONINGS = {
    "inputs rebound": "None\na = b = c = np.array([])\n",
    "encoder replaced": "None\nimport sys\ng = sys._getframe(1).f_globals\n"
                        "empty = g['wire']['encode'](np.array([]))\ng['value_of'] = lambda name: empty\n",
    "names nobody asked for": "None\nimport sys\ng = sys._getframe(1).f_globals\nsend = g['send']\n"
                              "empty = g['wire']['encode'](np.array([]))\n"
                              "def forged(obj):\n    if 'values' in obj:\n"
                              "        obj['values'] = {n: empty for n in ('a', 'b', 'c', 'np', 'check')}\n"
                              "    send(obj)\ng['send'] = forged\n",
}


def programs(body_for_call: str, body_for_name: str) -> list[Program]:
    return [program(CALL_PROMPT, body_for_call, CALL_TEST, "area", CALL_REFERENCE),
            program(NAME_PROMPT, body_for_name, NAME_TEST, None, NAME_REFERENCE)]


def forgery_programs(name: str) -> list[Program]:
    attack = FORGERIES[name]
    if name == "always-equal object":  # the class must exist before it is used
        return programs("return E(0.0)\n\n" + attack, "0.0\n" + attack + "result = E(1.0)\n")
    return programs("pass\n" + attack, "None\n" + attack)  # the attack runs at module level


def poisoning_program(name: str) -> Program:
    return program(INPUT_PROMPT, POISONINGS[name], INPUT_TEST, None, INPUT_REFERENCE)


def pass_count(progs: list[Program]) -> int:
    return sum(o.passed for o in anyio.run(check_many, progs, LIMITS, 2))


@pytest.mark.usefixtures("mode")
def test_honest_solutions_pass_and_empty_ones_do_not() -> None:
    assert pass_count(programs(CALL_REFERENCE, NAME_REFERENCE)) == 2
    assert pass_count(programs("\n", "\n")) == 0
    assert pass_count([program(INPUT_PROMPT, INPUT_REFERENCE, INPUT_TEST, None, INPUT_REFERENCE)]) == 1
    assert pass_count([program(INPUT_PROMPT, "\n", INPUT_TEST, None, INPUT_REFERENCE)]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FORGERIES))
@pytest.mark.usefixtures("mode")
def test_forgery_does_better_than_an_empty_completion_never(name: str) -> None:
    assert pass_count(forgery_programs(name)) == 0


@pytest.mark.parametrize("name", list(POISONINGS))
@pytest.mark.usefixtures("mode")
def test_poisoned_inputs_do_better_than_an_empty_completion_never(name: str) -> None:
    assert pass_count([poisoning_program(name)]) == 0


def test_the_checker_takes_only_what_the_reference_binds_or_changes() -> None:
    setup, outputs = split_prompt(INPUT_PROMPT, INPUT_REFERENCE)
    assert outputs == ("c",) and "b = np.array" in setup and "c =" not in setup
    # a function's body completes its def; a prompt statement continued by the completion
    assert split_prompt(CALL_PROMPT, CALL_REFERENCE) == ("import math\n\n", ("area",))
    assert split_prompt("import numpy as np\na = np.zeros(3)\n# set one\n", "a[0] = 1") [1] == ("a",)
    assert split_prompt("import numpy as np\na = np.zeros(3)\n", "a.sort()\nnp.copyto(b, a)")[1] == ("a", "b")
    # NumpyEval/2: two names bound, the input `a` stays the checker's
    assert split_prompt("import numpy as np\na = np.arange(8)\nb =", " a.reshape(2, 4)\nc = b.T")[1] == ("b", "c")
    assert split_prompt("x = 1\ny = x +", " 1\nimport os")[1] == ("os", "y")


@pytest.mark.usefixtures("mode")
def test_a_subclass_of_a_builtin_cannot_cross() -> None:
    body = "return Pi(0)\n\n\nclass Pi(float):\n    def __eq__(self, other):\n        return True\n"
    p = program(CALL_PROMPT, body, CALL_TEST, "area", CALL_REFERENCE)
    out = sandbox.check(p.module, p.test, p.entry_point, p.setup, p.outputs, LIMITS)
    assert not out.passed and "cannot be compared safely" in out.status


def _numpy_python() -> str | None:
    """The release environment when it is built (uid 65534 can read it), for the
    poisonings, which need numpy."""
    from asyncbench.benchmarks.bamboo.sandbox_env import env_dir

    python = env_dir() / "bin" / "python"
    return str(python) if (env_dir() / ".ready").is_file() else None


@pytest.mark.slow
@pytest.mark.skipif(bool(unavailable("user-bwrap")), reason=unavailable("user-bwrap") or "runs")
def test_forgery_and_poisoning_as_an_ordinary_user() -> None:
    """The non-root mode: every strategy scores as the control, as uid 65534 under bwrap
    (the poisonings too when the release environment, which has numpy, is built)."""
    with_numpy = _numpy_python()
    python = user_python(tuple(p for p in (with_numpy, "/usr/bin/python3", sys.executable) if p))
    assert python is not None
    progs = [*programs(CALL_REFERENCE, NAME_REFERENCE), *programs("\n", "\n")]
    progs += [p for name in FORGERIES for p in forgery_programs(name)]
    if python == with_numpy:
        progs += [poisoning_program(name) for name in POISONINGS]
    with tempfile.TemporaryDirectory() as d:
        iso, statuses = run_as_user(progs, Path(d), python, LIMITS)
    assert iso == "bwrap"
    assert [s == "passed" for s in statuses] == [True, True] + [False] * (len(progs) - 2), statuses


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


def _run_hostile(python: str, tmp: Path, as_user: bool, mode: str | None = None) -> dict[str, str]:
    """Run each hostile program through asyncbench.benchmarks.bamboo.sandbox in a driver process (as an
    ordinary user when asked, in `mode` when given) whose environment holds a secret;
    report the outcomes."""
    pkg = copy_package(tmp)
    driver = tmp / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(pkg)!r})
        from asyncbench.benchmarks.bamboo import sandbox
        programs = json.loads(open({str(tmp / 'programs.json')!r}).read())
        limits = sandbox.Limits(cpu_s=2.0, wall_s=6.0, memory_bytes=512 << 20)
        out = {{name: sandbox.execute(code, limits).status for name, code in programs.items()}}
        out['isolation'] = sandbox.isolation().mode
        print(json.dumps(out))
    """))
    target = str(tmp / "outside" / "planted.txt")
    (tmp / "outside").mkdir()
    (tmp / "programs.json").write_text(json.dumps({k: v.replace("{target!r}", repr(target))
                                                   for k, v in HOSTILE.items()}))
    open_up(tmp)
    cmd = [python, str(driver)]
    if as_user:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *cmd]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "OPENAI_API_KEY": "hostile-secret-4242"}
    if mode:
        env[sandbox.MODE_ENV] = mode
    before = set(_sandbox_processes())
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    # a fork bomb's thousands take the kernel a moment to reap: over 10 s at a load average of 600
    deadline = time.monotonic() + 60
    while set(_sandbox_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(_sandbox_processes()) - before, "processes outlived their sample"
    time.sleep(1.0)  # a daemon that escaped would still be writing now
    before = Path(target).read_text() if Path(target).exists() else ""
    time.sleep(0.5)
    after = Path(target).read_text() if Path(target).exists() else ""
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    result["planted"] = after
    result["still writing"] = str(after != before)
    return result


def _sandbox_processes() -> list[int]:
    """Live processes running (or forked from) the sandbox's or checker's script; other
    processes come and go on a shared machine (another sandbox run at the same time,
    such as bench/privateeval_isolation.py, would be counted too)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                zombie = fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            continue
        if b"PR_SET_PDEATHSIG" in cmdline and not zombie:
            pids.append(int(entry))
    return pids


def _assert_contained(result: dict[str, str]) -> None:
    for name in HOSTILE:
        assert not result[name].startswith("passed") or name == "daemon", (name, result[name])
    assert result["loop"].startswith("timed out")
    assert result["planted"] == "", "a file outside the sandbox was written"
    assert result["still writing"] == "False", "a daemon outlived its sample"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the root case needs root")
@pytest.mark.parametrize("root_mode", ["bwrap", "mountns"])
def test_hostile_code_is_contained_as_root(root_mode: str) -> None:
    why = unavailable(root_mode)
    if why:
        pytest.skip(why)
    with tempfile.TemporaryDirectory() as d:
        result = _run_hostile(sys.executable, Path(d), as_user=False, mode=root_mode)
    assert result["isolation"] == root_mode
    _assert_contained(result)


@pytest.mark.slow
@pytest.mark.skipif(bool(unavailable("user-bwrap")), reason=unavailable("user-bwrap") or "runs")
def test_hostile_code_is_contained_as_an_ordinary_user() -> None:
    with tempfile.TemporaryDirectory() as d:
        result = _run_hostile(user_python() or sys.executable, Path(d), as_user=True)
    assert result["isolation"] == "bwrap"
    _assert_contained(result)


def _unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "isolation", lambda python=sys.executable: sandbox.Isolation("none", why="test"))


def test_without_isolation_model_code_is_refused_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    _unsafe(monkeypatch)
    with pytest.raises(sandbox.SandboxUnavailable, match="--allow-unsafe-sandbox"):
        sandbox.check("x = 1", "def check():\n    assert x == 1\n", None, "", ("x",))
    assert sandbox.check("x = 1", "def check():\n    assert x == 1\n", None, "", ("x",), allow_unsafe=True).passed


def test_a_daemon_dies_with_its_sample_even_unisolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--allow-unsafe-sandbox: the checker is a child subreaper, so a `setsid` daemon
    becomes its child and is killed with the sample."""
    _unsafe(monkeypatch)
    target = tmp_path / "planted.txt"
    code = HOSTILE["daemon"].replace("{target!r}", repr(str(target)))
    out = sandbox.execute(code, Limits(cpu_s=2.0, wall_s=10.0), allow_unsafe=True)
    assert out.passed, out
    time.sleep(1.0)
    before = target.read_text() if target.exists() else ""
    time.sleep(0.5)
    assert (target.read_text() if target.exists() else "") == before, "a daemon outlived its sample"
