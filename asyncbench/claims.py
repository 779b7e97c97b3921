"""A server's token counts are claims: checked against what we sent before they are booked.

The ledger, `--max-cost`, the cache and every report take their tokens and dollars from
the usage a server reports. A server that reports another model's usage (900k tokens for
a 3-token prompt), 10^15 tokens, or `1e300` would otherwise be paid as it says, and a
count that is not a number would reach the store as NULL (and every later reading of it
as a TypeError). So every answer's usage passes `checked` before anything prices it
(scheduler._validated for live answers, runners/batch.py for batch results):

- a count must be a non-negative integer (an integral JSON number, `5.0`, is read as 5;
  a bool, a string, a fraction, NaN, infinity or a negative number is unreadable);
- prompt tokens are at most `prompt_bound(request)`: the UTF-8 byte count of the prompt
  as sent, plus PER_MESSAGE_SLACK a message and PROMPT_SLACK. Every tokenizer a server
  runs (byte-level BPE, tiktoken, SentencePiece with byte fallback) covers at least one
  byte of text per token, so a text of N bytes is at most N tokens; what a server adds
  around it (a chat template's role markers, a default system prompt, BOS/EOS) is
  bounded by the slack. A multiple of our own estimate (`client.count`: tiktoken for
  OpenAI models, chars/4 for the rest) would be tighter for English but wrong for CJK
  text (1-2 tokens per character against an estimate of 1/4), so the byte count it is;
- completion tokens are at most the `max_tokens` we sent plus COMPLETION_SLACK (an end
  token counted by the provider's accounting); reasoning models count their reasoning
  within `max_completion_tokens`, which is the same number;
- prompt-cache reads and writes are at most the (bounded) prompt tokens.

A count out of bounds or unreadable is booked at its bound (never NULL, never less than
a real answer could have cost) and the answer is flagged: `Response.usage_flag` says what
was claimed and what was booked, and the flag goes with the answer into the cache and the
ledger, so the summary, run.json, `report` and `samples` show it.
"""

from __future__ import annotations

import math
from typing import Any

from .types import Request, Response, Usage

# What a server may add to a prompt besides its text: per message (role markers, a
# turn separator: a few tokens in every chat template) and per request (BOS, a default
# system prompt such as Llama 3.1's "Cutting Knowledge Date" block or Qwen's "You are
# Qwen..." line: tens of tokens).
PER_MESSAGE_SLACK = 16
PROMPT_SLACK = 256
# Completion tokens past max_tokens a provider's accounting may show (a stop token).
COMPLETION_SLACK = 16
# The flag's wording (also what reports search for).
FLAG = "usage out of bounds"


def prompt_bound(request: Request) -> int:
    """The most prompt tokens any tokenizer makes of `request`'s prompt (module doc)."""
    if request.prompt is not None:
        size, messages = len(request.prompt.encode("utf-8", "surrogatepass")), 1
    else:
        msgs = request.messages or []
        size = sum(len(str(m.get("content", "")).encode("utf-8", "surrogatepass")) for m in msgs)
        messages = max(1, len(msgs))
    return size + PER_MESSAGE_SLACK * messages + PROMPT_SLACK


def completion_bound(request: Request) -> int:
    return max(0, int(request.max_tokens)) + COMPLETION_SLACK


def count_of(value: object) -> int | None:
    """A claimed count as an integer; None where it is not a count at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def claim(block: dict[str, object], name: str) -> Any:
    """A usage count as the server wrote it (absent or null: 0), kept for `checked`."""
    value = block.get(name)
    return 0 if value is None else value


def claim_sum(*values: object) -> object:
    """The sum of claimed counts (Anthropic's input, cache-read and cache-write tokens make
    the prompt), or the first one that is not a count (so that the flag shows it)."""
    counts = [count_of(v) for v in values]
    for value, count in zip(values, counts):
        if count is None:
            return value
    return sum(c for c in counts if c is not None)


def _shown(value: object) -> str:
    """A claimed value as the flag shows it: short, and never the raw text of a string."""
    if isinstance(value, (bool, int, float)) or value is None:
        text = repr(value)
    else:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 24 else text[:21] + "..."


def checked(response: Response, request: Request) -> Response:
    """`response` with its usage bounded (module doc) and `usage_flag` saying what was
    out of bounds, if anything. Idempotent: a checked answer checks the same."""
    usage, notes = response.usage, list[str]()
    fields = {"prompt_tokens": prompt_bound(request), "completion_tokens": completion_bound(request)}
    booked: dict[str, int] = {}
    for name, bound in fields.items():
        booked[name] = _book(name, getattr(usage, name), bound, notes)
    for name in ("cached_prompt_tokens", "cache_write_tokens"):
        booked[name] = _book(name, getattr(usage, name), booked["prompt_tokens"], notes)
    if booked["cached_prompt_tokens"] + booked["cache_write_tokens"] > booked["prompt_tokens"]:
        notes.append(f"cache_write_tokens {booked['cache_write_tokens']} with {booked['cached_prompt_tokens']} "
                     f"cache reads claimed, over the {booked['prompt_tokens']} prompt tokens")
        booked["cache_write_tokens"] = booked["prompt_tokens"] - booked["cached_prompt_tokens"]
    response.usage = Usage(**booked)
    if notes:
        flag = f"{FLAG}: " + "; ".join(notes)
        if response.usage_flag and response.usage_flag != flag:
            flag = f"{response.usage_flag}; {flag}"
        response.usage_flag = flag[:500]
    return response


def _book(name: str, value: object, bound: int, notes: list[str]) -> int:
    count = count_of(value)
    if count is None:
        notes.append(f"{name} {_shown(value)} claimed, not a count: booked at the bound {bound}")
        return bound
    if count > bound:
        notes.append(f"{name} {_shown(value)} claimed, booked at the bound {bound}")
        return bound
    return count
