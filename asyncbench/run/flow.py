"""A run from its configuration: plan it (plan.py), then execute the plan (execute.py) or,
for `--dry-run`, price it. The only place above planning that holds both, so nothing
below planning receives the RunConfig."""

from __future__ import annotations

from ..config import RunConfig
from ..run_summary import DryRunSummary, RunSummary
from .execute import execute
from .plan import dry_run, plan


async def run(cfg: RunConfig, sim_url: str | None = None) -> RunSummary | DryRunSummary:
    """Plan the config, then execute the plan (or, for --dry-run, price it); what the plan
    opened is closed however it ends. `sim_url`: the simulator the command started for
    `--model sim` (config.uses_sim), which the run path never starts itself."""
    p = await plan(cfg, sim_url)
    try:
        return await dry_run(p) if cfg.mode.dry_run else await execute(p)
    finally:
        await p.aclose()
