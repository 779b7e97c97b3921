"""The shipped model-context table (`asyncbench/data/model_context.json`): a model's
context window and, where its provider states one, its input limit. The prompt budget
(budget.py) falls back on it for a model that neither the benchmark's budget table nor
the server names."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import NotRequired, TypedDict


class ModelContext(TypedDict):
    """One model's entry in the table."""

    context_window: int
    max_input_tokens: NotRequired[int | None]
    max_output_tokens: NotRequired[int | None]
    source: NotRequired[str]


@lru_cache(maxsize=1)
def _model_table() -> dict[str, ModelContext]:
    text = resources.files("asyncbench").joinpath("data/model_context.json").read_text(encoding="utf-8")
    models: dict[str, ModelContext] = json.loads(text)["models"]
    return {k.lower(): v for k, v in models.items()}


def _normalise(model_name: str) -> str:
    """`openai:gpt-4o`, `meta-llama/Meta-Llama-3.1-8B-Instruct` -> `gpt-4o`,
    `llama-3.1-8b-instruct`: drop provider and organisation prefixes, a `meta-` prefix,
    and case."""
    name = model_name.strip().lower().rsplit("/", 1)[-1]
    provider, sep, rest = name.partition(":")
    if sep and provider.isalpha() and rest:
        name = rest
    return name.removeprefix("meta-")


_BOUNDARY = re.compile(r"[-@_:]")


def context_window_for(model_name: str) -> tuple[int, int | None] | None:
    """(context window, documented max input tokens or None) of a model from the shipped
    table, or None if unknown.

    The longest table key that is the model name, or a prefix of it ending at `-`, `@`, `_`
    or `:`, wins (so `gpt-4o-mini-2024-07-18` is `gpt-4o-mini`, never `gpt-4`).
    """
    name = _normalise(model_name)
    table = _model_table()
    best: str | None = None
    for key in table:
        if name == key or (name.startswith(key) and _BOUNDARY.match(name, len(key))):
            if best is None or len(key) > len(best):
                best = key
    if best is None:
        return None
    entry = table[best]
    documented = entry.get("max_input_tokens")
    return int(entry["context_window"]), int(documented) if documented else None
