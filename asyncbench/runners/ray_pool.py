"""The driver's side of the long-lived Ray actors (ray_actors.py): their names, and the
attachments a driver renews while it runs.

Workers and limiter hosts are named detached actors in the "asyncbench" namespace, one
per (node, worker slot) and per node, under a digest of this package's source: every
run of the same code on a running cluster finds and reuses them (`get_if_exists`),
paying a worker's start (a Ray process, the engine's imports: seconds to tens of
seconds on a loaded machine) once, not per run; a run of other code gets its own. The
driver attaches to each actor it uses with its own id and renews every `ttl_s / 4` from
a daemon thread (its event loop may be busy for a while); detaching at its end drops
what it opened there, the API key with it.
"""

from __future__ import annotations

import hashlib
import threading
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Protocol

NAMESPACE = "asyncbench"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of every module of this package, as this driver imports it: actors made
    by other code (another version, an edited checkout) are never reused."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def worker_name(node: str, slot: int, tag: str = "") -> str:
    return f"asyncbench-gen{tag}-{code_digest()}-{node[:12]}-{slot}"


def limiter_name(node: str, tag: str = "") -> str:
    return f"asyncbench-limits{tag}-{code_digest()}-{node[:12]}"


class _Remote(Protocol):
    def remote(self, driver: str, /) -> object: ...


class Attachable(Protocol):
    """A long-lived actor's handle, as the attachments call it."""

    @property
    def renew(self) -> _Remote: ...

    @property
    def detach(self) -> _Remote: ...


class Attachments:
    """This driver's attachments to long-lived actors, renewed from a daemon thread."""

    def __init__(self, ray: ModuleType, driver: str, ttl_s: float) -> None:
        self.ray = ray
        self.driver = driver
        self.ttl_s = ttl_s
        self.handles: dict[str, Attachable] = {}  # by the handle's repr, which names the actor
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, handle: Attachable) -> None:
        self.handles[repr(handle)] = handle
        if self._thread is None:
            self._thread = threading.Thread(target=self._renew, name="asyncbench-ray-renew", daemon=True)
            self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            for handle in list(self.handles.values()):
                handle.renew.remote(self.driver)

    def release(self, timeout_s: float) -> list[tuple[Attachable, bool | BaseException]]:
        """Detach from every actor (all at once, `timeout_s` at most): each handle with
        whether it is now closing, or the error that says it or the cluster is gone."""
        self._stop.set()
        handles = list(self.handles.values())
        self.handles.clear()
        refs = [h.detach.remote(self.driver) for h in handles]
        out: list[tuple[Attachable, bool | BaseException]] = []
        for handle, ref in zip(handles, refs):
            try:
                out.append((handle, bool(self.ray.get(ref, timeout=timeout_s))))
            except self.ray.exceptions.RayError as exc:
                out.append((handle, exc))
        return out
