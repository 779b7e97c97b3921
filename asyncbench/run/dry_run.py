"""What a plan would send and cost, sending nothing (`run --dry-run`): each figure
"exact" or an "upper bound", answers already in the cache free."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..client import ModelClient
from ..run_summary import DryRunSummary, DryRunTotals, JudgeNote, PurposeEstimate
from ..store.stored_plan import StoredPlan
from ..types import Request, Sample


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


@dataclass
class _Prefixes:
    """The prompt-cache figures of the requests to send, summed over the windows planned."""

    read: int = 0
    written: int = 0
    groups: int = 0
    marked: int = 0


class Pricing:
    """A dry run's figures, taken a window of samples at a time: a listed benchmark's
    samples are one window (exactly as the run would send them); streamed and generated
    ones come in windows of bounded size, so nothing holds every prompt (a 100-LongBench
    dry run at its defaults builds ~0.8 GB of contexts). What is kept per sample is small:
    its request's key and token counts, and the sample without its prompt (the judge's
    and prior calls are counted from questions and references). Prompt-cache prefixes are
    found within each window, so a streamed dry run may miss a prefix that only requests
    in two different windows share."""

    def __init__(self, client: ModelClient, stored: StoredPlan | None, lookup: Callable[[list[str]], set[str]]) -> None:
        self.client = client
        self.stored = stored
        self.reuse = _Reuse.of(stored)
        self.lookup = lookup  # the cache's answers among keys (read-only)
        self.samples: list[Sample] = []  # without their prompts
        self.requests = self.hits = self.to_send = self.left_out = 0
        self.prompt_tokens = self.output_tokens = 0
        self.prefixes = _Prefixes()

    def add(self, samples: list[Sample], requests: list[Request]) -> None:
        """One window: its samples and their requests, in order."""
        self.samples += [replace(s, prompt=None, messages=None) for s in samples]
        self.requests += len(requests)
        asked = [r for s, r in zip(samples, requests) if s.id not in self.reuse.skip]
        self.left_out += len(requests) - len(asked)
        cached = self.lookup([r.key() for r in asked]) if self.stored is not None and asked else set()
        to_send = [r for r in asked if r.key() not in cached]
        self.hits += len(asked) - len(to_send)
        self.to_send += len(to_send)
        self.prompt_tokens += sum(self.client.count(r.text()) for r in to_send)
        self.output_tokens += sum(r.max_tokens for r in to_send)
        plan = self.client.plan_prefixes(to_send)
        self.prefixes.read += plan.expected_read_tokens
        self.prefixes.written += plan.expected_write_tokens
        self.prefixes.groups += len(plan.groups)
        self.prefixes.marked += plan.marked

    def summary(self, benchmark: str, judge: ModelClient | None, judge_needed: str | None, run_id: str,
                truncated: dict[str, int], limits: Mapping[str, object],
                planned: Mapping[str, tuple[int, int, int]]) -> DryRunSummary:
        """What a run would send and cost, sending nothing, each figure labelled "exact" or
        "upper bound". Answers already in the cache are free. Judge and prior-knowledge
        calls are the benchmark's upper bound, unless this run is stored complete with every
        such call in the cache: a re-run then makes the same calls (the same answers
        judged), free, and leaves out the samples its prior-knowledge filter left out. A
        model without a price says "unpriced" instead of $0. A benchmark that needs a judge
        and was given none (`judge_needed`: the run refuses to start) has its judge calls
        counted but not priced: they are in `judge`, not in the total. `requests`/`cached`/
        `to_send` are the eval requests; the `estimated_*` totals are every priced
        purpose's, as the dollars are (a total of eval tokens beside a total of all dollars
        once disagreed, issue 36)."""
        client = self.client
        purposes: dict[str, PurposeEstimate] = {"eval": {
            "requests": self.to_send, "prompt_tokens": self.prompt_tokens, "max_output_tokens": self.output_tokens,
            "cost_usd": _estimate(client, self.prompt_tokens, self.output_tokens),
            "estimate": "exact" if not self.to_send else "upper bound",  # output priced at each request's max tokens
        }}
        unpriced_judge: PurposeEstimate | None = None
        for purpose, calls in planned.items():
            if purpose == "judge" and judge is None and judge_needed:
                n, tokens_in, tokens_out = calls
                unpriced_judge = {"requests": n, "prompt_tokens": tokens_in, "max_output_tokens": tokens_out,
                                  "cost_usd": "no judge given", "estimate": "upper bound"}
                continue
            target = judge if purpose == "judge" and judge is not None else client
            purposes[purpose] = _planned_estimate(purpose, calls, target, self.reuse, bool(self.to_send))
        purposes["eval"]["cost_usd_by_mode"] = self._cost_by_mode()
        judge_note: JudgeNote | None = None
        if judge_needed or (judge is not None and "judge" in planned):
            judge_note = {"model": judge.spec.label if judge is not None else None,
                          "needed": bool(judge_needed), "unpriced_calls": unpriced_judge,
                          "why": None if judge is not None else judge_needed}
        return {
            "run_id": run_id, "benchmark": benchmark, "model": client.spec.label, "dry_run": True,
            "n_samples": len(self.samples), "requests": self.requests, "cached": self.hits, "to_send": self.to_send,
            "left_out_as_stored": self.left_out,  # the stored run's prior-knowledge exclusions
            "cache_checked": self.stored is not None,
            **_totals(purposes), "by_purpose": purposes,
            "judge": judge_note,
            "token_counting": "tiktoken" if client.counter else "approx ceil(chars/4)",
            "truncation": {**limits, "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
        }

    def _cost_by_mode(self) -> dict[str, float | int | str]:
        """The eval requests' cost at list price, through the batch API (--batch), with the
        prompt-cache reads and writes expected from their shared prefixes (--prompt-cache
        auto: each group's first request writes the prefix, the others read it), and both."""
        price = self.client.price
        read, written = self.prefixes.read, self.prefixes.written
        prompt_tokens, output_tokens = self.prompt_tokens, self.output_tokens
        write_price = price.input if price.cache_write is None else price.cache_write
        listed = price.estimate(prompt_tokens, output_tokens)
        cached = (max(0, prompt_tokens - read - written) * price.input + read * price.cached_input
                  + written * write_price + output_tokens * price.output) / 1e6
        modes: dict[str, float | int | str] = {"list": listed, "batch": listed * price.batch,
                                               "prompt_cache": cached, "batch_prompt_cache": cached * price.batch}
        if not price.priced:
            modes = dict.fromkeys(modes, "unpriced")
        else:
            modes = {k: round(float(v), 6) for k, v in modes.items()}
        return {**modes, "expected_cache_read_tokens": read, "expected_cache_write_tokens": written,
                "shared_prefix_groups": self.prefixes.groups, "requests_in_groups": self.prefixes.marked}


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


def _estimate(client: ModelClient, prompt_tokens: int, output_tokens: int) -> float | str:
    return round(client.price.estimate(prompt_tokens, output_tokens), 6) if client.price.priced else "unpriced"
