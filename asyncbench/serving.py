"""Serving latency of a run, as the serving benchmarks measure it, per run and per
context-length bin, from the requests the run itself sent and timed (types.Timing).

Definitions (NVIDIA AIPerf, docs/metrics_reference.md, the former genai-perf's; vLLM
benchmarks/benchmark_serving.py for the ITL distribution):

- time to first token (TTFT): from sending the request to the first response chunk with
  non-empty content;
- end-to-end (request latency): from sending the request to its last byte;
- time per output token (TPOT; AIPerf's "inter token latency" per request):
  (e2e - TTFT) / (output tokens - 1), undefined for an answer of one token;
- ITL: every gap between two successive content chunks of an answer, all answers'
  gaps pooled (vLLM's `itls`);
- output token throughput: output tokens over the active time; request throughput:
  requests over the active time. The active time is the union of the intervals in which a
  measured request was in flight (AIPerf's benchmark duration for one uninterrupted
  invocation; a resumed run's pause, its planning and scoring are not in it). A bin's
  throughputs are over its own requests' active time.

Only what the run sent live is measured: a cache hit (its answer was timed when some run
paid for it) and a batch result carry no timing, and are counted as such, never as 0. An
unstreamed answer (--stream off, or a server that answered whole) has an end-to-end time
and no TTFT. Timings are stored with each request's ledger row and answer (schema v6),
so a resumed run's figures include its earlier invocations'.

Bins: the benchmark's own context-length bins where it has them (Benchmark.length_bin:
LongBench-E 0-4k/4-8k/8k+, BAMBOO 4k/16k, 100-LongBench's lengths), else deciles of the
measured requests' prompt tokens. Percentiles are numpy's default (percentiles.py).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from .json_values import as_float, as_int, as_object
from .percentiles import percentile
from .terminal import aligned

QUANTILES = (50, 90, 95, 99)
MEASURES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tokens", "prompt_tokens")
# fewest measured requests per prompt-token bin (fewer requests: fewer bins than ten)
PER_BIN = 5

LengthBin = Callable[[Mapping[str, object]], "str | None"]
# one live answer on the prefill curve: (prompt tokens, TTFT ms, TPOT ms), None where undefined
Point = tuple[int, "float | None", "float | None"]


@dataclass(frozen=True, slots=True)
class Measured:
    """One live request of the run as its ledger row and answer hold it."""

    sample_id: str | None
    meta_json: str | None
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    e2e_ms: float
    sent_at: float
    ttft_ms: float | None
    itl_ms: Sequence[float] | None

    @property
    def tpot_ms(self) -> float | None:
        return tpot(self.e2e_ms, self.ttft_ms, self.output_tokens)


def points(requests: Iterable[Measured]) -> list[Point]:
    """The requests on the prefill curve (report/plots.py)."""
    return [(r.prompt_tokens, r.ttft_ms, r.tpot_ms) for r in requests]


def tpot(e2e_ms: float | None, ttft_ms: float | None, output_tokens: int) -> float | None:
    """(e2e - TTFT) / (output tokens - 1); None where it is undefined (no TTFT, one token)."""
    if e2e_ms is None or ttft_ms is None or output_tokens < 2:
        return None
    return round(max(0.0, e2e_ms - ttft_ms) / (output_tokens - 1), 3)


class Block(TypedDict, total=False):
    """The figures of a set of requests: how many, percentiles of each measure (None
    where none has it), throughputs over their active time."""

    n: int
    streamed: int
    cached_prompt_tokens: int
    active_s: float
    output_token_throughput: float | None
    request_throughput: float | None
    ttft_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    output_tokens: dict[str, float | None]
    prompt_tokens: dict[str, float | None]


class Serving(TypedDict, total=False):
    """run.json's `serving`: the run's figures, by context-length bin, and what was not
    measured (cache hits, batch results) counted by why."""

    measured: int
    not_measured: dict[str, int]
    bins: Literal["benchmark", "prompt-token deciles"] | None  # None: nothing measured
    overall: Block
    by_length: dict[str, Block]


def quantiles(values: Iterable[float]) -> dict[str, float | None]:
    """p50/p90/p95/p99, rounded to 0.001; None each without values."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return {f"p{q}": None for q in QUANTILES}
    return {f"p{q}": round(percentile(ordered, q), 3) for q in QUANTILES}


def active_seconds(requests: Iterable[Measured]) -> float:
    """The time at least one of `requests` was in flight (the union of their intervals)."""
    spans = sorted((r.sent_at, r.sent_at + r.e2e_ms / 1000.0) for r in requests)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def block(requests: Sequence[Measured]) -> Block:
    """The figures of `requests` (module doc)."""
    active = active_seconds(requests)
    out_tokens = sum(r.output_tokens for r in requests)
    tpots = [t for r in requests if (t := r.tpot_ms) is not None]
    return {
        "n": len(requests), "streamed": sum(1 for r in requests if r.ttft_ms is not None),
        "cached_prompt_tokens": sum(r.cached_prompt_tokens for r in requests),
        "active_s": round(active, 3),
        "output_token_throughput": round(out_tokens / active, 2) if active > 0 else None,
        "request_throughput": round(len(requests) / active, 3) if active > 0 else None,
        "ttft_ms": quantiles(r.ttft_ms for r in requests if r.ttft_ms is not None),
        "tpot_ms": quantiles(tpots),
        "itl_ms": quantiles(g for r in requests if r.itl_ms for g in r.itl_ms),
        "e2e_ms": quantiles(r.e2e_ms for r in requests),
        "output_tokens": quantiles(r.output_tokens for r in requests),
        "prompt_tokens": quantiles(r.prompt_tokens for r in requests),
    }


def _tokens(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def token_bins(requests: Sequence[Measured]) -> dict[str, list[Measured]]:
    """Up to ten bins of about equal counts by prompt tokens, named by their range."""
    if not requests:
        return {}
    ordered = sorted(requests, key=lambda r: r.prompt_tokens)
    k = max(1, min(10, len(ordered) // PER_BIN))
    tokens = [r.prompt_tokens for r in ordered]
    # a bin starts at the first request at or past each k-quantile (equal counts up to ties)
    starts = sorted({tokens[(i * len(tokens)) // k] for i in range(k)})
    bins: dict[str, list[Measured]] = {}
    for j, start in enumerate(starts):
        lo = bisect.bisect_left(tokens, start)
        hi = bisect.bisect_left(tokens, starts[j + 1]) if j + 1 < len(starts) else len(tokens)
        members = ordered[lo:hi]
        bins[f"{_tokens(tokens[lo])}-{_tokens(tokens[hi - 1])} tok"] = members
    return bins


def serving_figures(requests: Sequence[Measured], length_bin: LengthBin | None,
                    not_measured: Mapping[str, int]) -> Serving:
    """run.json's `serving` block (module doc). `length_bin`: the benchmark's bin of a
    sample's meta (None: it has none); `not_measured`: answers without timing, by why."""
    out: Serving = {"measured": len(requests), "not_measured": {k: v for k, v in not_measured.items() if v}}
    if not requests:
        out["bins"] = None
        return out
    groups: dict[str, list[Measured]] = {}
    if length_bin is not None:
        for r in requests:
            label = length_bin(json.loads(r.meta_json) if r.meta_json else {})
            if label is not None:
                groups.setdefault(label, []).append(r)
    if groups and sum(len(g) for g in groups.values()) == len(requests):
        out["bins"] = "benchmark"
        ordered = sorted(groups.items(), key=lambda kv: percentile(sorted(r.prompt_tokens for r in kv[1]), 50))
    else:
        out["bins"] = "prompt-token deciles"
        ordered = list(token_bins(requests).items())
    out["overall"] = block(requests)
    out["by_length"] = {label: block(members) for label, members in ordered}
    return out


def serving_lines(serving: Mapping[str, object]) -> list[str]:
    """The terminal's lines for run.json's `serving` block: TTFT and TPOT percentiles and
    the throughputs per context-length bin and overall; what was not measured said."""
    measured = as_int(serving.get("measured")) or 0
    missing = as_object(serving.get("not_measured"))
    why = ", ".join(f"{n} {k}" for k, n in missing.items())
    if not measured:
        return [f"serving latency: nothing measured ({why or 'no answer was sent'}: timings are taken only on "
                "answers this run sent live)"]
    overall = as_object(serving.get("overall"))
    streamed = as_int(overall.get("streamed")) or 0
    head = (f"serving latency of {measured} answer{'s' if measured != 1 else ''} sent live "
            f"({streamed} streamed){'; not timed: ' + why if why else ''}, by {_by(serving.get('bins'))}:")
    # 80 columns: end to end and the request throughput are in run.json and the report
    rows = [["bin", "n", "TTFT ms p50/90/95/99", "TPOT ms p50/90/95/99", "out tok/s"]]
    for label, b_ in [*as_object(serving.get("by_length")).items(), ("all", overall)]:
        b = as_object(b_)
        rows.append([label, str(b.get("n", 0)), _four(b.get("ttft_ms")), _four(b.get("tpot_ms")),
                     _num(b.get("output_token_throughput"))])
    return [head, *aligned(rows, right={1, 2, 3, 4})]


def _by(bins: object) -> str:
    return "the benchmark's length bins" if bins == "benchmark" else "prompt-token deciles"


def _num(value: object) -> str:
    v = as_float(value)
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _four(block: object) -> str:
    q = as_object(block)
    if all(q.get(f"p{p}") is None for p in QUANTILES):
        return "- (not streamed)"
    return "/".join(_num(q.get(f"p{p}")) for p in QUANTILES)

