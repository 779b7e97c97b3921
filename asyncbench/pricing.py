"""Cost from reported usage, with a versioned price table shipped as data.

Prices are looked up by model name: exact match first, then the longest table entry the
name starts with (so `gpt-4o-2024-08-06` prices as `gpt-4o`, `claude-sonnet-4-5-20250929`
as `claude-sonnet-4-5`). Self-hosted models (tgi, openai-compat) cost nothing unless the
user's price file names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import UserError
from .types import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float

    def cost(self, usage: Usage) -> float:
        uncached = max(0, usage.prompt_tokens - usage.cached_prompt_tokens)
        return (uncached * self.input + usage.cached_prompt_tokens * self.cached_input
                + usage.completion_tokens * self.output) / 1e6

    def estimate(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


FREE = Price(0.0, 0.0, 0.0)


class PriceTable:
    def __init__(self, user_file: str | Path | None = None) -> None:
        shipped = json.loads(resources.files("asyncbench.data").joinpath("prices.json").read_text())
        self.version = shipped["version"]
        self.models: dict[str, Price] = {k: Price(**v) for k, v in shipped["models"].items()}
        if user_file:
            try:
                data = json.loads(Path(user_file).read_text())
                for name, v in data.get("models", data).items():
                    self.models[name] = Price(v["input"], v["output"], v.get("cached_input", v["input"]))
                self.version += f"+{Path(user_file).name}"
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise UserError(f"price file {user_file}: {exc}; expected {{\"models\": {{NAME: {{\"input\": USD/Mtok, "
                                f"\"output\": ..., \"cached_input\": ...}}}}}}") from None

    def price(self, model: str, *, by_prefix: bool) -> Price:
        if model in self.models:
            return self.models[model]
        if by_prefix:
            best = max((k for k in self.models if model.startswith(k)), key=len, default=None)
            if best:
                return self.models[best]
        return FREE
