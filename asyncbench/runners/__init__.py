"""Runners (see base.py): `local` (this process), `ray` (Ray workers; Ray is imported
only when chosen, as it is an optional extra) and `batch` (the provider's batch API)."""

from __future__ import annotations

from ..config import RunConfig
from ..errors import UserError
from .base import Runner
from .local import LocalRunner


def make_runner(cfg: RunConfig) -> Runner:
    """The runner the config names."""
    if cfg.batch:
        if cfg.backend != "local":
            raise UserError("--batch sends through the provider's batch API: it takes no --backend")
        from .batch import BatchRunner

        return BatchRunner(cfg.timeout_s, cfg.max_attempts, wait=not cfg.no_wait, fallback=cfg.batch_fallback,
                           progress=cfg.progress)
    if cfg.backend == "local":
        return LocalRunner(cfg.timeout_s, cfg.max_attempts)
    if cfg.backend != "ray":
        raise UserError(f"unknown backend {cfg.backend!r}; use local or ray")
    from .ray import RayRunner

    return RayRunner(cfg.ray_address, cfg.ray_workers, cfg.concurrency, cfg.timeout_s, cfg.max_attempts)


__all__ = ["LocalRunner", "Runner", "make_runner"]
