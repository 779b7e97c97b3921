"""`openai:<model>` through the official `openai` SDK (async), its retries off.

Chat models get chat completions; `--api completion` uses the completions endpoint for
base models (e.g. davinci-002, gpt-3.5-turbo-instruct). Errors are mapped onto the
scheduler's kinds by `classify_status`, with rate-limit headers kept for adaptation.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import ProviderError
from ..limits import parse_ratelimit_headers
from ..types import Request, Response
from .base import ProviderBase, classify_status
from .openai_wire import parse_body, request_body


class OpenAIProvider(ProviderBase):
    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"
    key_env = "OPENAI_API_KEY"
    tiktoken_counts = True
    priced_by_prefix = True
    bills_per_token = True

    def __init__(self, model: str, api_key: str | None, api: str = "chat") -> None:
        super().__init__(model, api_key, api)
        self._clients: dict[str, Any] = {}

    def _client(self, base_url: str) -> Any:
        import openai

        if base_url not in self._clients:
            # the SDK insists on a key; servers that want none ignore this placeholder
            self._clients[base_url] = openai.AsyncOpenAI(api_key=self.api_key or "no-key", base_url=base_url,
                                                         max_retries=0)
        return self._clients[base_url]

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        import openai

        client = self._client(base_url)
        completion = self.api == "completion" or request.messages is None
        body = request_body(request, "completion" if completion else "chat")
        if not completion and self.model.startswith(("o1", "o3", "o4", "gpt-5")):
            # reasoning models take max_completion_tokens and only the default temperature
            body["max_completion_tokens"] = body.pop("max_tokens")
            body.pop("temperature", None)
        endpoint = client.completions if completion else client.chat.completions
        t0 = time.perf_counter()
        try:
            raw = await endpoint.with_raw_response.create(**body, timeout=timeout)
            info = parse_ratelimit_headers(raw.headers)
            data = json.loads(raw.content)
        except openai.APIStatusError as exc:
            info = parse_ratelimit_headers(exc.response.headers)
            code = exc.code if isinstance(getattr(exc, "code", None), str) else None
            raise classify_status(exc.status_code, exc.message, retry_after=info.get("retry_after"),
                                  ratelimit=info, code=code) from None
        except openai.APITimeoutError:
            raise ProviderError("transient", f"timed out after {timeout:g}s") from None
        except openai.APIConnectionError as exc:
            raise ProviderError("transient", f"connection error: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body: {exc}") from None
        text, usage, finish = parse_body(data)
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
