"""Connecting the Ray backend's driver to a cluster: `ray.init` with a deadline, and a
127.0.0.1 address kept on loopback (Ray rewrites it to the host's outside address
otherwise). Nothing here may wait on Ray for ever: a dead or silent head is one line
naming its address."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from ..errors import UserError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def import_ray() -> Any:
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


def connect(ray: Any, address: str | None, timeout_s: float) -> threading.Event:
    """`ray.init` with a deadline. A loopback address stays loopback (Ray otherwise
    rewrites 127.0.0.1 to the host's other address, where a loopback cluster does not
    listen); a port that refuses is said at once; an answer that never comes ends after
    `timeout_s`, the `ray.init` call left behind in a daemon thread.

    The thread that called `ray.init` stays alive until the returned event is set: the
    processes of a local instance it started die with it (parent-death signal)."""
    started = time.monotonic()
    where = address or "a new local instance on 127.0.0.1"
    target = _host_port(address) if address else None
    if target is not None:
        try:
            socket.create_connection(target, timeout=min(5.0, timeout_s)).close()
        except OSError as exc:
            raise UserError(f"cannot reach Ray at {address}: {first_line(exc)}; check --ray-address "
                            "(the head's GCS port, `ray start --head --port`)") from None
    if address is None or (target is not None and target[0] in LOOPBACK and not _also_outside(ray, target[1])):
        _keep_loopback(ray)
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                              "include_dashboard": False}
    if address:
        kwargs["address"] = address
    else:
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
    thread.start()
    while not connected.wait(0.05) and thread.is_alive() and time.monotonic() < started + timeout_s:
        pass
    if not connected.is_set() and thread.is_alive():
        raise UserError(f"no answer from Ray at {where} within {timeout_s:g} s (is its head running and "
                        "reachable from this machine?); check --ray-address")
    if failure:
        raise UserError(f"cannot connect to Ray at {where}: {first_line(failure[0])}; "
                        "check --ray-address (auto | HOST:PORT | ray://HOST:10001)")
    return release


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2.0).close()
    except OSError:
        return False
    return True


def _also_outside(ray: Any, port: int) -> bool:
    """Whether the cluster given as 127.0.0.1:PORT also listens on the host's outside
    address: a cluster started without Ray's one-host switch, whose nodes registered
    under that address, where Ray's own rewrite of 127.0.0.1 is right."""
    outside = ray.util.get_node_ip_address()
    return outside not in LOOPBACK and _reachable(outside, port)


def _keep_loopback(ray: Any) -> None:
    """Ray rewrites 127.0.0.1 (as a cluster's or this node's address) to the host's
    outside address unless its one-host switch is set: set it, before `import ray` in a
    fresh worker process, and in this already imported one."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
