"""Connecting the Ray backend's driver to a cluster: `ray.init` with a deadline, and a
127.0.0.1 address kept on loopback (Ray rewrites it to the host's outside address
otherwise). Nothing here may wait on Ray for ever: a dead or silent head is one line
naming its address."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ..errors import UserError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# A running cluster answers `ray.init` in a second or two; Ray's own wait for a silent
# head is a minute or more (printing C++ warnings meanwhile). A new local instance takes
# the caller's longer deadline: starting one is 20-40 s on a loaded 2-core machine.
RUNNING_CLUSTER_TIMEOUT_S = 15.0


def cluster_address(flag: str | None) -> str | None:
    """The cluster to join, as Ray's own tools choose it: --ray-address, else RAY_ADDRESS,
    else none (a new local instance). Ray's `ray.init()` reads RAY_ADDRESS by itself; read
    here too, so that the deadline, the loopback rule and every message name the cluster
    a run really joins (an unset flag once meant "start one", while Ray went to the
    variable's address and hung for a minute)."""
    return flag or os.environ.get("RAY_ADDRESS") or None


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install 'asyncbench[ray]'") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """HOST and PORT of a plain `HOST:PORT` address (None for auto, ray://...)."""
    if address == "auto" or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UserError(f"--ray-address {address!r} is not HOST:PORT; use auto, HOST:PORT or ray://HOST:10001")
    return host.strip("[]"), int(port)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect(ray: ModuleType, address: str | None, timeout_s: float,
            log: Path = Path(tempfile.gettempdir()) / "asyncbench-ray-connect.log") -> threading.Event:
    """`ray.init` with a deadline. A loopback address stays loopback (Ray otherwise
    rewrites 127.0.0.1 to the host's other address, where a loopback cluster does not
    listen); a port that refuses is said at once; an answer that never comes ends after
    `timeout_s` (15 s at most for a running cluster), the `ray.init` call left behind in
    a daemon thread; what Ray prints meanwhile goes to `log`.

    The thread that called `ray.init` stays alive until the returned event is set: the
    processes of a local instance it started die with it (parent-death signal)."""
    started = time.monotonic()
    where = address or "a new local instance on 127.0.0.1"
    if address:
        timeout_s = min(timeout_s, RUNNING_CLUSTER_TIMEOUT_S)
    target = _host_port(address) if address else None
    if target is not None:
        try:
            socket.create_connection(target, timeout=min(5.0, timeout_s)).close()
        except OSError as exc:
            raise UserError(f"cannot reach Ray at {address}: {first_line(exc)}; check {_named(address)} "
                            "(the head's GCS port, `ray start --head --port`)") from None
    if address is None or (target is not None and target[0] in LOOPBACK and not _also_outside(ray, target[1])):
        _keep_loopback(ray)
    # Ray's own noise stays off the terminal: its C++ core logs warnings to stderr (one
    # every 5 s while a head is silent) unless told a level, its Python side at WARNING;
    # what goes wrong is said in one line here. A user's own level is kept.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    kwargs: dict[str, object] = {"logging_level": logging.ERROR, "log_to_driver": False,
                              "include_dashboard": False}
    if address:
        kwargs["address"] = address
    else:  # Ray's own default joins the cluster `ray start` last wrote to /tmp/ray: not ours
        kwargs["address"] = "local"
        kwargs["_node_ip_address"] = "127.0.0.1"
    failure: list[BaseException] = []
    connected, release = threading.Event(), threading.Event()

    def init() -> None:
        try:
            ray.init(**kwargs)
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
            return
        connected.set()
        release.wait()

    thread = threading.Thread(target=init, name="asyncbench-ray-init", daemon=True)
    with _stderr_to(log) as log_path:
        thread.start()
        while not connected.wait(0.05) and thread.is_alive() and time.monotonic() < started + timeout_s:
            pass
    if not connected.is_set() and thread.is_alive():
        raise UserError(f"no answer from Ray at {where} within {timeout_s:g} s (is its head running and "
                        f"reachable from this machine?); check {_named(address)}; Ray's own messages: {log_path}")
    if failure:
        raise UserError(f"cannot connect to Ray at {where}: {first_line(failure[0])}; "
                        f"check {_named(address)} (auto | HOST:PORT | ray://HOST:10001)")
    return release


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[Path]:
    """File descriptor 2 pointed at `path` meanwhile: Ray's C++ core writes its warnings
    there directly (a silent head: one every 5 s, before any log level of ours is read),
    so they go to the file the one-line error names instead of the terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield path
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _named(address: str | None) -> str:
    """Where the address came from, for the message: the flag, or Ray's variable."""
    from_env = address is not None and address == os.environ.get("RAY_ADDRESS")
    return "RAY_ADDRESS (or pass --ray-address)" if from_env else "--ray-address"


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2.0).close()
    except OSError:
        return False
    return True


def _also_outside(ray: ModuleType, port: int) -> bool:
    """Whether the cluster given as 127.0.0.1:PORT also listens on the host's outside
    address: a cluster started without Ray's one-host switch, whose nodes registered
    under that address, where Ray's own rewrite of 127.0.0.1 is right."""
    outside = ray.util.get_node_ip_address()
    return outside not in LOOPBACK and _reachable(outside, port)


def _keep_loopback(ray: ModuleType) -> None:
    """Ray rewrites 127.0.0.1 (as a cluster's or this node's address) to the host's
    outside address unless its one-host switch is set: set it, before `import ray` in a
    fresh worker process, and in this already imported one."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
