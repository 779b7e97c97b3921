"""Runners (see base.py): `local` (this process) and `ray` (Ray workers; Ray is imported
only when chosen, as it is an optional extra)."""

from __future__ import annotations

from ..config import RunConfig
from ..errors import UserError
from .base import Runner
from .local import LocalRunner


def make_runner(cfg: RunConfig) -> Runner:
    """The runner the config names."""
    if cfg.backend == "local":
        return LocalRunner(cfg.timeout_s, cfg.max_attempts)
    if cfg.backend != "ray":
        raise UserError(f"unknown backend {cfg.backend!r}; use local or ray")
    from .ray import RayRunner

    return RayRunner(cfg.ray_address, cfg.ray_workers, cfg.concurrency, cfg.timeout_s, cfg.max_attempts)


__all__ = ["LocalRunner", "Runner", "make_runner"]
