"""From what the user named to what a run talks to: the model spec (starting the
built-in simulator for `sim`), the prompt budget (flag, TGI `/info`, context table) and
the truncation tokenizer.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from .config import RunConfig
from .errors import ProviderError, UserError
from .providers.base import ModelSpec, Provider, parse_model_spec
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




async def max_input_tokens(cfg: RunConfig, spec: ModelSpec, provider: Provider) -> tuple[int | None, str]:
    if cfg.max_input_tokens:
        return cfg.max_input_tokens, "--max-input-tokens"
    if spec.provider == "tgi":
        limit = await fleet_max_input_tokens(spec, provider)
        if limit is not None:
            return limit, f"tgi /info ({len(spec.base_urls)} endpoint{'s' if len(spec.base_urls) > 1 else ''})"
    from .prompts import max_input_tokens_for

    found = max_input_tokens_for(spec.model)
    return (found, "model-context table") if found else (None, "none")


async def fleet_max_input_tokens(spec: ModelSpec, provider: Provider) -> int | None:
    """Ask every TGI replica's /info: the prompt must fit the smallest of them (a fleet
    can mix launch settings), and all must serve the same model, or the cache would
    file one model's answers under another's name. Replicas that are down are left to
    the pool's health checks, as long as one answers."""
    infos: dict[str, dict[str, Any]] = {}
    errors: list[str] = []

    async def ask(url: str) -> None:
        try:
            infos[url] = await provider.info(url)  # type: ignore[attr-defined]
        except ProviderError as exc:
            errors.append(f"{url}/info ({exc.message})")

    async with anyio.create_task_group() as tg:
        for url in spec.base_urls:
            tg.start_soon(ask, url)
    if not infos:
        raise UserError(f"cannot read {'; '.join(errors)}; is the TGI server up?")
    models = {str(i.get("model_id")) for i in infos.values() if i.get("model_id")}
    if len(models) > 1:
        raise UserError(f"the TGI endpoints serve different models ({', '.join(sorted(models))}); "
                        "give one model's replicas per run")
    limits = [int(i["max_input_tokens"]) for i in infos.values() if i.get("max_input_tokens")]
    return min(limits) if limits else None


def truncation_tokenizer(cfg: RunConfig, spec: ModelSpec) -> Tokenizer:
    """The target model's tokenizer when known; cl100k_base as a documented stand-in."""
    if cfg.tokenizer:
        try:
            return get_tokenizer(cfg.tokenizer)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a user error here
            raise UserError(f"cannot load tokenizer {cfg.tokenizer!r}: {exc}") from None
    enc = tiktoken_encoding_for(spec.model)
    return get_tokenizer(enc or "cl100k_base")
