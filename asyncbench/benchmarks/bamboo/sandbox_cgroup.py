"""One cgroup per PrivateEval sample: its memory and process limits hold for all its
processes together, and for the kernel memory they make the kernel hold (socket buffers).

Per-process rlimits are not a sample's limits: a program that forks through libc (ctypes,
past the audit hook) gets 2 GiB per process and 16 processes, and a socketpair's queued
bytes are kernel memory no RLIMIT_AS counts (an attacker held 4.5 GiB resident and 333 MB
of socket buffers in one sample). A memory cgroup charges every page of the sample's
processes and, with cgroup v2 and with v1's kmem accounting (on by default), its socket
buffers; a pids cgroup counts its tasks, root's included (root is exempt from
RLIMIT_NPROC).

Where one can be made (`available()`, probed once by making and removing one):

- **v2** (a pure cgroup2 mount at /sys/fs/cgroup): a child of our own cgroup with
  `memory.max`, `memory.swap.max` 0 and `pids.max` when ours hands the `memory` and
  `pids` controllers down (`cgroup.subtree_control`; the root cgroup, where we enable
  them); else, as v2 forbids controllers below a cgroup that holds processes (ours
  does, and we never move ourselves to make room), a sibling of ours when our parent
  hands them down (as root; systemd's slices do). Not tried on the hybrid machine this
  was written on (its cgroup2 mount holds no controller): v1 is what ran there.
- **v1** (the `memory` and `pids` hierarchies mounted writable, as on hybrid machines run
  as root): a child of our cgroup in each, `memory.limit_in_bytes` (and
  `memory.memsw.limit_in_bytes`, so swap does not extend it) and `pids.max`.

Nothing here needs a system call a container's seccomp filter may deny: mkdir, write,
rmdir and kill on cgroupfs files. Any failure means "no cgroup here" (the sandbox then
forbids forks: sandbox.py), never a failed run. A sample's processes join its cgroup
themselves, by a shell that writes `0` to each `cgroup.procs` before it execs the
sandbox, so everything they start is inside; `SampleCgroup.close()` kills what is left
and removes the directories, also after a timeout, and `available()` removes those a
killed run of ours left behind.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "asyncbench-sample-"
# `sh -c JOIN sh PROCS... -- CMD...`: join each cgroup, then become CMD (exit 125, the
# sandbox's "could not start", when a join fails).
JOIN = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
OFF_ENV = "ASYNCBENCH_SANDBOX_CGROUP"


@dataclass(frozen=True)
class Cgroups:
    """Where samples' cgroups are made: `version` "v2", "v1" or "" (none; `why` says why)."""

    version: str
    parents: tuple[str, ...] = ()
    why: str = ""


def _own() -> dict[str, str]:
    """Our cgroup per controller ("" for the v2 hierarchy), from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="ascii") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _v2_parent(own: dict[str, str]) -> str:
    """Where v2 samples' cgroups go: below ours when it hands memory and pids down (or can:
    the root cgroup), else beside ours when our parent does (v2 forbids controllers below
    a cgroup that holds processes, as ours does; root may write the parent's procs)."""
    mine = ROOT / own.get("", "/").lstrip("/")
    wanted = {"memory", "pids"}
    if wanted <= set((mine / "cgroup.subtree_control").read_text().split()):
        return str(mine)
    try:
        (mine / "cgroup.subtree_control").write_text("+memory +pids")
        return str(mine)
    except OSError:
        pass
    if mine != ROOT and wanted <= set((mine.parent / "cgroup.subtree_control").read_text().split()):
        return str(mine.parent)
    raise OSError(f"the memory and pids controllers are not handed down to or beside {mine}")


def _locate() -> tuple[str, tuple[str, ...]]:
    own = _own()
    if (ROOT / "cgroup.controllers").is_file():
        return "v2", (_v2_parent(own),)
    if "memory" in own and "pids" in own and (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
        return "v1", (str(ROOT / "memory" / own["memory"].lstrip("/")), str(ROOT / "pids" / own["pids"].lstrip("/")))
    raise OSError("neither a cgroup2 mount with memory and pids nor cgroup v1's memory and pids hierarchies")


@functools.lru_cache(maxsize=1)
def available() -> Cgroups:
    """Whether this process can make a sample's cgroup here (made and removed once to
    know); `ASYNCBENCH_SANDBOX_CGROUP=0` says no (the tests use it to run the fallback)."""
    if os.environ.get(OFF_ENV, "").strip() == "0":
        return Cgroups("", why=f"{OFF_ENV}=0")
    try:
        version, parents = _locate()
        where = Cgroups(version, parents)
        _remove_stale(where)
        SampleCgroup(where, 64 << 20, 4).close()
        return where
    except OSError as exc:
        return Cgroups("", why=f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else ""))


def _remove_stale(where: Cgroups) -> None:
    """Cgroups of ours whose run was killed before it removed them."""
    for parent in where.parents:
        for entry in Path(parent).glob(PREFIX + "*"):
            pid = entry.name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                _empty_and_remove(entry)


def _empty_and_remove(path: Path) -> None:
    for _ in range(500):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy: processes still in it
            pass
        try:
            (path / "cgroup.kill").write_text("1")  # v2 (5.14+): every process, atomically
        except OSError:
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.01)


class SampleCgroup:
    """One sample's cgroup (a directory per hierarchy): at most `memory_bytes` of memory,
    kernel memory included, and `tasks` tasks (threads count) for all its processes."""

    def __init__(self, where: Cgroups, memory_bytes: int, tasks: int) -> None:
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        self.version = where.version
        self.dirs: list[Path] = []
        try:
            for parent in where.parents:
                path = Path(parent) / name
                path.mkdir()
                self.dirs.append(path)
            self._limit(memory_bytes, tasks)
        except OSError:
            self.close()
            raise

    def _limit(self, memory_bytes: int, tasks: int) -> None:
        if self.version == "v2":
            (self.dirs[0] / "memory.max").write_text(str(memory_bytes))
            swap = self.dirs[0] / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (self.dirs[0] / "pids.max").write_text(str(tasks))
            return
        memory, pids = self.dirs
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(memory_bytes))
        (pids / "pids.max").write_text(str(tasks))

    @property
    def procs(self) -> list[str]:
        """The files a process writes `0` to, to join."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def peak_bytes(self) -> int | None:
        """The most memory the sample held at once, kernel memory included (None where
        this kernel does not keep it)."""
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text())
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        """Kill what is still in it and remove it."""
        for path in reversed(self.dirs):
            _empty_and_remove(path)
        self.dirs = []
