"""Counters the simulator exposes on GET /stats, so tests can check what a client did.

`requests` counts every generation request received, whatever happened to it; the
outcome counters (`ok`, `rate_limited`, `errors_5xx`, `dropped`, `stalled`, `malformed`,
`context_length_errors`, `bad_requests`) partition them, except that a stalled request
is also counted by its eventual outcome. Tokens are counted for `ok` responses only,
i.e. what a real provider would bill. The log keeps one sha256 fingerprint of the prompt
text per request, in arrival order, so a test can check no sample was requested twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields


@dataclass
class SimStats:
    requests: int = 0
    ok: int = 0
    rate_limited: int = 0
    errors_5xx: int = 0
    dropped: int = 0
    stalled: int = 0
    malformed: int = 0
    context_length_errors: int = 0
    bad_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # read from the prompt cache
    cache_write_tokens: int = 0  # written to it (Anthropic, marked blocks)
    # batch APIs: batches accepted (OpenAI POST /v1/batches, Anthropic POST
    # /v1/messages/batches) and the requests they carried
    batches_submitted: int = 0
    batch_requests: int = 0
    batch_holds: int = 0  # batch calls that reached a --batch-hold stage
    routes: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    # arrival time (Unix seconds) of each logged request: lets a test check the rate the
    # server saw across several simulators
    times: list[float] = field(default_factory=list)

    def as_dict(self, with_log: bool = False) -> dict[str, object]:
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("routes", "log", "times")}
        out["routes"] = dict(self.routes)
        out["unique_prompts"] = len(set(self.log))
        if with_log:
            out["log"] = list(self.log)
            out["times"] = list(self.times)
        return out
