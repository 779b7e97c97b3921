"""Runners (see base.py): `local` (this process), `ray` (Ray workers; Ray is imported
only when chosen, as it is an optional extra) and `batch` (the provider's batch API).
Planning (plan.runner_for) picks one from the run's configuration."""

from __future__ import annotations

from .base import Runner
from .local import LocalRunner

__all__ = ["LocalRunner", "Runner"]
