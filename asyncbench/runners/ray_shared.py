"""One rate limit shared by several drivers (`--ray-shared-limiter NAME`): several
`asyncbench run` processes, on one machine or several, connected to the same Ray
cluster and sending to the same endpoint with the same key, lease from one limiter.

The limiter of an endpoint group is then a named detached actor in the "asyncbench"
namespace, on the head node, made by whichever driver comes first (`get_if_exists`), and found by the
others under the same name: NAME plus a digest of the model, the base URLs and a digest
of the API key (never the key itself), so that one NAME can serve an evaluated model and
its judge without mixing their budgets, and runs with another key get another limiter.
Every driver attaches, renews its attachment from a daemon thread, and detaches at its
end; the last to detach kills the actor, and a driver that died without detaching
expires after TTL_S (see `LimiterActor`). A driver asking for other --rpm/--tpm than the
shared limiter holds is refused in one line before it sends anything.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from types import ModuleType
from typing import Any

import anyio

from ..errors import UserError
from ..providers import ModelSpec
from .ray_actors import TTL_S, limits_text
from .ray_connect import first_line
from .ray_pool import NAMESPACE, Attachments

PREFIX = "asyncbench-limiter-"
# On the head node: it lives as long as the cluster, not as the first driver's machine.
HEAD = "node:__internal_head__"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UserError(f"--ray-shared-limiter {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
    return name


def actor_name(name: str, spec: ModelSpec, api_key: str | None) -> str:
    """The limiter's actor name: NAME and a digest of what the provider's limit is
    attached to (model, endpoints, key); the key only as its own digest."""
    key = hashlib.sha256((api_key or "").encode()).hexdigest()
    what = json.dumps([spec.label, sorted(spec.base_urls), spec.endpoint_id, key])
    return f"{PREFIX}{name}-{hashlib.sha256(what.encode()).hexdigest()[:16]}"


class SharedLimiters:
    """This driver's attachments to shared limiter actors, and the thread renewing them."""

    def __init__(self, ray: ModuleType, name: str, where: str, driver: str, ttl_s: float = TTL_S) -> None:
        self.ray = ray
        self.name = check_name(name)
        self.where = where
        self.ttl_s = ttl_s
        self.driver = driver
        self.attached = Attachments(ray, driver, ttl_s)

    async def attach(self, cls: Any, spec: ModelSpec, api_key: str | None, rpm: float | None, tpm: float | None,
                     timeout_s: float) -> Any:
        """The shared limiter of this endpoint group, made if no driver has made it yet."""
        name = actor_name(self.name, spec, api_key)
        deadline = time.monotonic() + timeout_s
        while True:
            handle = cls.options(name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                                 resources={HEAD: 0.001}).remote(self.ttl_s, self.ttl_s, (rpm, tpm))
            try:
                with anyio.fail_after(max(0.1, deadline - time.monotonic())):
                    why = await handle.attach.remote(self.driver, rpm, tpm)
            except TimeoutError:
                raise UserError(f"Ray at {self.where}: the shared limiter {self.name!r} did not answer within "
                                f"{timeout_s:g} s") from None
            except self.ray.exceptions.RayActorError:
                why = "closing"  # killed by its last user between lookup and attach: make a new one
            if not why:
                break
            if why != "closing":
                raise UserError(f"--ray-shared-limiter {self.name}: the runs sharing it use other limits (it {why}); "
                                f"this run asks {limits_text(rpm, tpm)}: give every run the same limits, or another name")
            if time.monotonic() > deadline:
                raise UserError(f"Ray at {self.where}: the shared limiter {self.name!r} kept closing for {timeout_s:g} s")
            await anyio.sleep(0.1)
        self.attached.add(handle)
        return handle

    def release(self, timeout_s: float) -> None:
        """Detach from every shared limiter; kill the ones this driver was the last user of."""
        for handle, closing in self.attached.release(timeout_s):
            if closing is True:
                self.ray.kill(handle, no_restart=True)
            elif closing is not False:  # gone already, or the cluster is: it expires by itself
                print(f"asyncbench: shared limiter {self.name!r} not released ({first_line(closing)}); "
                      f"it expires within {2 * self.ttl_s:g} s", file=sys.stderr, flush=True)
