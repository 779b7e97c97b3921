"""Hostile programs fail their sample within their limits and leave nothing behind, in
each isolation mode this machine can run (tests/sandbox_modes.py)."""

from __future__ import annotations

import os
import sys
import time

import anyio
import pytest
from sandbox_modes import mode_fixture  # noqa: F401  (each in-process isolation mode)

from asyncbench.benchmarks.bamboo import sandbox
from asyncbench.benchmarks.bamboo.sandbox import Limits, execute, execute_many

LIMITS = Limits(cpu_s=1.0, wall_s=20.0, memory_bytes=512 << 20)


def run(code: str, limits: Limits = LIMITS) -> sandbox.ProgramVerdict:
    return execute(code, limits)


pytestmark = [pytest.mark.usefixtures("mode"), pytest.mark.xdist_group("sandbox")]  # see test_sandbox_forgery


def test_passing_and_failing_programs():
    assert run("x = 1\nassert x == 1").passed
    assert run("assert 1 == 2, 'boom'").status == "failed: AssertionError: boom"
    assert run("def f(:\n  pass").status.startswith("failed: SyntaxError")


def test_early_exit_is_not_a_pass():
    assert not run("import sys\nsys.exit(0)\nassert False").passed
    assert not run("import os\nos._exit(0)").passed


@pytest.mark.slow
def test_cpu_time_is_limited_not_the_clock():
    assert run("while True:\n    pass").status.startswith("timed out: the CPU limit")
    # sleeping costs no CPU: a program may wait longer than its CPU budget...
    # (a cap of 60 s here: the cap also bounds the sandbox's start, which took over 10 s on
    # a 2-core CI machine at a load average of 300)
    assert run("import time\ntime.sleep(3)", Limits(cpu_s=1.0, wall_s=60.0)).passed
    # ...up to the wall-clock cap
    assert run("import time\ntime.sleep(60)", Limits(cpu_s=1.0, wall_s=10.0)).status.startswith(
        "timed out: the wall-clock cap")


@pytest.mark.slow
def test_fork_bomb_is_contained():
    before = len(os.listdir("/proc"))
    out = run("import os\nwhile True:\n    os.fork()")
    assert not out.passed
    # the C-level route around the audit hook: bounded by the process limit, then killed
    out = run("import ctypes\nlibc = ctypes.CDLL(None)\nwhile True:\n    libc.fork()", Limits(cpu_s=1.0, wall_s=5.0))
    assert not out.passed
    deadline = time.monotonic() + 60  # the kernel takes a moment to reap thousands (more under load)
    while len(os.listdir("/proc")) >= before + 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(os.listdir("/proc")) < before + 10  # nothing left running
    assert run("assert 2 + 2 == 4").passed  # and the next sample is unaffected


def test_memory_hog_fails():
    assert not run("x = bytearray(4 << 30)").passed
    assert not run("x = []\nwhile True:\n    x.append(bytearray(50 << 20))").passed


def test_scratch_space_is_bounded():
    small = Limits(cpu_s=2.0, wall_s=20.0, tmpfs_bytes=8 << 20, max_files=256)
    for where in ("/tmp/f", "/dev/shm/f", "f"):
        code = f"with open({where!r}, 'wb') as fh:\n    for _ in range(64):\n        fh.write(b'x' * (1 << 20))"
        assert run(code, small).status.startswith("failed: OSError"), where
    assert run("open('/tmp/x', 'w').write('ok')\nassert open('/tmp/x').read() == 'ok'", small).passed
    if sandbox.isolation().mode == "mountns":  # bwrap's tmpfs takes no inode count
        assert run("for i in range(1000):\n    open(f'/tmp/{i}', 'w').close()", small).status.startswith("failed: OSError")


def test_an_endless_answer_line_is_cut():
    # the sandbox's own pipe, found from the program: one endless line to the checker
    code = ("import sys\ng = sys._getframe(1).f_globals\nwhile True:\n    g['outbox'].write('x' * (1 << 20))")
    out = sandbox.check(code, "def check():\n    pass\n", None, "", (), Limits(cpu_s=2.0, wall_s=8.0,
                                                                          max_answer_chars=4 << 20))
    assert out.status.startswith(("failed: an answer longer than", "timed out")) and not out.passed


def test_the_host_is_out_of_sight(tmp_path):
    secret = tmp_path / "answers.json"
    secret.write_text("{}")
    os.chmod(tmp_path, 0o755)
    code = (f"import os\nassert not os.path.exists({str(secret)!r})\n"
            "assert not os.path.exists('/etc/passwd') and not os.path.exists('/home')\n"
            "assert len([p for p in os.listdir('/proc') if p.isdigit()]) <= 3, os.listdir('/proc')\n"
            "for d in ('/', '/usr', '/etc'):\n    try:\n        open(d + '/planted', 'w')\n"
            "    except OSError:\n        pass\n    else:\n        raise SystemExit('wrote ' + d)\n")
    assert run(code).passed, run(code).status
    # a fresh /tmp per sample: nothing persists between samples
    assert run("open('/tmp/left', 'w').write('x')\nopen('/dev/shm/left', 'w').write('x')").passed
    assert run("import os\nassert not os.path.exists('/tmp/left') and not os.path.exists('/dev/shm/left')").passed


def test_environment_is_empty(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    code = ("import os\nassert 'OPENAI_API_KEY' not in os.environ\n"
            "assert 'sk-test-secret' not in repr(dict(os.environ))\n"
            "assert set(os.environ) <= {'PATH', 'LANG', 'HOME', 'TMPDIR', 'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'LC_CTYPE', 'PWD'}")
    assert run(code).passed
    # a program that goes looking for the key fails its sample
    assert not run("import os\nkey = os.environ['OPENAI_API_KEY']").passed


def test_network_is_unavailable():
    out = run("import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect(('1.1.1.1', 80))")
    assert out.status.startswith("failed: PermissionError")
    # below the audit hook: no interface at all
    code = ("import ctypes, ctypes.util\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "fd = libc.socket(2, 1, 0)\nassert fd >= 0\n"
            "import struct\naddr = struct.pack('!HH4s8x', 2, 80, bytes([1, 1, 1, 1]))\n"
            "rc = libc.connect(fd, addr, len(addr))\nassert rc == 0, ctypes.get_errno()")
    assert run(code).status.startswith("failed: AssertionError")


def test_working_directory_is_throwaway(tmp_path):
    out = run("import os\nopen('scratch.txt', 'w').write('x')\nassert os.getcwd() == '/asyncbench-sandbox'")
    assert out.passed
    target = tmp_path / "owned-by-caller"
    target.write_text("keep")
    assert not run(f"import os\nos.unlink({str(target)!r})").passed
    assert target.read_text() == "keep"


def test_execute_many_keeps_order_and_bounds_work():
    codes = ["assert True", "assert False", "assert True", "while True: pass"]
    outs = anyio.run(execute_many, codes, LIMITS, 2)
    assert [o.passed for o in outs] == [True, False, True, False]
    assert outs[3].status.startswith("timed out")


def test_a_sandbox_that_cannot_start_is_an_error_not_a_failure(tmp_path):
    """Not the program's fault: an interpreter the sandbox cannot run, or one missing a
    module it promises, is an `error` outcome (a failed sample), never a 0."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    iso = sandbox.isolation()
    out = sandbox._run(iso, str(broken), "x = 1", "def check():\n    assert x == 1\n", None, "", ("x",), "", LIMITS)
    assert out.error and not out.passed, out
    out = sandbox._run(iso, sys.executable, "import numpy\nx = 1", "def check():\n    pass\n", None,
                       "import not_a_module_4242\n", ("x",), "import not_a_module_4242", LIMITS,
                       frozenset({"not_a_module_4242"}))
    assert out.error and "not_a_module_4242" in out.status, out
    with pytest.raises(sandbox.SandboxUnavailable, match="not_a_module_4242"):
        sandbox.require_isolation(sys.executable, False, "import not_a_module_4242")
