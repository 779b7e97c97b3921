"""LongBench prompt tables, template filling, and token-level middle truncation.

The prompt templates (`dataset2prompt.json`) and generation lengths (`dataset2maxlen.json`)
are benchmark data, not code: we read them from `<data_dir>/longbench/`, else from our
cache, else fetch them once from the official THUDM/LongBench repository.

Truncation follows the official prediction script (THUDM/LongBench `pred.py`): when the
filled prompt has more tokens than the model accepts, keep the first `int(max/2)` and the
last `int(max/2)` tokens and decode each half separately. The middle goes because both
ends carry instructions (the question is usually repeated after the context).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ...errors import UserError
from ...jsonl_io import read_json_object
from ...tokenizers import Tokenizer
from ...types import Sample

CONFIG_URL = "https://raw.githubusercontent.com/THUDM/LongBench/main/LongBench/config/{name}"
PROMPT_FILE = "dataset2prompt.json"
MAXLEN_FILE = "dataset2maxlen.json"

@dataclass(frozen=True)
class LongBenchConfig:
    """The official per-dataset prompt template and max new tokens."""

    prompts: dict[str, str]
    maxlen: dict[str, int]
    source: str

    def template(self, dataset: str) -> str:
        try:
            return self.prompts[dataset]
        except KeyError:
            raise UserError(f"no prompt for dataset {dataset!r} in {self.source}/{PROMPT_FILE}; use the official file") from None

    def max_new_tokens(self, dataset: str) -> int:
        try:
            return int(self.maxlen[dataset])
        except KeyError:
            raise UserError(f"no max length for dataset {dataset!r} in {self.source}/{MAXLEN_FILE}; use the official file") from None


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, hint="replace it with the official LongBench file")


def _download(url: str, target: Path) -> None:
    """Fetch one official config file into the cache (atomic rename, so a failed
    download never leaves a half-written table behind)."""
    import httpx

    try:
        resp = httpx.get(url, follow_redirects=True, timeout=60)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise UserError(
            f"could not download {url} ({exc}); pass --data-dir DIR containing longbench/{target.name}"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(resp.content)
    tmp.replace(target)


def config_dir(data_dir: Path | None) -> Path:
    """The directory holding the two official tables: `<data_dir>/longbench` when the user
    named a data directory that has them, else the cache (downloaded on first use)."""
    if data_dir is not None:
        local = Path(data_dir) / "longbench"
        if (local / PROMPT_FILE).is_file() and (local / MAXLEN_FILE).is_file():
            return local
    from ...datadir import cache_root

    cached = cache_root() / "longbench" / "config"
    for name in (PROMPT_FILE, MAXLEN_FILE):
        if not (cached / name).is_file():
            _download(CONFIG_URL.format(name=name), cached / name)
    return cached


@lru_cache(maxsize=8)
def _load_config(directory: Path) -> LongBenchConfig:
    prompts = _read_json(directory / PROMPT_FILE)
    maxlen = _read_json(directory / MAXLEN_FILE)
    return LongBenchConfig(prompts={k: str(v) for k, v in prompts.items()}, maxlen={k: int(v) for k, v in maxlen.items()}, source=str(directory))


def load_config(data_dir: Path | None) -> LongBenchConfig:
    """The official LongBench prompt and max-new-token tables."""
    return _load_config(config_dir(data_dir).resolve())


def fill_prompt(template: str, row: Mapping[str, Any], *, where: str = "") -> str:
    """Fill a template from a data row with `str.format(**row)`, as the official script
    does, so braces in the templates mean exactly what they mean there."""
    try:
        return template.format(**row)
    except KeyError as exc:
        raise UserError(f"{where or 'sample'}: field {exc.args[0]!r} required by the prompt template is missing") from None


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


@lru_cache(maxsize=1)
def _model_table() -> dict[str, dict[str, Any]]:
    text = resources.files("asyncbench").joinpath("data/model_context.json").read_text(encoding="utf-8")
    return {k.lower(): v for k, v in json.loads(text)["models"].items()}


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
