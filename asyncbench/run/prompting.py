"""From a sample to the request a run sends: its prompt cut to the budget, in the shape the
benchmark's prompt rules and the server take (the official open models' prompts, a
release's requests, a plain chat or completion request), and what is done to its answer
before it is scored.

`Prompting` is decided once, by planning, from the benchmark's `PromptRules`
(asyncbench/prompt_rules/) and never changes; what building requests finds out as it
goes (prompts cut, tasks sent as chat, each answer's post-processing) is counted in a
`Tally` of the execution that builds them, which the execute step reads back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..client import ModelClient
from ..errors import ProviderError, UserError
from ..prompt_rules import PostProcess, PromptRules
from ..prompt_rules.budget import PromptBudget
from ..prompt_rules.cut import build_request_prompt
from ..prompt_rules.official_models import NewlineStop, OfficialModel, build_chat, has_post_process
from ..tokenizers import Tokenizer
from ..types import Request, Sample

# Tokens a cut prompt may gain when sent: pred.py's chat formats add at most ~45 (vicuna's
# system message, Llama-2 tokens), the re-tokenized seam a few. A cut this far below the
# server's limit is sent without counting it again (no extra /tokenize call).
FIT_SLACK = 64
# Cuts tried before a prompt is called unfit: each cuts by the last overshoot, which is a
# few tokens after the first.
FIT_TRIES = 6


@dataclass
class Tally:
    """What building one execution's requests found: tokens cut from each sample, the
    tasks sent without a template by the rules that went as chat (chat-only APIs),
    whether the official newline rule was sent, and each answer's post-processing."""

    truncated: dict[str, int] = field(default_factory=dict)
    as_chat: set[str] = field(default_factory=set)
    newline_stop: bool = False
    # cut below the budget so the prompt fits the server (tokens below it), and those that
    # cannot fit at all (sent as they are: the server refuses them)
    fitted: dict[str, int] = field(default_factory=dict)
    unfit: list[str] = field(default_factory=list)
    # what is done to a sample's answer before it is scored (samples that have something)
    post: dict[str, PostProcess] = field(default_factory=dict)

    def answer(self, sample_id: str, text: str) -> str:
        """A sample's answer as it is scored: its text post-processed as its request's
        building decided."""
        post = self.post.get(sample_id)
        return post.apply(text) if post is not None else text


@dataclass(frozen=True)
class Prompting:
    """How this run's samples become requests: the client, its generation settings, the
    benchmark's prompt rules, the prompt budget and the tokenizer that cuts to it (None:
    nothing is cut), the official open model the server is (and the newline rule as it
    can be sent to it)."""

    client: ModelClient
    temperature: float
    repeat: int
    rules: PromptRules
    budget: PromptBudget
    tokenizer: Tokenizer | None
    open_model: OfficialModel | None
    newline_stop: NewlineStop | None
    limits: Mapping[str, object]  # what run.json's "truncation" says of them

    def build(self, s: Sample, tally: Tally) -> Request:
        """The sample's request (and, in the tally, what is done to its answer)."""
        client, stop = self.client, self.rules.stop(s.task)
        if self.rules.answer is not None:
            tally.post[s.id] = PostProcess(own=self.rules.answer)
        if s.messages is not None:
            return client.request(messages=s.messages, max_tokens=s.max_tokens, temperature=self.temperature,
                                  repeat=self.repeat, chat=True, stop=stop)
        if self.open_model is not None:
            return self._build_open(s, self.open_model, tally)
        if self.rules.release is not None:  # as the release sends it: never cut (a prompt too long fails at the server)
            return self.release_request(s.prompt or "", s.max_tokens, self.repeat, stop=stop)
        templated = not client.sends_raw(s.chat)
        if templated and not s.chat:
            tally.as_chat.add(s.task)
        text = self._cut(s, True, tally) if templated else self._fit(s, str, tally)
        return client.request(prompt=text, max_tokens=s.max_tokens, temperature=self.temperature,
                              repeat=self.repeat, chat=s.chat, stop=stop)

    def release_request(self, prompt: str, max_tokens: int, repeat: int, *, task: str | None = None,
                        stop: list[str] | None = None) -> Request:
        """The benchmark's release request for `prompt` (its rules' `release`), uncut."""
        assert self.rules.release is not None
        args = self.rules.release.build(prompt, self.client.spec.provider, self.client.serves_open_models)
        return self.client.request(prompt=args.prompt, messages=args.messages, max_tokens=max_tokens,
                                   temperature=args.temperature, repeat=repeat, chat=args.chat, task=task,
                                   stop=stop, params=args.params)

    def limits_found(self, tally: Tally) -> dict[str, object]:
        """run.json's "truncation" block (less the counts): the plan's limits, then what
        building the requests found."""
        out = dict(self.limits)
        if tally.newline_stop and self.newline_stop is not None:
            out["newline_stop"] = self.newline_stop.describe()
        out["no_template_sent_as_chat"] = sorted(tally.as_chat)
        if tally.fitted or tally.unfit:
            out["fitted"] = {"n": len(tally.fitted), "tokens_below_budget": sum(tally.fitted.values()),
                             "unfit": sorted(tally.unfit),
                             "why": "cut further than the budget so the prompt as sent (its chat format and the "
                                    "re-tokenized seam of the cut included) fits the server's context"}
        return out

    def _cut(self, s: Sample, templated: bool, tally: Tally, cut: int | None = None) -> str:
        """The sample's prompt cut to its budget (the room a server's template takes when
        `templated`), or to `cut` tokens; what was removed is counted in the tally."""
        if cut is None:
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

    def _fit(self, s: Sample, wrap: Callable[[str], str], tally: Tally) -> str:
        """The text sent raw for a sample: its prompt cut to the budget, then `wrap`ped
        (pred.py's build_chat), and, where the server's limits are known and the result
        is longer than the server takes (counted as the server counts: the chat format
        and the re-tokenized seam of the cut added), cut again by what it overshoots
        until it fits (budget.py). pred.py's own cut is kept wherever it fits. A prompt
        that cannot fit at all (the answer and the chat format alone fill the context)
        is sent as it is, said in one line before it is sent."""
        budget, tokenizer = self.budget, self.tokenizer
        text = wrap(self._cut(s, False, tally))
        room = budget.room(s.max_tokens)
        first = budget.for_sample(s.max_tokens, False)
        if room is None or tokenizer is None or first is None:
            return text
        if first + FIT_SLACK <= room:
            return text  # cut to at most `first` tokens, which the chat format cannot push past the limit
        cut = first
        for _ in range(FIT_TRIES):
            over = tokenizer.count(text) - room
            if over <= 0:
                if cut < first:
                    tally.fitted[s.id] = first - cut
                return text
            cut -= over
            if cut < 2:
                break
            text = wrap(self._cut(s, False, tally, cut))
        tally.unfit.append(s.id)
        if len(tally.unfit) == 1:
            print(f"asyncbench: {s.id} ({s.task}): its answer ({s.max_tokens} tokens) and chat format leave no room "
                  f"for its prompt in the server's {room + s.max_tokens}-token context; the server will refuse it "
                  "(serve the model with a larger context)", file=sys.stderr, flush=True)
        return text

    def _build_open(self, s: Sample, open_model: OfficialModel, tally: Tally) -> Request:
        """pred.py's request for an official open model: its cut, then its build_chat text
        (chat datasets), sent raw and fitted to the server (`_fit`); the newline rule as
        the server takes it (official_models.NewlineStop), the answer cut at the client
        where it could not be sent, and the model's own post-processing."""
        name = open_model.name
        text = self._fit(s, (lambda t: build_chat(t, name)) if s.chat else str, tally)
        params: dict[str, object] = {}
        newline = self.newline_stop if s.task in self.rules.newline_stop else None
        if newline is not None:
            params = dict(newline.params)
            tally.newline_stop = True
        post = PostProcess(newline_cut=newline is not None and newline.client_cut,
                           model=name if (newline is not None and newline.client_cut) or has_post_process(name) else "",
                           own=self.rules.answer)
        if post:
            tally.post[s.id] = post
        return self.client.request(prompt=text, max_tokens=s.max_tokens, temperature=self.temperature,
                                   repeat=self.repeat, chat=False, stop=list(self.rules.stops.get(s.task, ())),
                                   params=params)
