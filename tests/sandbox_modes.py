"""The sandbox's isolation modes as the tests run them, and a driver that runs programs
as an ordinary user.

In-process modes are forced with ASYNCBENCH_SANDBOX_MODE (so one machine with bwrap
tests both root modes); `user-bwrap` runs a copy of the sandbox modules as uid 65534
(setpriv), the non-root case. A `-no-cgroup` suffix runs a root mode as on a machine
where no cgroup can be made (ASYNCBENCH_SANDBOX_CGROUP=0: no fork in a sample). A mode
this machine cannot run skips with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from asyncbench.benchmarks.bamboo import sandbox, sandbox_cgroup
from asyncbench.benchmarks.bamboo.sandbox import Limits, Program

REPO = Path(__file__).resolve().parents[1]
IN_PROCESS = ("bwrap", "mountns")
NO_CGROUP = "-no-cgroup"
USER = 65534


def unavailable(mode: str) -> str:
    """Why `mode` cannot run here ("" when it can)."""
    if mode.endswith(NO_CGROUP):
        return unavailable(mode[:-len(NO_CGROUP)])
    if mode == "mountns" and os.geteuid() != 0:
        return "the mount-namespace mode needs root"
    if mode == "bwrap" and not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    if mode == "user-bwrap":
        if os.geteuid() != 0 or not shutil.which("bwrap") or not shutil.which("setpriv"):
            return "the ordinary-user case needs root to become one (setpriv) and bwrap"
        return "" if user_python() else "no interpreter uid 65534 can run"
    with forced(mode):
        iso = sandbox.isolation()
    return "" if iso.mode == mode else f"{mode} does not work here: {iso.why}"


@contextmanager
def forced(mode: str) -> Iterator[None]:
    """`mode` for the block (and, with the `-no-cgroup` suffix, no cgroup)."""
    off = mode.endswith(NO_CGROUP)
    saved = {key: os.environ.get(key) for key in (sandbox.MODE_ENV, sandbox_cgroup.OFF_ENV)}
    os.environ[sandbox.MODE_ENV] = mode[:-len(NO_CGROUP)] if off else mode
    if off:
        os.environ[sandbox_cgroup.OFF_ENV] = "0"
    sandbox.isolation.cache_clear()
    sandbox_cgroup.available.cache_clear()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sandbox.isolation.cache_clear()
        sandbox_cgroup.available.cache_clear()


@pytest.fixture(params=IN_PROCESS, name="mode")
def mode_fixture(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each in-process mode in turn, skipped where it cannot run."""
    why = unavailable(request.param)
    if why:
        pytest.skip(why)
    with forced(request.param):
        yield request.param


def user_python(candidates: tuple[str, ...] = ("/usr/bin/python3", sys.executable)) -> str | None:
    """An interpreter an unprivileged uid can run (ours may live under /root)."""
    for python in candidates:
        if shutil.which("setpriv") and os.path.exists(python) and subprocess.run(
                ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--", python, "-c", "pass"],
                capture_output=True).returncode == 0:
            return python
    return None


def copy_package(tmp: Path) -> Path:
    """The sandbox modules alone, where any uid can read them."""
    pkg = tmp / "pkg" / "asyncbench"
    bamboo = pkg / "benchmarks" / "bamboo"
    bamboo.mkdir(parents=True)
    for package in (pkg, pkg / "benchmarks", bamboo):  # empty: the sandbox needs none of the rest
        (package / "__init__.py").write_text("")
    for name in ("errors.py", "secrets.py"):
        shutil.copy(REPO / "asyncbench" / name, pkg / name)
    for name in ("sandbox.py", "sandbox_wire.py", "sandbox_root.py", "sandbox_split.py", "sandbox_cgroup.py"):
        shutil.copy(REPO / "asyncbench" / "benchmarks" / "bamboo" / name, bamboo / name)
    return tmp / "pkg"


def open_up(tmp: Path) -> None:
    for path in [tmp, *tmp.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)


def run_as_user(programs: list[Program], tmp: Path, python: str, limits: Limits, imports: str = "",
                env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """Check `programs` as uid 65534 with `python` (its driver and the sandbox's); the
    isolation mode and each status."""
    pkg = copy_package(tmp)
    (tmp / "programs.json").write_text(json.dumps([p.__dict__ for p in programs]))
    driver = tmp / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(pkg)!r})
        from asyncbench.benchmarks.bamboo import sandbox
        limits = sandbox.Limits(**json.loads({json.dumps(limits.__dict__)!r}))
        iso = sandbox.require_isolation(sys.executable, False, {imports!r})
        out = [sandbox._run(iso, sys.executable, p["module"], p["test"], p["entry_point"], p["setup"],
                            tuple(p["outputs"]), sandbox.trusted_imports(p["setup"]), limits)
               .status for p in json.loads(open({str(tmp / 'programs.json')!r}).read())]
        print(json.dumps([iso.mode, out]))
    """))
    open_up(tmp)
    cmd = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--", python, str(driver)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=1800,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp), **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    iso_mode, statuses = json.loads(done.stdout.strip().splitlines()[-1])
    return iso_mode, statuses
