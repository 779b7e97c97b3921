"""BAMBOO PrivateEval's interpreter: the libraries its problems were written for.

The NumpyEval and PandasEval problems use APIs that numpy 1.24 and pandas 2 removed
(`np.float`, `ndarray.tostring`, `DataFrame.append`, ...). Run in today's libraries,
canonical solutions fail for that reason alone (102 of 123 pass here); with numpy 1.23.5
and pandas 1.5.3, 112 pass — every row whose release solution is correct
(benchmarks/bamboo_private_eval.md). So PrivateEval runs, by default, in a pinned virtual
environment built on first use under the cache (`uv` when installed, else `venv` + pip),
and the release's 3-second limit applies. `--sandbox-python PATH` names another
interpreter; `--sandbox-own-python` runs asyncbench's own, and run.json says which.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .errors import UserError

# pyarrow carries pandas frames between the sandbox and the checker (sandbox_wire.py)
PACKAGES = ("numpy==1.23.5", "pandas==1.5.3", "pyarrow==14.0.2")
RELEASE_TIMEOUT_S = 3.0


def env_dir() -> Path:
    """One environment per package set and Python version, under the cache."""
    from .datadir import cache_root

    tag = hashlib.sha256(" ".join((*PACKAGES, sys.version.split()[0])).encode()).hexdigest()[:12]
    return cache_root() / "sandbox-envs" / f"privateeval-{tag}"


def release_python() -> str:
    """The pinned environment's interpreter, built once (a lock keeps two runs from
    building it at the same time; a half-built one is rebuilt)."""
    root = env_dir()
    python = root / "bin" / "python"
    ready = root / ".ready"
    if ready.is_file() and python.exists():
        return str(python)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.is_file() and python.exists():
            return str(python)
        shutil.rmtree(root, ignore_errors=True)
        try:
            _build(root, python)
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(root, ignore_errors=True)
            detail = getattr(exc, "stderr", None) or str(exc)
            last = (detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)).strip()
            last = last.splitlines()[-1] if last else type(exc).__name__
            raise UserError(f"cannot build PrivateEval's environment ({', '.join(PACKAGES)}) in {root}: {last}; "
                            "pass --sandbox-python PATH (an interpreter with those packages) or --sandbox-own-python "
                            "to use asyncbench's own") from None
        ready.write_text(" ".join(PACKAGES) + "\n")
    return str(python)


def _build(root: Path, python: Path) -> None:
    uv = shutil.which("uv")
    run = {"check": True, "capture_output": True, "timeout": 900}
    if uv:
        subprocess.run([uv, "venv", "--python", sys.executable, str(root)], **run)  # type: ignore[call-overload]
        subprocess.run([uv, "pip", "install", "--python", str(python), *PACKAGES], **run)  # type: ignore[call-overload]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(root)], **run)  # type: ignore[call-overload]
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], env=env, **run)  # type: ignore[call-overload]
    subprocess.run([str(python), "-c", "import numpy, pandas, pyarrow"], **run)  # type: ignore[call-overload]
