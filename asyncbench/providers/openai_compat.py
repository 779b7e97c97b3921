"""`openai-compat:<model>`: any OpenAI-compatible server (vLLM, TGI's Messages API,
llama.cpp, the simulator) over plain HTTP with aiohttp — no SDK retries, low overhead."""

from __future__ import annotations

import time

from ..types import Request, Response
from .base import ProviderBase
from .http import HTTPClient
from .openai_wire import parse_body, request_body


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
