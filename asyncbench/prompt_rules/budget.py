"""How many prompt tokens a sample may send, as the official scripts decide it.

LongBench's pred.py cuts every prompt to its model's entry in `model2maxlen.json`
(benchmark data, found where the benchmark's `PromptRules.budget_table` says: 3500 for a
4k model, 15500 for a 16k one — the context minus a margin of 500). A model it does not name gets the same rule from its context window: context - 500.
And a prompt may never be so long that the answer does not fit: at most context -
max_new_tokens, minus what a server's chat template adds around our text (TGI rejects
`inputs + max_new_tokens > max_total_tokens`). `--max-input-tokens` overrides the
first part; the context still caps it when it is known.

Where the context comes from, in order: a server that reports it (TGI `/info`, vLLM
`/v1/models`), else the shipped model-context table (context_table.py).

Where the server's own limits are known (`room`), a prompt sent raw is checked against
them after it is cut and wrapped (run/prompting.py): pred.py's text is its cut *plus* the
chat format `build_chat` writes around it, and the two cut halves re-tokenize to a few
more tokens than were kept, so a cut to exactly `context - max_new_tokens` is still
refused (42 of 89 samples at a 2,048-token context). Those prompts are cut further, by
what they overshoot, until they fit; where pred.py's own cut fits, it is kept unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The official margin: model2maxlen's entries are the context minus 500.
OFFICIAL_MARGIN = 500
# Tokens a server's chat template adds around a chat prompt (role markers, BOS, the
# generation prompt): reserved where the server applies a template and the context is a
# hard limit. Llama-2/3, Qwen and Mistral templates add 5-40.
CHAT_TEMPLATE_TOKENS = 64
MODEL2MAXLEN = "model2maxlen.json"


@dataclass(frozen=True)
class PromptBudget:
    """`input`: the most prompt tokens any sample may send (None: no cut). `total`: the
    context (prompt + new tokens) when known, which caps each sample's prompt to leave
    room for its answer."""

    input: int | None
    total: int | None
    source: str
    server_input: int | None = None  # the server's own prompt limit (TGI max_input_tokens), where it says

    def for_sample(self, max_new_tokens: int, templated: bool) -> int | None:
        """The cut for one sample; `templated`: the server wraps it in a chat template."""
        limits = [self.input] if self.input is not None else []
        if self.total is not None:
            limits.append(self.total - max_new_tokens - (CHAT_TEMPLATE_TOKENS if templated else 0))
        return max(2, min(limits)) if limits else None

    def room(self, max_new_tokens: int) -> int | None:
        """The most tokens a prompt of this sample may have on the server, as the server
        counts them (its special tokens included), None where the server's limits are not
        known: TGI refuses `inputs > max_input_tokens` and `inputs + max_new_tokens >
        max_total_tokens` (router/src/validation.rs), vLLM and llama.cpp the second."""
        limits = ([self.total - max_new_tokens] if self.total is not None else []) + \
                 ([self.server_input] if self.server_input is not None else [])
        return min(limits) if limits else None

    def describe(self) -> dict[str, object]:
        return {"max_input_tokens": self.input, "max_total_tokens": self.total, "source": self.source}


def from_context(context: int, source: str, server_input: int | None = None) -> PromptBudget:
    """The official rule for a model the table does not name: context - 500 (and a
    server's own input limit where it states a smaller one)."""
    limits = [context - OFFICIAL_MARGIN] + ([server_input] if server_input else [])
    return PromptBudget(min(limits), context, source, server_input or None)


def official_maxlen(path: Path, model: str) -> int | None:
    """The model's entry in an official `model2maxlen.json` (names as the release writes
    them, e.g. llama2-7b-chat-4k; matched case-insensitively on the name after any
    organisation prefix)."""
    from ..jsonl_io import read_json_object

    if not path.is_file():
        return None
    table = {str(k).lower(): int(v) for k, v in read_json_object(path, hint="use the official file").items()}
    return table.get(model.strip().lower().rsplit("/", 1)[-1])
