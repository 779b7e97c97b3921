"""From what the user named to what a run talks to: the model spec (starting the
built-in simulator for `sim`), the prompt budget (flag, TGI `/info`, context table) and
the truncation tokenizer.
"""

from __future__ import annotations

import os
from typing import Any

from .config import RunConfig
from .errors import UserError
from .providers import ModelSpec, ProviderBase, parse_model_spec
from .tokenizers import Tokenizer, get_tokenizer, tiktoken_encoding_for


class SimProcesses(list[Any]):
    """Subprocesses to stop at the end of a run (the simulator for `--model sim`)."""

    def close(self) -> None:
        from .sim.testing import stop_sim_subprocess

        for proc in self:
            stop_sim_subprocess(proc)


def resolve_model(model: str, base_urls: list[str], cfg: RunConfig, stack: SimProcesses) -> ModelSpec:
    """`sim` starts the built-in simulator; `auto` picks a real API when a key is set."""
    if model == "auto":
        if os.environ.get("OPENAI_API_KEY"):
            model = "openai:gpt-4o-mini"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            model = "anthropic:claude-haiku-4-5"
        else:
            model = "sim"
    if model == "sim":
        from .sim.testing import start_sim_subprocess

        proc, base_url = start_sim_subprocess([])
        stack.append(proc)
        # A fixed identity: every simulator run answers the same way, whatever its port.
        return parse_model_spec("openai-compat:sim", [base_url + "/v1"], endpoint_id="asyncbench-sim", api=cfg.api)
    return parse_model_spec(model, base_urls, endpoint_id=cfg.endpoint_id, api=cfg.api)




async def max_input_tokens(cfg: RunConfig, spec: ModelSpec, provider: ProviderBase) -> tuple[int | None, str]:
    """The prompt budget: --max-input-tokens, else what the server reports, else the
    shipped model-context table."""
    if cfg.max_input_tokens:
        return cfg.max_input_tokens, "--max-input-tokens"
    limit, source = await provider.max_input_tokens(spec.base_urls)
    if limit is not None:
        return limit, source
    from .prompts import max_input_tokens_for

    found = max_input_tokens_for(spec.model)
    return (found, "model-context table") if found else (None, "none")


def truncation_tokenizer(cfg: RunConfig, spec: ModelSpec) -> Tokenizer:
    """The target model's tokenizer when known; cl100k_base as a documented stand-in."""
    if cfg.tokenizer:
        try:
            return get_tokenizer(cfg.tokenizer)
        except Exception as exc:
            raise UserError(f"cannot load tokenizer {cfg.tokenizer!r}: {exc}") from None
    enc = tiktoken_encoding_for(spec.model)
    return get_tokenizer(enc or "cl100k_base")
