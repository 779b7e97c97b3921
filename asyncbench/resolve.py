"""From what the user named to what a run talks to: the model spec (starting the
built-in simulator for `sim`), the prompt budget (flag, TGI `/info`, context table) and
the truncation tokenizer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .budget import PromptBudget
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




async def prompt_budget(cfg: RunConfig, spec: ModelSpec, provider: ProviderBase,
                        official: Path | None) -> PromptBudget:
    """The prompt budget (budget.py): --max-input-tokens, else the official
    `model2maxlen.json` entry (`official`, the benchmark's copy), else context - 500; the
    context itself from the server (TGI /info, vLLM /v1/models) or the shipped table caps
    every sample."""
    from .budget import from_context, official_maxlen
    from .prompts import context_window_for

    server_input, server_total, server_source = await provider.context_limits(spec.base_urls)
    known = context_window_for(spec.model)
    if cfg.max_input_tokens:
        return PromptBudget(cfg.max_input_tokens, server_total, "--max-input-tokens")
    if official is not None and (value := official_maxlen(official, spec.model)) is not None:
        return PromptBudget(value, server_total, f"{official.name} (official)")
    if server_total or server_input:
        if server_total:
            return from_context(server_total, server_source, server_input)
        return PromptBudget(server_input, None, server_source)
    if known:
        context, documented = known
        return from_context(context, "model-context table", documented)
    return PromptBudget(None, None, "none")


async def truncation_tokenizer(cfg: RunConfig, spec: ModelSpec,
                               provider: ProviderBase) -> tuple[Tokenizer, str, bool]:
    """(tokenizer, its name, whether it is a stand-in): --tokenizer when given, tiktoken
    for OpenAI models, the server's own (TGI `/tokenize`), else cl100k_base as a stand-in
    that run.json and the summary name (pass --tokenizer hf:REPO for the model's own)."""
    if cfg.tokenizer:
        try:
            return get_tokenizer(cfg.tokenizer), cfg.tokenizer, False
        except Exception as exc:
            raise UserError(f"cannot load tokenizer {cfg.tokenizer!r}: {exc}") from None
    enc = tiktoken_encoding_for(spec.model)
    if enc:
        return get_tokenizer(enc), enc, False
    server = await provider.server_tokenizer(spec.base_urls, cfg.timeout_s)
    if server is not None:
        return server, str(server.name), False
    return get_tokenizer("cl100k_base"), "cl100k_base", True
