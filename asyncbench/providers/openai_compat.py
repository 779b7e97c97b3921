"""`openai-compat:<model>`: any OpenAI-compatible server (vLLM, TGI's Messages API,
llama.cpp, the simulator) over plain HTTP with aiohttp — no SDK retries, low overhead."""

from __future__ import annotations

import time
from typing import Any

import anyio

from ..errors import ProviderError
from ..types import Request, Response
from .base import ProviderBase
from .http import HTTPClient
from .openai_wire import parse_body, request_body


class VLLMTokenizer:
    """A vLLM server's tokenizer: ids from `POST /tokenize`, text from `POST /detokenize`,
    so the official cut (decode of each half) is made with the model's own tokens."""

    name = "vllm /tokenize"

    def __init__(self, root: str, model: str, headers: dict[str, str], timeout: float = 60.0) -> None:
        import httpx

        self.root, self.model = root, model
        self.client = httpx.Client(headers=headers, timeout=timeout)  # the run's --timeout

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            resp = self.client.post(f"{self.root}{path}", json={"model": self.model, **body})
            resp.raise_for_status()
            data = resp.json()
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            return data
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderError("fatal", f"{self.root}{path}: {exc}") from None

    def encode(self, text: str) -> list[int]:
        tokens = self._post("/tokenize", {"prompt": text, "add_special_tokens": True}).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ProviderError("fatal", f"{self.root}/tokenize: no token ids in the reply")
        return tokens

    def decode(self, ids: list[int]) -> str:
        text = self._post("/detokenize", {"tokens": ids}).get("prompt")
        if not isinstance(text, str):
            raise ProviderError("fatal", f"{self.root}/detokenize: no text in the reply")
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))


class OpenAICompatProvider(ProviderBase):
    name = "openai-compat"

    def __init__(self, model: str, api_key: str | None, api: str = "chat") -> None:
        super().__init__(model, api_key, api)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = HTTPClient(headers)

    def sends_raw(self, chat: bool) -> bool:
        """Prompts LongBench's pred.py sends without a chat template go to /v1/completions
        as raw text (vLLM, TGI and llama.cpp all serve it), the rest as one chat message."""
        return self.api == "completion" or not chat

    async def server_tokenizer(self, base_urls: list[str], timeout: float = 60.0) -> Any:
        """vLLM's `POST /tokenize` and `/detokenize` (the model's own tokenizer), when the
        first replica serves them (they sit beside /v1, at the server's root)."""
        root = base_urls[0].rstrip("/").removesuffix("/v1")
        tok = VLLMTokenizer(root, self.model, self.http.headers, timeout)
        try:
            await anyio.to_thread.run_sync(tok.encode, "a")
        except ProviderError:
            return None
        return tok

    async def context_limits(self, base_urls: list[str]) -> tuple[int | None, int | None, str]:
        """vLLM's `/v1/models` reports each model's `max_model_len` (the context); the
        smallest over the replicas that answer. Servers that do not say give nothing."""
        totals = []
        for url in base_urls:
            try:
                data = await self.http.get_json(f"{url}/models")
            except ProviderError:
                continue
            models = [m for m in data.get("data") or [] if isinstance(m, dict)]
            mine = [m for m in models if m.get("id") == self.model] or models[:1]
            if mine and isinstance(mine[0].get("max_model_len"), int):
                totals.append(int(mine[0]["max_model_len"]))
        if not totals:
            return None, None, ""
        return None, min(totals), f"/v1/models max_model_len ({len(totals)} endpoint{'s' if len(totals) > 1 else ''})"

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        completion = self.api == "completion" or request.messages is None
        url = f"{base_url}/completions" if completion else f"{base_url}/chat/completions"
        t0 = time.perf_counter()
        data, info, _ = await self.http.post_json(url, request_body(request, "completion" if completion else "chat"), timeout)
        text, usage, finish = parse_body(data)
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info)

    async def aclose(self) -> None:
        await self.http.aclose()
