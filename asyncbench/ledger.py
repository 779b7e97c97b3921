"""The ledger: one row per sample of a run, one per request, one per invocation — and
every count, token and dollar a run reports, derived from those rows by `account`.

The run summary (terminal, run.json), the progress bar's totals and every `report` format
call the same function on the same rows, so their numbers agree and add up by
construction: sample statuses sum to the sample count, tasks and purposes sum to the
totals, and invocations sum to what the run cost to produce.

A run is a record and an invocation is an event: re-running a command appends an
invocation and its request rows and never rewrites an earlier one. A sample's status is a
fact of the run, not of the invocation that settled it: "answered" or "shared" in the
first invocation stays so when a re-run reads that answer back from the cache, and an
interrupted invocation's answers, read back by the next one, are booked as the
uninterrupted run would have booked them (the sample that paid "answered", its twins
"shared").
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict, get_args

from .types import Purpose, RequestSource, SampleStatus

# A sample's one status (types.SampleStatus, which says what each means), in the order
# every table lists them. The first four are settled (its score counts).
SAMPLE_STATUSES: tuple[SampleStatus, ...] = tuple(SampleStatus)
SETTLED = frozenset(s for s in SampleStatus if s.settled)
# Where old stored rows are read: caches written before bad rows were excluded hold
# "skipped_bad_row", counted as excluded.
LEGACY_STATUSES = {"skipped_bad_row": SampleStatus.EXCLUDED}


def stored_status(status: str) -> SampleStatus:
    """A stored row's status, as this version names it (LEGACY_STATUSES)."""
    return LEGACY_STATUSES.get(status) or SampleStatus(status)


_HAS_ANSWER = frozenset(s for s in SampleStatus if s.has_answer)

PURPOSES: tuple[Purpose, ...] = get_args(Purpose)
# What became of one request (types.RequestSource).
REQUEST_SOURCES: tuple[RequestSource, ...] = tuple(RequestSource)
NO_TASK = "-"  # a judge or prior request no task claimed

# What fixes a sample that did not settle, where something does (besides running again).
CONTEXT_HINT = ("prompts exceed the model's context: pass --max-input-tokens N (the context minus the output "
                "length) to cut them in the middle as LongBench does, then run the same command again")
# ... where the benchmark sends its prompts uncut, as its release does (100-LongBench):
# --max-input-tokens cuts nothing there, so it is not offered
UNCUT_CONTEXT_HINT = ("prompts exceed the model's context: this benchmark sends them uncut, as its release does "
                      "(--max-input-tokens does not apply); run only the lengths the model takes (100-LongBench "
                      "--lengths) or serve it with a longer context")
# a key the server refused (scheduler.py: the run stopped after the first 401/403)
KEY_HINT_START = "the server refused the API key: fix it"
_KEY_REFUSED = re.compile(r"refused the API key \(.*\); (check \w+|no API key was sent: set \w+), then run")
BUDGET_HINT = "the run's --max-cost was reached (over all its invocations): run again with a larger --max-cost"


def next_step(unsettled: list[SampleEntry], uncut: bool = False) -> str | None:
    """The one thing to do for a complete run, where the run is not (None: it is): what a
    re-run alone cannot fix first (prompts too long, the budget), then a re-run for
    failures it can retry. Excluded samples are settled: nothing to do for them.
    `uncut`: the benchmark sends its prompts uncut (hint_for)."""
    if not unsettled:
        return None
    hints = {hint_for(e.status, e.error, uncut) for e in unsettled}
    refused = min((h for h in hints if h and h.startswith(KEY_HINT_START)), default=None)
    if refused is not None:  # a refused key: no re-run settles anything until it is fixed
        return refused
    for hint in (CONTEXT_HINT, UNCUT_CONTEXT_HINT, BUDGET_HINT):
        if hint in hints:
            return hint
    return f"run the same command again to retry the {len(unsettled)} unsettled sample(s)"


def hint_for(status: SampleStatus, error: str | None, uncut: bool = False) -> str | None:
    """The flag or fix for a sample that did not settle, where one is known. `uncut`: the
    benchmark sends its prompts uncut, as its release does, where --max-input-tokens
    would change nothing (UNCUT_CONTEXT_HINT instead of CONTEXT_HINT)."""
    if status == SampleStatus.SKIPPED_BUDGET:
        return BUDGET_HINT
    if "context too long" in (error or "").lower():
        return UNCUT_CONTEXT_HINT if uncut else CONTEXT_HINT
    if (refused := _KEY_REFUSED.search(error or "")) is not None:
        return f"{KEY_HINT_START} ({refused.group(1)}), then run the same command again"
    return None


@dataclass
class SampleEntry:
    sample_id: str
    task: str
    status: SampleStatus
    invocation: int
    error: str | None = None


@dataclass
class RequestEntry:
    invocation: int
    purpose: Purpose
    task: str
    source: RequestSource
    key: str = ""
    sample_id: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0  # paid by this request (source "sent")
    saved_usd: float = 0.0  # what a cache hit cost when it was paid
    latency_ms: float | None = None
    attempts: int = 0
    cache_write_tokens: int = 0  # written to the provider's prompt cache (part of prompt_tokens)
    usage_flag: str | None = None  # the server's usage out of bounds, booked at our bound (claims.py)
    # a live answer's timing (types.Timing): when it was sent (epoch s) and its time to first
    # token; None where this row measured nothing (a cache hit, a batch result, unstreamed TTFT)
    sent_at: float | None = None
    ttft_ms: float | None = None


@dataclass
class InvocationEntry:
    """One `asyncbench run` of a run: its wall time and the runner's event counts. Tokens
    and dollars are not stored here: they are summed from its request rows."""

    invocation: int
    started_at: float
    wall_s: float = 0.0
    requests: int = 0  # HTTP calls, retries included
    retries: int = 0
    rate_limited: int = 0
    transient_errors: int = 0
    complete: bool = False
    finished: bool = False
    pid: int = 0  # the process running it, on `host`: an unfinished invocation whose
    host: str = ""  # process is gone was interrupted (killed, crashed, Ctrl-C)


def interrupted(inv: InvocationEntry) -> bool:
    """An invocation that never finished and whose process no longer runs (on this
    machine; on another one it is taken to still be running)."""
    import os
    import socket

    if inv.finished or inv.host != socket.gethostname():
        return False
    try:
        os.kill(inv.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


@dataclass
class RequestGroup:
    """Request rows summed by (invocation, task, purpose, source): what `account` reads,
    computed by the store with one GROUP BY over a run's rows."""

    invocation: int
    task: str
    purpose: str
    source: str
    n: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    saved_usd: float = 0.0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Produced:
    """What producing a run's answers cost, every invocation and purpose, each request
    counted once: what the run paid for the requests it sent, and the answers it read
    from a cache another run paid for, at what they cost when paid (`from_cache_usd` of
    `usd`). A model's cost on a leaderboard must not read $0 because its answers happened
    to be cached (issue 36)."""

    usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    from_cache_usd: float = 0.0


@dataclass
class StatusCount:
    task: str
    status: str
    n: int


@dataclass
class FlaggedAnswer:
    """An answer of the run whose usage the server claimed out of bounds (claims.py): its
    request rows hold the bounded figures, this says what was claimed."""

    sample_id: str
    task: str
    purpose: str
    flag: str


class UsageFlags(TypedDict):
    """run.json's `usage_flags`: the run's answers booked at our bound (`answers`, one per
    request key) and the first USAGE_FLAGS_LISTED of them with their flags."""

    answers: int
    listed: list[dict[str, str]]


USAGE_FLAGS_LISTED = 20


@dataclass
class Ledger:
    """A run's ledger as `account` reads it: sample statuses counted per task, request rows
    summed per group, the invocations, oldest first, and the answers whose usage was
    booked at our bound (not as the server claimed it)."""

    statuses: list[StatusCount]
    requests: list[RequestGroup]
    invocations: list[InvocationEntry]
    flagged: list[FlaggedAnswer] = field(default_factory=list)


TOKEN_KINDS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cache_write_tokens")


@dataclass
class _Money:
    """Tokens and dollars of paid requests, by purpose, with the total."""

    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: {p: dict.fromkeys(TOKEN_KINDS, 0)
                                                                       for p in PURPOSES})
    usd: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PURPOSES, 0.0))
    sent: int = 0
    saved_usd: float = 0.0  # answers served from the response cache, at what they cost when paid
    batch_saved_usd: float = 0.0  # the batch API's discount on the answers sent through it

    def add(self, g: RequestGroup) -> None:
        if g.source == "sent":
            self.batch_saved_usd += g.saved_usd
            tokens = self.tokens.setdefault(g.purpose, dict.fromkeys(TOKEN_KINDS, 0))
            for kind in TOKEN_KINDS:
                tokens[kind] += getattr(g, kind)
            self.usd[g.purpose] = self.usd.get(g.purpose, 0.0) + g.cost_usd
            self.sent += g.n
        elif g.source == "from_cache":
            self.saved_usd += g.saved_usd

    def cost(self) -> dict[str, float]:
        out = {p: round(v, 6) for p, v in self.usd.items()}
        out["total"] = round(sum(self.usd.values()), 6)
        return out

    def token_block(self) -> dict[str, dict[str, int]]:
        out = {p: dict(t) for p, t in self.tokens.items()}
        out["total"] = {k: sum(t[k] for t in self.tokens.values()) for k in TOKEN_KINDS}
        return out


class TaskFigures(TypedDict):
    """One task's block of `account`: its samples by status, and what it cost."""

    n: int
    answered: int
    from_cache: int
    shared: int
    excluded: int
    failed: int
    skipped_budget: int
    settled: int
    complete: bool
    cost_usd: dict[str, float]  # by purpose, and "total"
    tokens: dict[str, int]  # TOKEN_KINDS, summed over purposes


class InvocationFigures(TypedDict):
    """One invocation's row of `account`: its InvocationEntry, then its own money."""

    invocation: int
    started_at: float
    wall_s: float
    requests: int
    retries: int
    rate_limited: int
    transient_errors: int
    complete: bool
    finished: bool
    pid: int
    host: str
    cost_usd: float
    cost_by_purpose: dict[str, float]
    sent: int
    prompt_tokens: int
    completion_tokens: int
    saved_by_cache_usd: float
    saved_by_batch_usd: float
    prompt_cache_read_tokens: int
    prompt_cache_write_tokens: int


class Account(TypedDict):
    """Every count, token and dollar of a run (`account`): run.json's ledger fields."""

    complete: bool
    samples: dict[str, int]  # SAMPLE_STATUSES, "total" and "settled"
    by_task: dict[str, TaskFigures]
    cost_usd: dict[str, float]  # by purpose, and "total"
    tokens: dict[str, dict[str, int]]  # by purpose and "total": TOKEN_KINDS
    invocations: list[InvocationFigures]
    usage_flags: UsageFlags


def status_counts(counts: Iterable[StatusCount]) -> dict[str, int]:
    out: dict[str, int] = dict.fromkeys(SAMPLE_STATUSES, 0)
    for c in counts:
        out[stored_status(c.status)] += c.n
    out["total"] = sum(out.values())
    out["settled"] = sum(out[s] for s in SETTLED)
    return out


def account(ledger: Ledger) -> Account:
    """Every count, token and dollar of a run, from its ledger.

    `cost_usd`/`tokens` and `by_task` are what the run cost to produce (every invocation);
    `invocations` lists each one's own figures, oldest first, and the last is this one.
    What the cache saved is per invocation (a cached re-run saves the run's price again),
    priced at what the answers cost when they were paid."""
    run_money = _Money()
    by_inv: dict[int, _Money] = defaultdict(_Money)
    by_task_money: dict[str, _Money] = defaultdict(_Money)
    for g in ledger.requests:
        run_money.add(g)
        by_inv[g.invocation].add(g)
        by_task_money[g.task].add(g)
    by_task_status: dict[str, list[StatusCount]] = defaultdict(list)
    for c in ledger.statuses:
        by_task_status[c.task].append(c)
    tasks: dict[str, TaskFigures] = {}
    for task in sorted(by_task_status) + sorted(t for t in by_task_money if t not in by_task_status):
        tasks[task] = _task_figures(status_counts(by_task_status.get(task, [])), by_task_money.get(task, _Money()))
    counts = status_counts(ledger.statuses)
    return {
        "complete": counts["settled"] == counts["total"],
        "samples": counts,
        "by_task": tasks,
        "cost_usd": run_money.cost(),
        "tokens": run_money.token_block(),
        "invocations": [_invocation_figures(inv, by_inv.get(inv.invocation, _Money())) for inv in ledger.invocations],
        "usage_flags": usage_flags(ledger.flagged),
    }


def usage_flag_line(flags: Mapping[str, object], shown: int = 3) -> str | None:
    """One line on the answers booked at our bound (None: there are none), for the run
    summary and every report: how many, and the first few flags."""
    n = int(flags.get("answers") or 0)  # type: ignore[call-overload]
    if not n:
        return None
    listed = list(flags.get("listed") or [])  # type: ignore[call-overload]
    first = "; ".join(f"{f['sample_id']}: {str(f['flag']).removeprefix('usage out of bounds: ')}" for f in listed[:shown])
    more = f" (and {n - min(shown, len(listed))} more: run.json usage_flags, `asyncbench samples`)" if n > shown else ""
    return (f"usage out of bounds: {n} answer{'s' if n != 1 else ''} booked at our bound, not as the server "
            f"claimed (tokens and dollars above are the bounded figures): {first}{more}")


def usage_flags(flagged: list[FlaggedAnswer]) -> UsageFlags:
    """The answers booked at our bound, counted, and the first few listed."""
    return {"answers": len(flagged),
            "listed": [{"sample_id": f.sample_id, "task": f.task, "purpose": f.purpose, "flag": f.flag}
                       for f in flagged[:USAGE_FLAGS_LISTED]]}


def _task_figures(counts: dict[str, int], money: _Money) -> TaskFigures:
    return {"n": counts["total"], "answered": counts["answered"], "from_cache": counts["from_cache"],
            "shared": counts["shared"], "excluded": counts["excluded"], "failed": counts["failed"],
            "skipped_budget": counts["skipped_budget"], "settled": counts["settled"],
            "complete": counts["settled"] == counts["total"], "cost_usd": money.cost(),
            "tokens": money.token_block()["total"]}


def _invocation_figures(inv: InvocationEntry, money: _Money) -> InvocationFigures:
    cost, tokens = money.cost(), money.token_block()["total"]
    return {"invocation": inv.invocation, "started_at": inv.started_at, "wall_s": inv.wall_s,
            "requests": inv.requests, "retries": inv.retries, "rate_limited": inv.rate_limited,
            "transient_errors": inv.transient_errors, "complete": inv.complete, "finished": inv.finished,
            "pid": inv.pid, "host": inv.host, "cost_usd": cost["total"],
            "cost_by_purpose": {p: v for p, v in cost.items() if p != "total"},
            "sent": money.sent, "prompt_tokens": tokens["prompt_tokens"],
            "completion_tokens": tokens["completion_tokens"],
            "saved_by_cache_usd": round(money.saved_usd, 6),
            "saved_by_batch_usd": round(money.batch_saved_usd, 6),
            "prompt_cache_read_tokens": tokens["cached_prompt_tokens"],
            "prompt_cache_write_tokens": tokens["cache_write_tokens"]}


def partial_label(block: Mapping[str, object]) -> str:
    """"partial 25/42" for an incomplete run or task ({"settled", "n"|"total"}), else ""."""
    total = block.get("n", block.get("total", 0))
    return "" if block.get("settled", total) == total else f"partial {block['settled']}/{total}"


def merge_sample(previous: SampleEntry | None, new: SampleEntry, paid: tuple[int, str | None] | None = None) -> SampleEntry:
    """The run's status of a sample after another invocation. An answer this run already
    produced, read back from the cache (or shared with a twin that was) now, keeps the
    status and invocation it had. One an earlier invocation paid for and then died before
    recording its samples (`paid`: that invocation and the sample it was sent for) is
    booked as the uninterrupted run would have: "answered" for the sample it was sent
    for, "shared" for its twins, in that invocation."""
    if new.status not in (SampleStatus.FROM_CACHE, SampleStatus.SHARED):
        return new
    if previous is not None and previous.status in _HAS_ANSWER:
        return previous
    if paid is not None:
        invocation, payer = paid
        return SampleEntry(new.sample_id, new.task,
                           SampleStatus.ANSWERED if payer in (None, new.sample_id) else SampleStatus.SHARED, invocation)
    return new
