"""BAMBOO PrivateEval's interpreter: the libraries its problems were written for.

The NumpyEval and PandasEval problems use APIs that numpy 1.24 and pandas 2 removed
(`np.float`, `ndarray.tostring`, `DataFrame.append`, ...). Run in today's libraries,
canonical solutions fail for that reason alone (102 of 123 pass here); with numpy 1.23.5
and pandas 1.5.3, 112 pass — every row whose release solution is correct
(bench/bamboo_private_eval.md). So PrivateEval runs, by default, in a pinned virtual
environment built on first use (`uv` when installed, else `venv` + pip), and the
release's 3-second limit applies. `--sandbox-python PATH` names another interpreter;
`--sandbox-own-python` runs asyncbench's own, and run.json says which.

The sandbox runs programs as another uid, so the environment must be readable by any
uid: as root it lives in /var/cache/asyncbench (root's cache under /root is mode 700),
built with modes 755/644, on a base interpreter whose every parent directory is
world-traversable (a pyenv Python under /root is not: then the system's Python of the
same minor version is used when there is one). The sandbox's probe imports numpy and
pandas as the sandbox uid before a run, so an unreadable environment is one line at the
start, never a run of zeros.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from ...errors import UserError

# pyarrow carries pandas frames between the sandbox and the checker (sandbox_wire.py)
PACKAGES = ("numpy==1.23.5", "pandas==1.5.3", "pyarrow==14.0.2")
RELEASE_TIMEOUT_S = 3.0
# What PrivateEval programs import; the isolation probe imports it as the sandbox uid.
PROBE_IMPORTS = "import numpy, pandas, pyarrow"
SYSTEM_CACHE = Path("/var/cache/asyncbench")


def world_readable(path: str) -> bool:
    """Whether any uid can reach `path`: every parent directory has o+x."""
    real = Path(os.path.realpath(path))
    for parent in real.parents:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def base_python() -> str:
    """The interpreter the environment is built on: asyncbench's own when any uid can
    reach it, else the system's of the same minor version, else asyncbench's own (the
    start-up probe then says why programs cannot run)."""
    if world_readable(sys.executable) and world_readable(sys.base_prefix):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.access(candidate, os.X_OK) and world_readable(candidate):
            return candidate
    return sys.executable


def env_dir(base: str | None = None) -> Path:
    """One environment per package set and base interpreter: as root under
    /var/cache/asyncbench, else under the user's cache."""
    from ...datadir import cache_root

    base = base or base_python()
    tag = hashlib.sha256(" ".join((*PACKAGES, os.path.realpath(base))).encode()).hexdigest()[:12]
    root = SYSTEM_CACHE if os.geteuid() == 0 else cache_root()
    return root / "sandbox-envs" / f"privateeval-{tag}"


def release_python() -> str:
    """The pinned environment's interpreter, built once (a lock keeps two runs from
    building it at the same time; a half-built one is rebuilt)."""
    base = base_python()
    root = env_dir(base)
    python = root / "bin" / "python"
    ready = root / ".ready"
    if ready.is_file() and python.exists():
        return str(python)
    old = os.umask(0o022)  # readable by the sandbox's uid
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        with open(root.parent / f"{root.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if ready.is_file() and python.exists():
                return str(python)
            shutil.rmtree(root, ignore_errors=True)
            try:
                _build(base, root, python)
            except (OSError, subprocess.SubprocessError) as exc:
                shutil.rmtree(root, ignore_errors=True)
                detail = getattr(exc, "stderr", None) or str(exc)
                last = (detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)).strip()
                last = last.splitlines()[-1] if last else type(exc).__name__
                raise UserError(f"cannot build PrivateEval's environment ({', '.join(PACKAGES)}) in {root}: {last}; "
                                "pass --sandbox-python PATH (an interpreter with those packages) or "
                                "--sandbox-own-python to use asyncbench's own") from None
            ready.write_text(" ".join(PACKAGES) + "\n")
    finally:
        os.umask(old)
    return str(python)


def _build(base: str, root: Path, python: Path) -> None:
    uv = shutil.which("uv")

    def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
        subprocess.run(cmd, check=True, capture_output=True, timeout=900, env=env)

    if uv:
        run([uv, "venv", "--python", base, str(root)])
        run([uv, "pip", "install", "--python", str(python), *PACKAGES])
    else:
        run([base, "-m", "venv", str(root)])
        run([str(python), "-m", "pip", "install", "-q", *PACKAGES], dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    run([str(python), "-c", PROBE_IMPORTS])
