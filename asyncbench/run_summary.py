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
from .ledger import Account, SampleEntry, hint_for, next_step, partial_label
from .percentiles import percentiles
from .pricing import PriceTable
from .providers.base import ModelSpec
from .runners.base import Runner
from .secrets import redact_json
from .store.stored_plan import StoredPlan
from .types import Request, Sample


@dataclass
class Latencies:
    """Latencies of this invocation's answers: fresh requests, and cache hits (a fully
    cached re-run shows the latencies measured when the answers were paid)."""

    fresh: list[float] = field(default_factory=list)
    cached: list[float] = field(default_factory=list)


def public_config(cfg: RunConfig, spec: ModelSpec) -> dict[str, Any]:
    """The run's configuration as stored: no credentials exist in RunConfig by design."""
    out = asdict(cfg)
    out["resolved_model"] = spec.label
    out["endpoint_id"] = spec.endpoint_id
    redacted: dict[str, Any] = redact_json(out)  # URL user-info, keys echoed into paths...
    return redacted


def dry_run_summary(cfg: RunConfig, samples: list[Sample], requests: list[Request], client: ModelClient,
                    judge: ModelClient | None, run_id: str, truncated: dict[str, int], limits: dict[str, Any],
                    stored: StoredPlan | None, planned: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    """What a run would send and cost, sending nothing, each figure labelled "exact" or
    "upper bound". Answers already in the cache are free. Judge and prior-knowledge calls
    are the benchmark's upper bound, unless this run is stored complete with every such
    call in the cache: a re-run then makes the same calls (the same answers judged), free,
    and leaves out the samples its prior-knowledge filter left out. A model without a
    price says "unpriced" instead of $0."""
    cached = stored.cached if stored is not None else set()
    reuse = stored is not None and stored.complete
    free = {p for p, (n, hit) in (stored.calls if stored is not None and reuse else {}).items() if n == hit}
    skip = stored.excluded if stored is not None and "prior" in free else set()
    asked = [(s, r) for s, r in zip(samples, requests) if s.id not in skip]
    hits = [r for _, r in asked if r.key() in cached]
    to_send = [r for _, r in asked if r.key() not in cached]
    prompt_tokens = sum(client.count(r.text()) for r in to_send)
    output_tokens = sum(r.max_tokens for r in to_send)
    purposes: dict[str, dict[str, Any]] = {"eval": {
        "requests": len(to_send), "prompt_tokens": prompt_tokens, "max_output_tokens": output_tokens,
        "cost_usd": _estimate(client, prompt_tokens, output_tokens),
        "estimate": "exact" if not to_send else "upper bound",  # output priced at each request's max tokens
    }}
    for purpose, (n, tokens_in, tokens_out) in planned.items():
        target = judge if purpose == "judge" and judge is not None else client
        if purpose in free and (purpose == "prior" or not to_send):
            purposes[purpose] = {"requests": 0, "prompt_tokens": 0, "max_output_tokens": 0, "cost_usd": 0.0,
                                 "cached": stored.calls[purpose][0] if stored is not None else 0, "estimate": "exact"}
        else:
            purposes[purpose] = {"requests": n, "prompt_tokens": tokens_in, "max_output_tokens": tokens_out,
                                 "cost_usd": _estimate(target, tokens_in, tokens_out), "estimate": "upper bound"}
    purposes["eval"]["cost_usd_by_mode"] = _cost_by_mode(client, to_send, prompt_tokens, output_tokens)
    costs = [p["cost_usd"] for p in purposes.values()]
    total: float | str = "unpriced" if "unpriced" in costs else round(sum(float(c) for c in costs), 6)
    exact = all(p["estimate"] == "exact" for p in purposes.values())
    return {
        "run_id": run_id, "benchmark": cfg.benchmark, "model": client.spec.label, "dry_run": True,
        "n_samples": len(samples), "requests": len(requests), "cached": len(hits), "to_send": len(to_send),
        "left_out_as_stored": len(requests) - len(asked),  # the stored run's prior-knowledge exclusions
        "cache_checked": stored is not None,
        "estimated_prompt_tokens": prompt_tokens, "estimated_max_output_tokens": output_tokens,
        "estimated_cost_usd": total, "estimate": "exact" if exact else "upper bound", "by_purpose": purposes,
        "token_counting": "tiktoken" if client.counter else "approx ceil(chars/4)",
        "truncation": {**limits, "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
    }


def _cost_by_mode(client: ModelClient, to_send: list[Request], prompt_tokens: int,
                  output_tokens: int) -> dict[str, Any]:
    """The eval requests' cost at list price, through the batch API (--batch), with the
    prompt-cache reads and writes expected from their shared prefixes (--prompt-cache
    auto: each group's first request writes the prefix, the others read it), and both."""
    plan = client.plan_prefixes(to_send)
    price = client.price
    read, written = plan.expected_read_tokens, plan.expected_write_tokens
    write_price = price.input if price.cache_write is None else price.cache_write
    listed = price.estimate(prompt_tokens, output_tokens)
    cached = (max(0, prompt_tokens - read - written) * price.input + read * price.cached_input
              + written * write_price + output_tokens * price.output) / 1e6
    modes: dict[str, Any] = {"list": listed, "batch": listed * price.batch, "prompt_cache": cached,
                             "batch_prompt_cache": cached * price.batch}
    if not price.priced:
        modes = dict.fromkeys(modes, "unpriced")
    else:
        modes = {k: round(v, 6) for k, v in modes.items()}
    return {**modes, "expected_cache_read_tokens": read, "expected_cache_write_tokens": written,
            "shared_prefix_groups": len(plan.groups), "requests_in_groups": plan.marked}


def _estimate(client: ModelClient, prompt_tokens: int, output_tokens: int) -> float | str:
    return round(client.price.estimate(prompt_tokens, output_tokens), 6) if client.price.priced else "unpriced"


def excluded_block(excluded: list[SampleEntry], listed: int = 50) -> dict[str, Any]:
    """The excluded samples with their reasons: counted by reason, the first `listed` named."""
    by_reason: dict[str, int] = {}
    for e in excluded:
        by_reason[e.error or "-"] = by_reason.get(e.error or "-", 0) + 1
    return {"n": len(excluded), "by_reason": by_reason,
            "samples": [{"sample_id": e.sample_id, "task": e.task, "reason": e.error} for e in excluded[:listed]]}


def _grouped(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for f in failures:
        group = groups.setdefault((f["status"], f["error"] or ""), {"status": f["status"], "error": f["error"],
                                                                   "n": 0, "sample_ids": []})
        group["n"] += 1
        if len(group["sample_ids"]) < 3:
            group["sample_ids"].append(f["sample_id"])
    return list(groups.values())


def run_summary(cfg: RunConfig, run_id: str, spec: ModelSpec, ledger: Account, unsettled: list[SampleEntry],
                latencies: Latencies, runner: Runner, scores: Scores, prep_report: dict[str, Any],
                truncated: dict[str, int], limits: dict[str, Any], prices: PriceTable,
                client: ModelClient, unpriced: list[str], excluded: list[SampleEntry] | None = None) -> dict[str, Any]:
    """run.json: the ledger's figures (ledger.account: samples by status, cost and tokens
    by purpose, by task, every invocation), then how this invocation went, then scores."""
    this = ledger["invocations"][-1]
    values = latencies.fresh or latencies.cached
    failures = [{"sample_id": e.sample_id, "task": e.task, "status": e.status, "error": e.error,
                 **({"hint": h} if (h := hint_for(e.status, e.error)) else {})}
                for e in unsettled]
    return {
        "run_id": run_id,
        "benchmark": cfg.benchmark,
        "model": spec.label,
        "endpoint": spec.endpoint_id,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(this["started_at"])),
        "wall_s": this["wall_s"],
        **ledger,
        "partial": partial_label(ledger["samples"]) or None,
        "this_invocation": this,
        "unpriced": unpriced,  # models whose cost is unknown: their dollars read 0
        "prices_version": prices.version,
        "latency_ms": {**percentiles(values), "source": "requests" if latencies.fresh else "cache"},
        "throughput_rps": round(this["requests"] / this["wall_s"], 2) if this["wall_s"] > 0 else None,
        # the budget's input limit at the top level too: what report labels and tests read
        "truncation": {"max_input_tokens": limits["budget"]["max_input_tokens"], "source": limits["budget"]["source"],
                       **limits, "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
        "endpoints": runner.endpoint_health(client),
        "backend": runner.describe(),
        "aborted": runner.aborted,
        "failures": failures[:50],
        # every failure, one entry per distinct (status, error): what the terminal shows, so
        # 50,000 requests pending in a batch are one line, not 50,000
        "failure_groups": _grouped(failures),
        "hints": sorted({f["hint"] for f in failures if "hint" in f}),
        "next_step": next_step(unsettled),  # None: complete
        "excluded": excluded_block(excluded or []),
        "prepare": prep_report,
        "scores": scores,
    }


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


def write_out(out: Path, summary: dict[str, Any]) -> None:
    """Write run.json into the folder `out_dir` made and checked before the run."""
    (out / "run.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=_json_default))
    summary["out_dir"] = str(out)


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
