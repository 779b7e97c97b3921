"""From what the user named to what a run talks to: the model spec (for `sim`, the
built-in simulator at the URL its command started it on), the prompt budget (flag, TGI
`/info`, context table) and the truncation tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config import SIM, auto_model
from ..errors import UserError
from ..prompt_rules.budget import PromptBudget, from_context, official_maxlen
from ..prompt_rules.context_table import context_window_for
from ..prompt_rules.official_models import (
    OfficialModel,
    counts_special_tokens,
    identify,
    model2path_file,
    read_tables,
    sentencepiece_decode,
)
from ..providers import ModelSpec, ProviderBase, parse_model_spec
from ..tokenizers import Tokenizer, TokenizerFile, get_tokenizer, tiktoken_encoding_for
from ..types import ApiKind

SIM_ENDPOINT = "asyncbench-sim"  # `--model sim`: the built-in simulator, not a model of its own


def resolve_model(model: str, base_urls: Sequence[str], sim_url: str | None, *, endpoint_id: str | None,
                  api: ApiKind, stream: bool) -> ModelSpec:
    """`auto` picks a real API when a key is set, else `sim`: the built-in simulator that
    the command running this started (sim/testing.py), at `sim_url`."""
    model = auto_model(model)
    if model == SIM:
        if sim_url is None:
            raise UserError("--model sim needs the simulator, which `asyncbench run` and asyncbench.evaluate "
                            "start: run through them, or start one (asyncbench.sim.testing.sim_subprocess) "
                            "and pass its URL as execute(cfg, sim_url=URL)")
        # A fixed identity: every simulator run answers the same way, whatever its port.
        return parse_model_spec("openai-compat:sim", [sim_url + "/v1"], endpoint_id=SIM_ENDPOINT, api=api,
                                stream=stream)
    return parse_model_spec(model, list(base_urls), endpoint_id=endpoint_id, api=api, stream=stream)


async def official_model(forced: str | None, spec: ModelSpec, provider: ProviderBase, maxlen: Path | None,
                         folder: str) -> tuple[OfficialModel | None, dict[str, object]]:
    """The LongBench pred.py model this run's server is (official_models.py), by the tables
    of the benchmark's budget table (`maxlen`, found or not in its `folder`), and what
    run.json records about it: which settings apply and why, or why none do (`notice`:
    the one line said before anything is sent when an open-model server is not one of
    pred.py's models, with how to name it). `forced`: --official-model."""
    if not provider.serves_open_models:
        if forced:
            raise UserError(f"--official-model is for self-hosted servers (tgi:, openai-compat:), not {spec.label}")
        return None, {"applied": False, "why": f"{spec.provider} serves API models (their own chat format)"}
    if maxlen is None:
        if forced:
            raise UserError("--official-model needs LongBench's model2maxlen.json: pass --data-dir DIR with "
                            f"DIR/{folder}/model2maxlen.json")
        return None, {"applied": False, "why": "no model2maxlen.json",
                      "notice": f"{spec.label}: pred.py's prompts for open models are not applied: no LongBench "
                                f"model2maxlen.json (pass --data-dir DIR with DIR/{folder}/model2maxlen.json)"}
    tables = read_tables(maxlen.parent)
    served = await provider.served_models(spec.base_urls)
    found = identify(tables, forced=forced, served=served, model=spec.model, where=str(maxlen.parent))
    if found is None:
        serves = f"serves {', '.join(served)}" if served else "does not say which model it serves"
        why = (f"not in {maxlen.name} or {model2path_file(maxlen.parent).name} (the server {serves}): the "
               "server's chat template, its context and --max-input-tokens apply")
        names = ", ".join(sorted(tables[1]))
        notice = (f"{spec.label}: the server {serves}, none of LongBench pred.py's models, so its chat template and "
                  f"context decide the prompts; if it is one of them, pass --official-model NAME ({names})")
        quiet = spec.endpoint_id == SIM_ENDPOINT  # `--model sim` is a baseline answerer, no model to name
        return None, {"applied": False, "model": spec.model, "why": why, **({} if quiet else {"notice": notice})}
    return found, {"applied": True, **found.describe(), "tables": str(maxlen.parent),
                   "model2path": str(model2path_file(maxlen.parent))}


async def prompt_budget(max_input_tokens: int | None, spec: ModelSpec, provider: ProviderBase,
                        official: Path | None, model: OfficialModel | None = None) -> PromptBudget:
    """The prompt budget (budget.py): --max-input-tokens, else the official
    `model2maxlen.json` entry (`official`, the benchmark's copy), else context - 500; the
    context itself from the server (TGI /info, vLLM /v1/models) or the shipped table caps
    every sample."""
    server_input, server_total, server_source = await provider.context_limits(spec.base_urls)
    known = context_window_for(spec.model)
    if max_input_tokens:
        return PromptBudget(max_input_tokens, server_total, "--max-input-tokens", server_input)
    if model is not None:
        return PromptBudget(model.maxlen, server_total, f"{official.name if official else 'model2maxlen.json'} "
                                                        f"({model.name})", server_input)
    if official is not None and (value := official_maxlen(official, spec.model)) is not None:
        return PromptBudget(value, server_total, f"{official.name} (official)", server_input)
    if server_total or server_input:
        if server_total:
            return from_context(server_total, server_source, server_input)
        return PromptBudget(server_input, None, server_source)
    if known:
        context, documented = known
        return from_context(context, "model-context table", documented)
    return PromptBudget(None, None, "none")


async def truncation_tokenizer(tokenizer: str | None, timeout_s: float, spec: ModelSpec, provider: ProviderBase,
                               model: OfficialModel | None = None) -> tuple[Tokenizer, str, bool]:
    """(tokenizer, its name, whether it is a stand-in): --tokenizer when given (a
    tokenizer.json, hf:REPO, a tiktoken name), tiktoken for OpenAI models, the server's
    own (TGI `/tokenize`, vLLM `/tokenize` + `/detokenize`), else cl100k_base as a
    stand-in that run.json and the summary name."""
    if tokenizer:
        try:
            tok = get_tokenizer(tokenizer)
        except Exception as exc:
            raise UserError(f"cannot load tokenizer {tokenizer!r}: {exc}") from None
        if model is not None and not counts_special_tokens(model.name) and isinstance(tok, TokenizerFile):
            tok = TokenizerFile(tok.path, special=False)  # pred.py's chatglm3 branch
        return tok, tokenizer, False
    enc = tiktoken_encoding_for(spec.model)
    if enc:
        return get_tokenizer(enc), enc, False
    strip = model is not None and sentencepiece_decode(model.name)
    server = await provider.server_tokenizer(spec.base_urls, strip, timeout_s)
    if server is not None and model is not None and not counts_special_tokens(model.name):
        server.count_specials = False  # pred.py's chatglm3 branch
    if server is not None:
        return server, str(server.name), False
    return get_tokenizer("cl100k_base"), "cl100k_base", True
