"""What a run reports: the summary written to run.json and stored with the run, the
dry-run estimate, and the stored (credential-free) configuration."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .benchmarks.base import Scores
from .client import ModelClient
from .config import RunConfig
from .errors import UserError
from .percentiles import percentiles
from .pricing import PriceTable
from .providers.base import ModelSpec
from .runners.base import Runner
from .secrets import redact_json
from .types import Request, Sample, SampleResult


@dataclass
class PurposeTotals:
    requests: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    cost_saved_by_cache_usd: float = 0.0


@dataclass
class Accounts:
    """Per-purpose totals and latencies kept by the engine while a run goes."""

    totals: dict[str, PurposeTotals] = field(default_factory=dict)
    fresh_latencies: list[float] = field(default_factory=list)
    cached_latencies: list[float] = field(default_factory=list)


def public_config(cfg: RunConfig, spec: ModelSpec) -> dict[str, Any]:
    """The run's configuration as stored: no credentials exist in RunConfig by design."""
    out = asdict(cfg)
    out["resolved_model"] = spec.label
    out["endpoint_id"] = spec.endpoint_id
    redacted: dict[str, Any] = redact_json(out)  # URL user-info, keys echoed into paths...
    return redacted


def dry_run_summary(cfg: RunConfig, samples: list[Sample], requests: list[Request], client: ModelClient,
                     run_id: str, truncated: dict[str, int], max_input: int | None) -> dict[str, Any]:
    prompt_tokens = sum(client.count(r.text()) for r in requests)
    output_tokens = sum(r.max_tokens for r in requests)
    summary = {
        "run_id": run_id, "benchmark": cfg.benchmark, "model": client.spec.label, "dry_run": True,
        "n_samples": len(samples), "requests": len(requests),
        "estimated_prompt_tokens": prompt_tokens, "estimated_max_output_tokens": output_tokens,
        "estimated_cost_usd": round(client.price.estimate(prompt_tokens, output_tokens), 6),
        "token_counting": "tiktoken" if client.counter else "approx ceil(chars/4)",
        "max_input_tokens": max_input, "n_truncated": len(truncated),
    }
    return summary


def run_summary(cfg: RunConfig, run_id: str, spec: ModelSpec, samples: list[Sample], results: list[SampleResult],
             accounts: Accounts, runner: Runner, scores: Scores, prep_report: dict[str, Any], t_start: float,
             truncated: dict[str, int], max_input: int | None, max_input_source: str, prices: PriceTable,
             client: ModelClient) -> dict[str, Any]:
    wall = time.time() - t_start
    ev = accounts.totals.get("eval", PurposeTotals())
    stats = runner.stats()
    latencies = accounts.fresh_latencies or accounts.cached_latencies
    purposes = {k: asdict(v) for k, v in accounts.totals.items()}
    total_cost = sum(v.cost_usd for v in accounts.totals.values())
    return {
        "run_id": run_id,
        "benchmark": cfg.benchmark,
        "model": spec.label,
        "endpoint": spec.endpoint_id,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        "wall_s": round(wall, 3),
        "n_samples": len(samples),
        "n_completed": sum(r.status == "ok" for r in results),
        "n_failed": sum(r.status == "failed" for r in results),
        "n_skipped_budget": sum(r.status == "skipped" for r in results),
        "n_cached": ev.cached,
        "requests_sent": stats.requests_sent,
        "retries": stats.retries,
        "rate_limited": stats.rate_limited,
        "transient_errors": stats.transient_errors,
        "prompt_tokens": ev.prompt_tokens,
        "completion_tokens": ev.completion_tokens,
        "cached_prompt_tokens": ev.cached_prompt_tokens,
        "cost_usd": round(total_cost, 6),
        "cost_saved_by_cache_usd": round(sum(v.cost_saved_by_cache_usd for v in accounts.totals.values()), 6),
        "by_purpose": purposes,
        "prices_version": prices.version,
        "latency_ms": {**percentiles(latencies), "source": "requests" if accounts.fresh_latencies else "cache"},
        "throughput_rps": round(stats.requests_sent / wall, 2) if wall > 0 else None,
        "truncation": {"max_input_tokens": max_input, "source": max_input_source,
                       "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
        "endpoints": runner.endpoint_health(client),
        "backend": runner.describe(),
        "by_task_cost": _by_task_cost(results),
        "aborted": runner.aborted,
        "failures": [{"sample_id": r.sample_id, "error": r.error} for r in results if r.status == "failed"][:50],
        "prepare": prep_report,
        "scores": scores,
    }


def _by_task_cost(results: list[SampleResult]) -> dict[str, dict[str, Any]]:
    """Where the money and the time went: spend, tokens and latency per task."""
    out: dict[str, dict[str, Any]] = {}
    latencies: dict[str, list[float]] = {}
    for r in results:
        t = out.setdefault(r.task, {"samples": 0, "cost_usd": 0.0, "cached": 0, "prompt_tokens": 0,
                                    "completion_tokens": 0})
        t["samples"] += 1
        t["cached"] += int(r.cached)
        if not r.cached:
            t["cost_usd"] += r.cost_usd
            t["prompt_tokens"] += r.prompt_tokens
            t["completion_tokens"] += r.completion_tokens
            if r.latency_ms is not None:
                latencies.setdefault(r.task, []).append(r.latency_ms)
    for task, t in out.items():
        t["cost_usd"] = round(t["cost_usd"], 6)
        t["latency_ms"] = percentiles(latencies.get(task, []))
    return out


def out_dir(cfg: RunConfig, run_id: str) -> Path:
    """The run's output folder, made and test-written before any request is sent: an
    unwritable --out found after the work would lose the report of a paid-for run."""
    out = Path(cfg.out).expanduser() if cfg.out else Path("runs") / run_id
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".asyncbench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"cannot write the output folder {out}: {exc.strerror or exc}; "
                        "pass --out DIR in a writable place") from None
    return out


def write_out(cfg: RunConfig, summary: dict[str, Any]) -> None:
    out = out_dir(cfg, summary["run_id"])
    (out / "run.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=_json_default))
    summary["out_dir"] = str(out)


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
