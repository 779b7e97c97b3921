"""What a plan would send and cost, sending nothing (`run --dry-run`): each figure
"exact" or an "upper bound", answers already in the cache free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .client import ModelClient
from .run_summary import DryRunSummary, DryRunTotals, PurposeEstimate
from .store.stored_plan import StoredPlan
from .types import Request, Sample


@dataclass(frozen=True)
class _Reuse:
    """What a stored run lets a dry run count as free: its cached answers, the judge and
    prior calls it made that are all cached (when it finished complete), and the samples
    its prior-knowledge filter left out."""

    cached: set[str]
    calls: dict[str, tuple[int, int]]
    free: set[str]
    skip: set[str]

    @classmethod
    def of(cls, stored: StoredPlan | None) -> _Reuse:
        if stored is None:
            return cls(set(), {}, set(), set())
        calls = stored.calls if stored.complete else {}
        free = {p for p, (n, hit) in calls.items() if n == hit}
        return cls(stored.cached, stored.calls, free, stored.excluded if "prior" in free else set())


def dry_run_summary(benchmark: str, samples: list[Sample], requests: list[Request], client: ModelClient,
                    judge: ModelClient | None, run_id: str, truncated: dict[str, int], limits: Mapping[str, object],
                    stored: StoredPlan | None, planned: Mapping[str, tuple[int, int, int]]) -> DryRunSummary:
    """What a run would send and cost, sending nothing, each figure labelled "exact" or
    "upper bound". Answers already in the cache are free. Judge and prior-knowledge calls
    are the benchmark's upper bound, unless this run is stored complete with every such
    call in the cache: a re-run then makes the same calls (the same answers judged), free,
    and leaves out the samples its prior-knowledge filter left out. A model without a
    price says "unpriced" instead of $0. `requests`/`cached`/`to_send` are the eval
    requests; the `estimated_*` totals are every purpose's, as the dollars are (a total
    of eval tokens beside a total of all dollars once disagreed, issue 36)."""
    reuse = _Reuse.of(stored)
    asked = [(s, r) for s, r in zip(samples, requests) if s.id not in reuse.skip]
    hits = [r for _, r in asked if r.key() in reuse.cached]
    to_send = [r for _, r in asked if r.key() not in reuse.cached]
    prompt_tokens = sum(client.count(r.text()) for r in to_send)
    output_tokens = sum(r.max_tokens for r in to_send)
    purposes: dict[str, PurposeEstimate] = {"eval": {
        "requests": len(to_send), "prompt_tokens": prompt_tokens, "max_output_tokens": output_tokens,
        "cost_usd": _estimate(client, prompt_tokens, output_tokens),
        "estimate": "exact" if not to_send else "upper bound",  # output priced at each request's max tokens
    }}
    for purpose, calls in planned.items():
        target = judge if purpose == "judge" and judge is not None else client
        purposes[purpose] = _planned_estimate(purpose, calls, target, reuse, bool(to_send))
    purposes["eval"]["cost_usd_by_mode"] = _cost_by_mode(client, to_send, prompt_tokens, output_tokens)
    return {
        "run_id": run_id, "benchmark": benchmark, "model": client.spec.label, "dry_run": True,
        "n_samples": len(samples), "requests": len(requests), "cached": len(hits), "to_send": len(to_send),
        "left_out_as_stored": len(requests) - len(asked),  # the stored run's prior-knowledge exclusions
        "cache_checked": stored is not None,
        **_totals(purposes), "by_purpose": purposes,
        "token_counting": "tiktoken" if client.counter else "approx ceil(chars/4)",
        "truncation": {**limits, "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
    }


def _totals(purposes: Mapping[str, PurposeEstimate]) -> DryRunTotals:
    """The dry run's totals, each over every purpose (eval, judge, prior): a total of eval
    tokens beside a total of every purpose's dollars once disagreed (issue 36)."""
    costs = [p["cost_usd"] for p in purposes.values()]
    exact = all(p["estimate"] == "exact" for p in purposes.values())
    return {"estimated_requests": sum(p["requests"] for p in purposes.values()),
            "estimated_prompt_tokens": sum(p["prompt_tokens"] for p in purposes.values()),
            "estimated_max_output_tokens": sum(p["max_output_tokens"] for p in purposes.values()),
            "estimated_cost_usd": "unpriced" if "unpriced" in costs else round(sum(float(c) for c in costs), 6),
            "estimate": "exact" if exact else "upper bound"}


def _planned_estimate(purpose: str, calls: tuple[int, int, int], target: ModelClient, reuse: _Reuse,
                      sending: bool) -> PurposeEstimate:
    """A judge or prior purpose: free and exact when the stored run's calls are all cached
    (judge calls only when no answer changes), else the benchmark's upper bound."""
    if purpose in reuse.free and (purpose == "prior" or not sending):
        return {"requests": 0, "prompt_tokens": 0, "max_output_tokens": 0, "cost_usd": 0.0,
                "cached": reuse.calls[purpose][0], "estimate": "exact"}
    n, tokens_in, tokens_out = calls
    return {"requests": n, "prompt_tokens": tokens_in, "max_output_tokens": tokens_out,
            "cost_usd": _estimate(target, tokens_in, tokens_out), "estimate": "upper bound"}


def _cost_by_mode(client: ModelClient, to_send: list[Request], prompt_tokens: int,
                  output_tokens: int) -> dict[str, float | int | str]:
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
    modes: dict[str, float | int | str] = {"list": listed, "batch": listed * price.batch, "prompt_cache": cached,
                                           "batch_prompt_cache": cached * price.batch}
    if not price.priced:
        modes = dict.fromkeys(modes, "unpriced")
    else:
        modes = {k: round(float(v), 6) for k, v in modes.items()}
    return {**modes, "expected_cache_read_tokens": read, "expected_cache_write_tokens": written,
            "shared_prefix_groups": len(plan.groups), "requests_in_groups": plan.marked}


def _estimate(client: ModelClient, prompt_tokens: int, output_tokens: int) -> float | str:
    return round(client.price.estimate(prompt_tokens, output_tokens), 6) if client.price.priced else "unpriced"
