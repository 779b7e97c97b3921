"""The `mountns` sandbox: a fresh root for model code, built as root without bubblewrap.

Run as root by `unshare --mount --net --pid --ipc --uts --kill-child` (util-linux), so
this process is PID 1 of new namespaces. It mounts a small tmpfs as the new root and
binds into it, read-only, only what the interpreter needs (its prefixes, /usr and the
library directories, a few /etc files); the sample's working directory, /tmp and
/dev/shm are size- and inode-bounded tmpfs mounts; /dev holds null, zero, random and
urandom; /proc is a new one showing only this PID namespace. Then it pivots into the new
root, detaches the old one, makes the root read-only, forks the program as an
unprivileged uid with no capabilities and `no_new_privs`, and waits for it. When the
program ends (or this process is killed, as `unshare --kill-child` does when the
checker goes) the kernel kills everything left in the PID namespace: a `setsid` daemon
dies with its sample.

It is passed to `python -I -c` as source text (like sandbox_wire.py) with one JSON
argument; any failure to build the root is reported on stderr and exit status 125, and
the checker reports it as a sandbox failure, not as the program's.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
START_FAILED = 125
DEVICES = ("null", "zero", "full", "random", "urandom")

libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def raw(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    if libc.mount(raw(source), raw(target), raw(fstype), ctypes.c_ulong(flags), raw(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _bind_ro(path: str, root: str) -> None:
    """`path` at the same place under `root`, read-only (a symlink is recreated, and
    its target must be bound too)."""
    target = root + path
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if os.path.islink(path):
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.exists(target):
        open(target, "a").close()
    _mount(path, target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _tmpfs(target: str, cfg: dict[str, Any], mode: str, owner: int | None = None) -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    opts = f"size={cfg['tmpfs_bytes']},nr_inodes={cfg['max_files']},mode={mode}"
    if owner is not None:
        opts += f",uid={owner},gid={owner}"
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, opts)


def build_root(cfg: dict[str, Any]) -> None:
    """Mount the new root at cfg["root"] and pivot into it."""
    root, uid = cfg["root"], cfg["uid"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    # the private /tmp and /dev/shm first, the interpreter's binds over them: a checkout
    # (its venv) under /tmp stays visible inside (its tests once all skipped there)
    _tmpfs(root + "/tmp", cfg, "1777")
    _tmpfs(root + "/dev/shm", cfg, "1777")
    for path in cfg["binds"]:  # parents first (the caller sorts them)
        if os.path.lexists(path):
            _bind_ro(path, root)
    work = root + cfg["work"]
    _tmpfs(work, cfg, "700", owner=uid)
    with open(cfg["program"], "rb") as src, open(work + "/program.py", "wb") as dst:
        dst.write(src.read())
    os.chown(work + "/program.py", uid, uid)
    for name in DEVICES:
        _bind_ro("/dev/" + name, root)
        # read-only applies to the mount, not to writes into /dev/null: rebind it writable
        _mount(None, root + "/dev/" + name, None, MS_BIND | MS_REMOUNT | MS_NOSUID)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None or libc.syscall(number, b".", b".") != 0:
        raise OSError(ctypes.get_errno(), "pivot_root failed")
    if libc.umount2(b".", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "detaching the old root failed")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def drop_privileges(uid: int) -> None:
    """An unprivileged uid with no groups; setresuid from root to a non-zero uid clears
    every capability, and no_new_privs keeps any from coming back."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    try:
        build_root(cfg)
    except OSError as exc:
        os.write(2, f"asyncbench sandbox: cannot build the mount namespace: {exc}\n".encode())
        os._exit(START_FAILED)
    child = os.fork()
    if child == 0:
        try:
            libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
            drop_privileges(cfg["uid"])
            os.chdir(cfg["work"])
            os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
        except OSError as exc:
            os.write(2, f"asyncbench sandbox: cannot start the program: {exc}\n".encode())
        os._exit(START_FAILED)
    for fd in (0, 1):  # the program's pipes are its own: EOF reaches the checker when it ends
        os.close(fd)
    while True:  # PID 1: reap orphans until the program itself ends
        pid, status = os.wait()
        if pid == child:
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


if __name__ == "__main__":
    main()
