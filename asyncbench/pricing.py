"""Cost from reported usage, with a versioned price table shipped as data.

Prices are looked up by model name: exact match first, then the longest table entry the
name starts with (so `gpt-4o-2024-08-06` prices as `gpt-4o`, `claude-sonnet-4-5-20250929`
as `claude-sonnet-4-5`). Self-hosted models (tgi, openai-compat) cost nothing unless the
user's price file names them. A model of a provider that bills per token (OpenAI,
Anthropic) missing from the table is *unpriced*: its cost is unknown, not $0, and
`--max-cost` refuses it (see `Price.priced`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from .errors import UserError
from .types import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float  # a prompt-cache read
    priced: bool = True  # False: a billed model missing from the table (its costs read 0)
    cache_write: float | None = None  # a prompt-cache write (Anthropic: 1.25x input); None: input
    batch: float = 1.0  # the share of the price paid through the provider's batch API

    def cost(self, usage: Usage, discount: float = 1.0) -> float:
        """USD for this usage; `discount` is the share paid (`batch` for a batch answer)."""
        written = usage.cache_write_tokens
        uncached = max(0, usage.prompt_tokens - usage.cached_prompt_tokens - written)
        write = self.input if self.cache_write is None else self.cache_write
        return discount * (uncached * self.input + usage.cached_prompt_tokens * self.cached_input
                           + written * write + usage.completion_tokens * self.output) / 1e6

    def estimate(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


FREE = Price(0.0, 0.0, 0.0)
UNPRICED = Price(0.0, 0.0, 0.0, priced=False)


SHAPE = '{"models": {NAME: {"input": USD per Mtok, "output": ..., "cached_input": ...}}}'


def _read_prices(path: Path) -> dict[str, Price]:
    """A user's price file, every entry checked: a NaN or negative price would silently
    switch off --max-cost."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read price file {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"price file {path} is not JSON ({exc}); expected {SHAPE}") from None
    models = data.get("models", data) if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise UserError(f"price file {path}: expected {SHAPE}")
    out: dict[str, Price] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise UserError(f"price file {path}: entry {name!r} needs \"input\" and \"output\"; expected {SHAPE}")
        values = {k: entry.get(k, entry["input"] if k == "cached_input" else None)
                  for k in ("input", "output", "cached_input")}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise UserError(f"price file {path}: {name}.{key} must be a finite number >= 0 (USD per million "
                                f"tokens), not {value!r}")
        out[str(name)] = Price(float(values["input"] or 0.0), float(values["output"] or 0.0),
                                float(values["cached_input"] or 0.0))
    return out


class PriceTable:
    def __init__(self, user_file: str | Path | None = None) -> None:
        shipped = json.loads(resources.files("asyncbench.data").joinpath("prices.json").read_text())
        self.version = shipped["version"]
        self.models: dict[str, Price] = {k: Price(**v) for k, v in shipped["models"].items()}
        # per provider: the share paid through its batch API, and the cache-write price
        # as a multiple of the input price
        self.batch_discount: dict[str, float] = dict(shipped.get("batch_discount", {}))
        self.cache_write_multiplier: dict[str, float] = dict(shipped.get("cache_write_multiplier", {}))
        if user_file:
            self.models.update(_read_prices(Path(user_file)))
            self.version += f"+{Path(user_file).name}"

    def price(self, model: str, *, by_prefix: bool, billed: bool = False, provider: str | None = None) -> Price:
        found = self._find(model, by_prefix) or (UNPRICED if billed else FREE)
        if provider is None:
            return found
        mult = self.cache_write_multiplier.get(provider)
        write = found.cache_write if found.cache_write is not None or mult is None else found.input * mult
        return replace(found, cache_write=write, batch=self.batch_discount.get(provider, 1.0))

    def _find(self, model: str, by_prefix: bool) -> Price | None:
        if model in self.models:
            return self.models[model]
        if by_prefix:
            best = max((k for k in self.models if model.startswith(k)), key=len, default=None)
            if best:
                return self.models[best]
        return None


NOTIONAL = ("dollars are notional: the built-in simulator is priced like a small API model "
            "(prices.json \"sim\") so that cost accounting can be shown; no money was spent")


def is_simulator(model: str) -> bool:
    """Whether a run's model (its spec, e.g. "openai-compat:sim") is the built-in simulator,
    whose dollars are notional."""
    return model.rsplit(":", 1)[-1] == "sim"
