"""From a sample to the request a run sends: its prompt cut to the budget, in the shape the
benchmark and the server take (LongBench pred.py's open-model prompts, 100-LongBench's
release requests, a plain chat or completion request).

`Prompting` is decided once, by planning, and never changes; what building requests
finds out as it goes (prompts cut, tasks sent as chat) is counted in a `Tally` of the
execution that builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .benchmarks.longbench.budget import PromptBudget
from .benchmarks.longbench.official_models import NewlineStop, OfficialModel, build_chat, has_post_process
from .client import ModelClient
from .errors import ProviderError, UserError
from .tokenizers import Tokenizer
from .types import Request, Sample

# A benchmark's own request for a prompt (100-LongBench's release): ModelClient.request's
# keyword arguments, from (prompt, provider, open model?).
ReleaseRequest = Callable[[str, str, bool], Mapping[str, Any]]


@dataclass
class Tally:
    """What building one execution's requests found: tokens cut from each sample, the
    tasks pred.py sends without a template that went as chat (chat-only APIs), and
    whether samsum's newline rule was sent."""

    truncated: dict[str, int] = field(default_factory=dict)
    as_chat: set[str] = field(default_factory=set)
    samsum: bool = False


@dataclass(frozen=True)
class Prompting:
    """How this run's samples become requests: the client, its generation settings, the
    prompt budget and the tokenizer that cuts to it (None: nothing is cut), pred.py's
    open model (and samsum's newline rule for it) or the benchmark's release request."""

    client: ModelClient
    temperature: float
    repeat: int
    budget: PromptBudget
    tokenizer: Tokenizer | None
    open_model: OfficialModel | None
    newline_stop: NewlineStop | None
    release: ReleaseRequest | None
    limits: Mapping[str, object]  # what run.json's "truncation" says of them

    def build(self, s: Sample, tally: Tally) -> Request:
        """The sample's request."""
        client = self.client
        if s.messages is not None:
            return client.request(messages=s.messages, max_tokens=s.max_tokens, temperature=self.temperature,
                                  repeat=self.repeat, chat=True, stop=s.stop)
        if self.open_model is not None:
            return self._build_open(s, self.open_model, tally)
        if self.release is not None:  # as the release sends it: never cut (a prompt too long fails at the server)
            return client.request(max_tokens=s.max_tokens, repeat=self.repeat, stop=s.stop,
                                  **self.release_kwargs(s.prompt or ""))
        templated = not client.sends_raw(s.chat)
        if templated and not s.chat:
            tally.as_chat.add(s.task)
        return client.request(prompt=self._cut(s, templated, tally), max_tokens=s.max_tokens,
                              temperature=self.temperature, repeat=self.repeat, chat=s.chat, stop=s.stop)

    def release_kwargs(self, prompt: str) -> Mapping[str, Any]:
        """The benchmark's release request for `prompt`, as ModelClient.request's arguments."""
        assert self.release is not None
        return self.release(prompt, self.client.spec.provider, self.client.serves_open_models)

    def limits_found(self, tally: Tally) -> dict[str, object]:
        """run.json's "truncation" block (less the counts): the plan's limits, then what
        building the requests found."""
        out = dict(self.limits)
        if tally.samsum and self.newline_stop is not None:
            out["samsum"] = self.newline_stop.describe()
        out["no_template_sent_as_chat"] = sorted(tally.as_chat)
        return out

    def _cut(self, s: Sample, templated: bool, tally: Tally) -> str:
        """The sample's prompt cut to its budget (the room a server's template takes when
        `templated`); what was removed is counted in the tally."""
        from .benchmarks.longbench.prompts import build_request_prompt

        cut = self.budget.for_sample(s.max_tokens, templated)
        try:
            text, removed = (build_request_prompt(s, tokenizer=self.tokenizer, max_input_tokens=cut)
                             if self.tokenizer is not None else (s.prompt or "", 0))
        except ProviderError as exc:  # the server's /tokenize refused or timed out on it
            size = len(s.prompt or "") / 1e6
            raise UserError(f"sample {s.id}: cannot tokenize its {size:.1f}M-character prompt to fit the context "
                            f"({exc.message}); shorten that prompt or pass --tokenizer cl100k_base") from None
        if removed:
            tally.truncated[s.id] = removed
        return text

    def _build_open(self, s: Sample, open_model: OfficialModel, tally: Tally) -> Request:
        """pred.py's request for an open model: its cut, then its build_chat text (chat
        datasets), sent raw; samsum's newline rule (samsum_stop)."""
        text = self._cut(s, False, tally)
        if s.chat:
            text = build_chat(text, open_model.name)
        params: dict[str, object] = {}
        newline_stop = self.newline_stop
        if s.stop and newline_stop is not None:
            params = dict(newline_stop.params)
            tally.samsum = True
        if s.stop and newline_stop is not None and newline_stop.client_cut:
            s.meta["postprocess"] = {"model": open_model.name, "newline_cut": True}
        elif has_post_process(open_model.name):
            s.meta["postprocess"] = {"model": open_model.name, "newline_cut": False}
        return self.client.request(prompt=text, max_tokens=s.max_tokens, temperature=self.temperature,
                                   repeat=self.repeat, chat=False, params=params)
