"""The official open models: those LongBench's `pred.py` runs, and how it prompts each of
them. A benchmark turns this on with `PromptRules(open_models=True)` (rules.py); its
budget table's folder holds the tables.

pred.py (THUDM/LongBench, `LongBench/pred.py`) reads two tables, benchmark data that we
read as data: `model2path.json` (its name -> the Hugging Face repository it loads, e.g.
`llama2-7b-chat-4k` -> `meta-llama/Llama-2-7b-chat-hf`) and `model2maxlen.json` (its name
-> the prompt budget in tokens). For one of these models it

1. tokenizes the filled prompt with the model's tokenizer, special tokens included
   (chatglm3: without), and when that is longer than the budget keeps
   `decode(ids[:half], skip_special_tokens=True) + decode(ids[-half:], skip_special_tokens=True)`
   with `half = int(budget/2)`;
2. wraps the (cut) text in `build_chat` — the model's own chat format, written out as
   text, not the tokenizer's chat template — except for the few-shot and code datasets;
3. generates from `tokenizer(prompt)`: the text plus the tokenizer's special tokens (BOS).

A server that is sent that text raw (TGI `/generate`, `/v1/completions`) adds the same
special tokens, so the model sees what pred.py gave it. Which model a server runs comes
from the server itself (TGI `/info` `model_id`; vLLM `/v1/models` `id` and `root`, the
repository behind a `--served-model-name`; llama.cpp's alias) mapped through model2path,
or from `--official-model NAME`; `identify` says which applied and why. model2path.json
is the data directory's where it has one, else the copy shipped in
`asyncbench/data/longbench/` (the LongBench layouts users have carry model2maxlen.json
but not model2path.json: without it no server was ever recognised).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import UserError
from ..tokenizers import Tokenizer
from .budget import MODEL2MAXLEN

MODEL2PATH = "model2path.json"

# fastchat's "vicuna_v1.1" conversation template (fastchat/conversation.py), which
# pred.py gets with get_conversation_template("vicuna"): system message, then
# "USER: {prompt} ASSISTANT:" (sep " ", the open assistant turn ends with its colon).
VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                 "The assistant gives helpful, detailed, and polite answers to the user's questions.")
XGEN_HEADER = ("A chat between a curious human and an artificial intelligence assistant. "
               "The assistant gives helpful, detailed, and polite answers to the human's questions.\n\n")


def build_chat(prompt: str, model_name: str) -> str:
    """pred.py's `build_chat`, branch for branch (the name tests are pred.py's own, in
    its order), as the text a server is sent raw.

    chatglm3's `build_chat_input` returns ids: `[gMASK] sop <|user|> "\\n" prompt
    <|assistant|>`; the text here is what follows the `[gMASK]sop` prefix, which the
    chatglm tokenizer adds itself to any text it encodes (as it does for chatglm2's
    `build_prompt` text)."""
    if "chatglm3" in model_name:
        return f"<|user|>\n{prompt}<|assistant|>"
    if "chatglm" in model_name:  # tokenization_chatglm.py build_prompt, no history
        return f"[Round 1]\n\n问：{prompt}\n\n答："
    if "longchat" in model_name or "vicuna" in model_name:
        return f"{VICUNA_SYSTEM} USER: {prompt} ASSISTANT:"
    if "llama2" in model_name:
        return f"[INST]{prompt}[/INST]"
    if "xgen" in model_name:
        return XGEN_HEADER + f" ### Human: {prompt}\n###"
    if "internlm" in model_name:
        return f"<|User|>:{prompt}<eoh>\n<|Bot|>:"
    return prompt


def post_process(response: str, model_name: str) -> str:
    """pred.py's `post_process` of a generated answer."""
    if "xgen" in model_name:
        return response.strip().replace("Assistant:", "")
    if "internlm" in model_name:
        return response.split("<eoa>")[0]
    return response


def has_post_process(model_name: str) -> bool:
    return "xgen" in model_name or "internlm" in model_name


def first_line(text: str) -> str:
    """An answer as pred.py's newline stop would have ended it where the stop could not be
    sent (NewlineStop.client_cut): cut after its first newline past the first generated
    character (pred.py generates at least one token before the newline ends it)."""
    at = text.find("\n", 1)
    return text if at < 0 else text[: at + 1]


@dataclass(frozen=True)
class NewlineStop:
    """How samsum's rule is sent: pred.py generates with `min_length=context+1` and the
    newline token among the end tokens, i.e. at least one new token, then stop at a
    newline (which stays in the answer). vLLM takes exactly that (`min_tokens: 1`, and
    the newline token in `stop_token_ids`, which min_tokens holds back for the first
    token; sampling_params.py); elsewhere nothing is sent and the answer is cut at its
    first newline after the first character (`client_cut`)."""

    params: dict[str, object]
    client_cut: bool
    rule: str

    def describe(self) -> dict[str, object]:
        return {"params": self.params, "client_cut": self.client_cut, "rule": self.rule}


class MinTokensServer(Protocol):
    """A server that may say whether it takes vLLM's `min_tokens` (providers/base.py)."""

    async def takes_min_tokens(self, base_urls: list[str]) -> bool: ...


async def newline_stop(provider: MinTokensServer, base_urls: list[str], tokenizer: Tokenizer | None) -> NewlineStop:
    """pred.py's newline rule (samsum's) as this server can be sent it (NewlineStop)."""
    if await provider.takes_min_tokens(base_urls):
        token_id = getattr(tokenizer, "token_id", None)  # a server's or tokenizer.json's: the newline's own id
        if token_id is not None:
            newline = int(token_id("\n"))
            return NewlineStop({"min_tokens": 1, "stop_token_ids": [newline]}, False,
                               f"vLLM min_tokens 1 + stop_token_ids [{newline}] (pred.py's newline token)")
        return NewlineStop({"min_tokens": 1, "stop": ["\n"]}, False, "vLLM min_tokens 1 + stop \"\\n\"")
    return NewlineStop({}, True, "no stop sent; the answer is cut at its first newline after the first "
                                 "generated character")


def counts_special_tokens(model_name: str) -> bool:
    """Whether pred.py's cut counts the tokenizer's special tokens (all but chatglm3)."""
    return "chatglm3" not in model_name


def sentencepiece_decode(model_name: str) -> bool:
    """Llama-family tokenizers (llama2, longchat, vicuna): decoding a span drops the
    space its first piece `▁` stands for, which a cut made from a server's offsets must
    reproduce (tokenizers' `Strip` decoder, SentencePiece's decode)."""
    return any(k in model_name for k in ("llama2", "longchat", "vicuna"))


@dataclass(frozen=True)
class OfficialModel:
    """A model of pred.py's tables and why the run uses its settings."""

    name: str  # pred.py's name, e.g. llama2-7b-chat-4k
    path: str  # model2path.json's repository
    maxlen: int  # model2maxlen.json's budget
    reason: str

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "path": self.path, "max_input_tokens": self.maxlen, "why": self.reason,
                "template": "pred.py build_chat, sent raw", "cut": "pred.py decode(ids[:half]) + decode(ids[-half:])"}


def _base(name: str) -> str:
    return name.strip().lower().rsplit("/", 1)[-1]


def identify(tables: tuple[dict[str, str], dict[str, int]], *, forced: str | None, served: list[str],
             model: str, where: str) -> OfficialModel | None:
    """The official model a run is for: `forced` (--official-model) must be one of
    model2maxlen's names; else the first id the server reports (`served`) whose
    repository model2path lists (case-insensitive, with or without its organisation);
    else our model name when it is pred.py's name. None: LongBench does not list it."""
    paths, maxlen = tables
    if forced is not None:
        if forced not in maxlen:
            raise UserError(f"--official-model {forced!r} is not in {where}/{MODEL2MAXLEN}; use one of "
                            f"{', '.join(sorted(maxlen))}")
        return OfficialModel(forced, paths.get(forced, ""), int(maxlen[forced]), "--official-model")
    by_repo = {p.lower(): n for n, p in paths.items() if n in maxlen}
    by_base = {_base(p): n for n, p in paths.items() if n in maxlen}
    for ident in served:
        name = by_repo.get(ident.strip().lower()) or by_base.get(_base(ident))
        if name is not None:
            return OfficialModel(name, paths[name], int(maxlen[name]),
                                 f"the server serves {ident}, {MODEL2PATH}'s {name}")
    lowered = {n.lower(): n for n in maxlen}
    if (name := lowered.get(_base(model))) is not None:
        return OfficialModel(name, paths.get(name, ""), int(maxlen[name]), f"the model is named {name}")
    return None


def shipped_model2path() -> Path:
    """The release's model2path.json as shipped with the package (data/longbench/README.md)."""
    from importlib import resources

    return Path(str(resources.files("asyncbench").joinpath(f"data/longbench/{MODEL2PATH}")))


def model2path_file(folder: Path) -> Path:
    """The model2path.json that goes with the model2maxlen.json in `folder`: the folder's
    own where it has one (a user's tables), else the shipped copy of the release's."""
    own = folder / MODEL2PATH
    return own if own.is_file() else shipped_model2path()


def read_tables(folder: Path) -> tuple[dict[str, str], dict[str, int]]:
    """model2path.json (model2path_file) and the folder's model2maxlen.json."""
    from ..jsonl_io import read_json_object

    hint = "replace it with the official LongBench file"
    path_file, maxlen_file = model2path_file(folder), folder / MODEL2MAXLEN
    paths = read_json_object(path_file, hint=hint)
    maxlen = read_json_object(maxlen_file, hint=hint) if maxlen_file.is_file() else {}
    try:
        return {str(k): str(v) for k, v in paths.items()}, {str(k): int(v) for k, v in maxlen.items()}
    except (TypeError, ValueError):
        raise UserError(f"{maxlen_file}: every value must be a whole number of tokens; {hint}") from None
