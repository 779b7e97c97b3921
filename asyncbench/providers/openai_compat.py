"""`openai-compat:<model>`: any OpenAI-compatible server (vLLM, TGI's Messages API,
llama.cpp, the simulator) over plain HTTP with our lean HTTP/1.1 client (http1.py) — no SDK retries, low overhead."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import anyio

from ..errors import ProviderError
from ..json_values import as_list
from ..types import ApiKind, Request, Response, Timing
from .base import LentTokenizer, ProviderBase
from .http import HTTPClient, SyncClient, post_object
from .llamacpp_wire import LlamaCppTokenizer, is_llamacpp, slot_context
from .openai_wire import OpenAIStream, parse_body, request_body
from .stream_reply import stream_caps


class VLLMTokenizer:
    """A vLLM server's tokenizer: ids from `POST /tokenize`, text from `POST /detokenize`,
    so pred.py's cut (decode of each half, special tokens skipped) is made with the
    model's own tokens.

    vLLM's /detokenize decodes with special tokens kept (entrypoints/openai/
    serving_tokenization.py: `tokenizer.decode(ids)`, whose `skip_special_tokens` is
    False), so the ids are taken without special tokens (`add_special_tokens: false`)
    and the ones the tokenizer adds around a text (the BOS) are counted, as pred.py's
    `tokenizer(prompt)` counts them, but never sent back to be decoded."""

    name = "vllm /tokenize"

    def __init__(self, root: str, model: str, headers: dict[str, str], timeout: float = 60.0) -> None:

        self.root, self.model = root, model
        self.client = SyncClient(root, headers, timeout)  # the run's --timeout
        self._around: tuple[int, int] | None = None
        self.count_specials = True  # pred.py counts the BOS (its chatglm3 branch does not)

    def _post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        return post_object(self.client, f"{self.root}{path}", {"model": self.model, **body})

    def tokenize(self, text: str, special: bool) -> list[int]:
        tokens = self._post("/tokenize", {"prompt": text, "add_special_tokens": special}).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ProviderError("fatal", f"{self.root}/tokenize: no token ids in the reply")
        return tokens

    def around(self) -> tuple[int, int]:
        """How many special tokens the tokenizer adds before and after a text."""
        if self._around is None:
            bare, full = self.tokenize("a", False), self.tokenize("a", True)
            before = next((i for i in range(len(full)) if full[i:i + len(bare)] == bare), 0)
            self._around = (before, max(0, len(full) - len(bare) - before))
        return self._around

    def encode(self, text: str) -> list[int]:
        return self.tokenize(text, True)

    def decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        text = self._post("/detokenize", {"tokens": ids}).get("prompt")
        if not isinstance(text, str):
            raise ProviderError("fatal", f"{self.root}/detokenize: no text in the reply")
        return text

    def cut_middle(self, text: str, max_tokens: int) -> tuple[str, int]:
        before, after = self.around() if self.count_specials else (0, 0)
        ids = self.tokenize(text, False)
        total = before + len(ids) + after
        if total <= max_tokens:
            return text, 0
        half = int(max_tokens / 2)
        # positions in pred.py's ids (specials included) -> positions in `ids`
        head = ids[: max(0, half - before)]
        tail = ids[len(ids) - max(0, half - after):] if half > after else []
        return self.decode(head) + self.decode(tail), total - 2 * half

    def token_id(self, text: str) -> int:
        """pred.py's `tokenizer.encode(text, add_special_tokens=False)[-1]`."""
        return self.tokenize(text, False)[-1]

    def count(self, text: str) -> int:
        return len(self.encode(text))


class OpenAICompatProvider(ProviderBase):
    name = "openai-compat"
    serves_open_models = True
    ends_in_time = True  # send is one HTTPClient.post_json

    def __init__(self, model: str, api_key: str | None, api: ApiKind = "chat") -> None:
        super().__init__(model, api_key, api)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = HTTPClient(headers)
        self.unreachable: str | None = None  # set by context_limits when no server answered: the run's first error

    def sends_raw(self, chat: bool) -> bool:
        """Prompts LongBench's pred.py sends without a chat template go to /v1/completions
        as raw text (vLLM, TGI and llama.cpp all serve it), the rest as one chat message."""
        return self.api == "completion" or not chat

    async def _models(self, base_url: str) -> dict[str, object] | None:
        """The server's `/v1/models` body, or None when it does not answer one."""
        try:
            return await self.http.get_json(f"{base_url.rstrip('/')}/models")
        except ProviderError:
            return None

    async def server_tokenizer(self, base_urls: list[str], strip_space: bool = False, timeout: float = 60.0) -> LentTokenizer | None:
        """The first replica's own tokenizer, by server kind: llama.cpp (its `/v1/models`
        says `owned_by: llamacpp`; llamacpp_wire.py, which learns the decoder's space rule
        from the server, so `strip_space` is not needed) or vLLM's `POST /tokenize` and
        `/detokenize` (beside /v1, at the server's root). Guessing is not enough: llama.cpp
        answers a vLLM body with `{"tokens": []}`, so the probe must get ids for "a"."""
        root = base_urls[0].rstrip("/").removesuffix("/v1")
        models = await self._models(base_urls[0])
        if models is not None and is_llamacpp(models):
            try:
                return await anyio.to_thread.run_sync(LlamaCppTokenizer, root, self.http.headers, timeout,
                                                    abandon_on_cancel=True)
            except ProviderError:
                return None
        tok = VLLMTokenizer(root, self.model, self.http.headers, timeout)
        try:
            if not await anyio.to_thread.run_sync(tok.tokenize, "a", False, abandon_on_cancel=True):
                return None
            await anyio.to_thread.run_sync(tok.around, abandon_on_cancel=True)
        except ProviderError:
            return None
        return tok

    async def _first_models(self, base_urls: list[str]) -> list[object]:
        """The `data` entries of the first replica's `/v1/models` that answers; [] if none does."""
        for url in base_urls:
            if (models := await self._models(url)) is not None:
                return as_list(models.get("data"))
        return []

    async def served_models(self, base_urls: list[str]) -> list[str]:
        """What `/v1/models` says is served: each base model's `id` and its `root`. vLLM
        lists `id` = the --served-model-name (or the model's path) and `root` = the model's
        path or hub repository (vllm/entrypoints/openai/serving_models.py,
        `show_available_models`: `ModelCard(id=base_model.name, root=base_model.model_path)`),
        so a server started with `--served-model-name llama` is still known as
        meta-llama/Llama-2-7b-chat-hf. Adapter cards (a `parent`) are not base models."""
        out: list[str] = []
        for m in await self._first_models(base_urls):
            if isinstance(m, dict) and not m.get("parent"):
                out += [str(m[k]) for k in ("id", "root") if isinstance(m.get(k), str) and m[k]]
        return list(dict.fromkeys(out))

    async def takes_min_tokens(self, base_urls: list[str]) -> bool:
        """Whether the server is vLLM, which takes `min_tokens` and `stop_token_ids`: its
        /v1/models entries carry `max_model_len` (vLLM's ModelCard, protocol.py)."""
        return any(isinstance(m, dict) and "max_model_len" in m for m in await self._first_models(base_urls))

    async def context_limits(self, base_urls: list[str]) -> tuple[int | None, int | None, str]:
        """vLLM's `/v1/models` reports each model's `max_model_len` (the context), llama.cpp's
        its slot's `meta.n_ctx`; the smallest over the replicas that answer. Servers that
        do not say give nothing."""
        totals, fields, down = [], set(), []
        for url in base_urls:
            try:
                data = await self.http.get_json(f"{url}/models")
            except ProviderError as exc:
                if (why := exc.unreachable) is not None:  # refused, no route, unknown host
                    down.append((url, why))
                continue
            if is_llamacpp(data):
                if (n_ctx := slot_context(data, self.model)) is not None:
                    totals.append(n_ctx)
                    fields.add("meta.n_ctx")
                continue
            models = [m for m in as_list(data.get("data")) if isinstance(m, dict)]
            mine = [m for m in models if m.get("id") == self.model] or models[:1]
            if mine and isinstance(mine[0].get("max_model_len"), int):
                totals.append(int(mine[0]["max_model_len"]))
                fields.add("max_model_len")
        if down and len(down) == len(base_urls):  # said before "cannot find the context length" (engine)
            url, why = down[0]
            self.unreachable = (f"cannot reach {urlsplit(url).netloc} ({why}); is the server running? "
                                f"check --base-url {url}")
        if not totals:
            return None, None, ""
        return None, min(totals), f"/v1/models {'/'.join(sorted(fields))} ({len(totals)} endpoint{'s' if len(totals) > 1 else ''})"

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        completion = self.api == "completion" or request.messages is None
        url = f"{base_url}/completions" if completion else f"{base_url}/chat/completions"
        kind: ApiKind = "completion" if completion else "chat"
        t0, sent_at = time.perf_counter(), time.time()
        reply = OpenAIStream(url, request.max_tokens, self.max_response_bytes, chat=not completion) if self.stream else None
        caps = stream_caps(request.max_tokens, self.max_response_bytes)
        data, info, _ = await self.http.post_stream(url, request_body(request, kind, stream=self.stream), timeout,
                                                    None if reply is None else reply.feed, caps)
        if reply is not None and data is None:
            text, usage, finish = reply.answer()
            timing = reply.timing(t0, sent_at)
        else:  # not asked to stream, or the server answered whole
            (text, usage, finish), timing = parse_body(data), Timing(sent_at)
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info, timing=timing)

    async def aclose(self) -> None:
        await self.http.aclose()
