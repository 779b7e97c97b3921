"""Hostile programs fail their sample within the time limit and leave nothing behind."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from asyncbench import sandbox
from asyncbench.sandbox import Limits, execute, execute_many

LIMITS = Limits(timeout_s=3.0, memory_bytes=512 << 20)
SLACK_S = 3.0  # start-up and cleanup on a busy 2-core machine


def run(code: str) -> sandbox.Outcome:
    out = execute(code, LIMITS)
    assert out.duration_s < LIMITS.timeout_s + SLACK_S, out
    return out


pytestmark = pytest.mark.skipif(not sandbox.isolation().safe, reason="no sandbox on this machine (bwrap, or root)")


def test_passing_and_failing_programs():
    assert run("x = 1\nassert x == 1").passed
    assert run("assert 1 == 2, 'boom'").status == "failed: AssertionError: boom"
    assert run("def f(:\n  pass").status.startswith("failed: SyntaxError")


def test_early_exit_is_not_a_pass():
    assert not run("import sys\nsys.exit(0)\nassert False").passed
    assert not run("import os\nos._exit(0)").passed


@pytest.mark.parametrize("code", [
    "while True:\n    pass",
    "import time\ntime.sleep(60)",
], ids=["busy-loop", "sleep"])
def test_infinite_loops_time_out(code):
    assert run(code).status.startswith("timed out")


def test_fork_bomb_is_contained():
    before = len(os.listdir("/proc"))
    out = run("import os\nwhile True:\n    os.fork()")
    assert not out.passed
    # the C-level route around the audit hook: bounded by the process limit, then killed
    out = run("import ctypes\nlibc = ctypes.CDLL(None)\nwhile True:\n    libc.fork()")
    assert not out.passed
    deadline = time.monotonic() + 10  # the kernel takes a moment to reap thousands
    while len(os.listdir("/proc")) >= before + 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(os.listdir("/proc")) < before + 10  # nothing left running
    assert run("assert 2 + 2 == 4").passed  # and the next sample is unaffected


def test_memory_hog_fails():
    assert not run("x = bytearray(4 << 30)").passed
    assert not run("x = []\nwhile True:\n    x.append(bytearray(50 << 20))").passed


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
    if sandbox.isolation().private_network:  # below the audit hook: no interface at all
        code = ("import ctypes, ctypes.util\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "fd = libc.socket(2, 1, 0)\nassert fd >= 0\n"
                "import struct\naddr = struct.pack('!HH4s8x', 2, 80, bytes([1, 1, 1, 1]))\n"
                "rc = libc.connect(fd, addr, len(addr))\nassert rc == 0, ctypes.get_errno()")
        assert run(code).status.startswith("failed: AssertionError")


def test_working_directory_is_throwaway(tmp_path):
    out = run("import os\nopen('scratch.txt', 'w').write('x')\nassert os.getcwd().startswith('/tmp') or 'sandbox' in os.getcwd()")
    assert out.passed
    if sandbox.isolation().mode == "bwrap" or sandbox.isolation().private_uid:
        target = tmp_path / "owned-by-caller"
        target.write_text("keep")
        assert not run(f"import os\nos.unlink({str(target)!r})").passed
        assert target.read_text() == "keep"


def test_execute_many_keeps_order_and_bounds_work():
    codes = ["assert True", "assert False", "assert True", "while True: pass"]
    outs = anyio.run(execute_many, codes, LIMITS, 2)
    assert [o.passed for o in outs] == [True, False, True, False]
    assert outs[3].status.startswith("timed out")
