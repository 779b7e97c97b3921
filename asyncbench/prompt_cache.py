"""Shared prompt prefixes, found per run and marked for the providers' prompt caches
(`--prompt-cache auto`, the default).

Many samples share their long context (BAMBOO paperqa: 98 questions on 25 papers;
LongBench puts the context before the question). `plan_prefixes` finds, among a run's
requests, groups that share a prefix: the prompts are sorted (O(n log n) comparisons),
the longest common prefix (LCP) of each adjacent pair is cut back to a text boundary (the
last newline, else the last whitespace, inside it: where the per-sample part begins),
and the LCP-interval tree of the sorted list is walked from the root: an interval whose
common prefix reaches the provider's minimum cacheable length becomes one group, unless
its sub-intervals together save more tokens (a long instruction shared by every sample
versus each paper shared by its questions). Every request of a group gets the group's
prefix length in `Request.cache_prefix`; the provider then sends it as the provider
wants it (Anthropic: two text blocks, `cache_control` on the first; OpenAI:
`prompt_cache_key`, a hash of the prefix). `cache_prefix` is not part of the request's
canonical form, so the response-cache key does not change with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from .types import Request

# Beyond this depth the interval tree is not split further (a degenerate chain of
# nested prefixes): the interval is taken whole.
_MAX_DEPTH = 200


@dataclass
class PrefixGroup:
    chars: int  # the prefix's length in characters
    tokens: int  # ... and in tokens
    members: list[int] = field(default_factory=list)  # request indices
    distinct: int = 0  # distinct prompts among them (identical requests are sent once)


@dataclass
class PrefixPlan:
    """The groups of one set of requests. Expected prompt-cache use when each group's
    first request writes the prefix and the others read it (within the provider's TTL)."""

    groups: list[PrefixGroup] = field(default_factory=list)

    @property
    def marked(self) -> int:
        return sum(len(g.members) for g in self.groups)

    @property
    def expected_read_tokens(self) -> int:
        return sum((g.distinct - 1) * g.tokens for g in self.groups)

    @property
    def expected_write_tokens(self) -> int:
        return sum(g.tokens for g in self.groups)


def prompt_text(request: Request) -> str | None:
    """The text a prefix is cut from: a raw prompt, or the content of a lone user message
    (multi-message requests are not marked)."""
    if request.prompt is not None:
        return request.prompt
    msgs = request.messages or []
    if len(msgs) == 1 and msgs[0].get("role") == "user" and isinstance(msgs[0].get("content"), str):
        return msgs[0]["content"]
    return None


def prefix_key(prefix: str) -> str:
    """OpenAI's `prompt_cache_key` for a prefix: requests sharing it route alike."""
    return "asyncbench-" + hashlib.sha256(prefix.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]: binary search on slices (C speed)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _boundary(text: str, n: int) -> int:
    """n cut back to just after the last newline (else whitespace) before it."""
    cut = text.rfind("\n", 0, n)
    if cut < 0:
        cut = max(text.rfind(" ", 0, n), text.rfind("\t", 0, n))
    return cut + 1 if cut >= 0 else 0


def plan_prefixes(texts: Sequence[str | None], count: Callable[[str], int], min_tokens: int) -> PrefixPlan:
    """Groups of ≥2 distinct texts sharing a prefix of at least `min_tokens` tokens (each
    prefix a strict prefix of every member, ending at a text boundary). Identical texts
    count once (the engine sends an identical request once) and share their group."""
    same: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        if t:
            same.setdefault(t, []).append(i)
    sorted_texts = sorted(same)
    if len(sorted_texts) < 2:
        return PrefixPlan()
    order = list(range(len(sorted_texts)))
    # lcps[k]: the boundary-cut common prefix of sorted_texts[k] and [k + 1], strict
    lcps = []
    for a, b in pairwise(sorted_texts):
        n = min(_lcp(a, b), len(a) - 1, len(b) - 1)
        lcps.append(_boundary(a, n) if n > 0 else 0)
    token_cache: dict[tuple[int, int], int] = {}

    def tokens_of(k: int, chars: int) -> int:
        if (k, chars) not in token_cache:
            token_cache[(k, chars)] = count(sorted_texts[k][:chars])
        return token_cache[(k, chars)]

    def best(lo: int, hi: int, depth: int) -> tuple[int, list[PrefixGroup]]:
        """The best grouping of sorted_texts[lo..hi] (inclusive, hi > lo): (tokens read
        from cache, groups)."""
        p = min(lcps[lo:hi])
        whole: tuple[int, list[PrefixGroup]] = (0, [])
        if p > 0:
            t = tokens_of(lo, p)
            if t >= min_tokens:
                whole = ((hi - lo) * t, [PrefixGroup(p, t, [order[k] for k in range(lo, hi + 1)])])
        if depth >= _MAX_DEPTH:
            return whole
        split_saving, split_groups = 0, []
        start = lo
        for k in range(lo, hi + 1):  # sub-intervals: split where the LCP equals the minimum
            if k == hi or lcps[k] == p:
                if k > start and any(lcps[j] > p for j in range(start, k)):
                    s, g = best(start, k, depth + 1)
                    split_saving += s
                    split_groups += g
                start = k + 1
        return whole if whole[0] >= split_saving else (split_saving, split_groups)

    plan = PrefixPlan()
    start = 0
    for k in range(len(lcps) + 1):  # top-level runs: split where nothing is shared
        if k == len(lcps) or lcps[k] == 0:
            if k > start:
                plan.groups += best(start, k, 0)[1]
            start = k + 1
    for g in plan.groups:  # distinct texts -> every request with that text
        g.distinct = len(g.members)
        g.members = sorted(i for k in g.members for i in same[sorted_texts[k]])
    return plan


def mark_requests(requests: Sequence[Request], count: Callable[[str], int], min_tokens: int) -> PrefixPlan:
    """Plan the requests' shared prefixes and set each member's `cache_prefix`."""
    plan = plan_prefixes([prompt_text(r) for r in requests], count, min_tokens)
    for n, g in enumerate(plan.groups):
        for i in g.members:
            requests[i].cache_prefix = g.chars
            requests[i].cache_group = n
    return plan
