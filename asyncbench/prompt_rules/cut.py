"""The middle cut: a prompt longer than its budget loses its middle, as LongBench's
official prediction script (THUDM/LongBench `pred.py`) cuts it: keep the first
`int(max/2)` and the last `int(max/2)` tokens and decode each half separately. The middle
goes because both ends carry instructions (the question is usually repeated after the
context). Every benchmark whose prompts are cut is cut so (run/prompting.py)."""

from __future__ import annotations

from ..tokenizers import Tokenizer
from ..types import Sample

# A tokenizer adds at most this many special tokens to a text it encodes.
_SPECIAL_TOKENS = 8


def truncate_middle(text: str, tokenizer: Tokenizer, max_tokens: int) -> tuple[str, int]:
    """Cut the middle of `text` so it keeps `max_tokens` of its tokens, exactly as
    LongBench's pred.py: `half = int(max_tokens/2)`, text = decode(ids[:half]) +
    decode(ids[-half:]). Returns (text, number of tokens removed).

    Nothing more is shaved: the joined text can re-encode to a few more tokens than kept
    (a seam inside a multi-byte character, BPE merges across it), as it does in the
    official script; the budget's margin (budget.py) is what leaves room for that.
    """
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be at least 2, got {max_tokens}")
    # A token is at least one byte, and a tokenizer adds a few special ones: a text with
    # that few bytes fits without being tokenized (a server tokenizer is an HTTP call).
    if len(text) * 4 + _SPECIAL_TOKENS <= max_tokens or len(text.encode("utf-8", "surrogatepass")) + \
            _SPECIAL_TOKENS <= max_tokens:
        return text, 0
    cut = getattr(tokenizer, "cut_middle", None)
    if cut is not None:  # a server's tokenizer makes the same cut with its own endpoints
        done: tuple[str, int] = cut(text, max_tokens)
        return done
    ids = tokenizer.encode(text)
    if len(ids) <= max_tokens:
        return text, 0
    half = int(max_tokens / 2)
    return tokenizer.decode(ids[:half]) + tokenizer.decode(ids[-half:]), len(ids) - 2 * half


def build_request_prompt(sample: Sample, *, tokenizer: Tokenizer, max_input_tokens: int | None) -> tuple[str, int]:
    """The text to send for `sample`, middle-truncated to `max_input_tokens` when that is
    known; returns (prompt, tokens removed). The engine records the count per sample."""
    if sample.prompt is None:
        raise ValueError(f"sample {sample.id} has no prompt text to truncate")
    if max_input_tokens is None:
        return sample.prompt, 0
    return truncate_middle(sample.prompt, tokenizer, max_input_tokens)
