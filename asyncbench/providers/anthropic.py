"""`anthropic:<model>` through the official `anthropic` SDK (messages API), retries off.

LongBench-style evaluation sends one plain user message and no system prompt.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import ProviderError
from ..limits import parse_ratelimit_headers
from ..types import Request, Response, Usage
from .base import ProviderBase, classify_status


class AnthropicProvider(ProviderBase):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    base_url_env = "ANTHROPIC_BASE_URL"
    key_env = "ANTHROPIC_API_KEY"
    priced_by_prefix = True
    bills_per_token = True

    def __init__(self, model: str, api_key: str | None, api: str = "chat") -> None:
        super().__init__(model, api_key, api)
        self._clients: dict[str, Any] = {}

    def _client(self, base_url: str) -> Any:
        import anthropic

        if base_url not in self._clients:
            self._clients[base_url] = anthropic.AsyncAnthropic(api_key=self.api_key or "no-key", base_url=base_url,
                                                                   max_retries=0)
        return self._clients[base_url]

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        import anthropic

        messages = request.messages or [{"role": "user", "content": request.prompt or ""}]
        system = [m["content"] for m in messages if m["role"] == "system"]
        # The 2.x SDK no longer lists `temperature` as an argument; the messages API still
        # takes it, so greedy decoding goes in the body.
        params = dict(request.params)
        # The messages API refuses whitespace-only stop sequences ("\n" for samsum): those
        # are applied to the answer here instead, after its first non-blank character.
        stops = params.pop("stop", None) or []
        cut_at = [s for s in stops if not s.strip()]
        if kept := [s for s in stops if s.strip()]:
            params["stop_sequences"] = kept
        body = {"model": self.model, "max_tokens": request.max_tokens,
                "messages": [m for m in messages if m["role"] != "system"],
                "extra_body": {"temperature": request.temperature, **params}}
        if system:
            body["system"] = "\n".join(system)
        t0 = time.perf_counter()
        try:
            raw = await self._client(base_url).messages.with_raw_response.create(**body, timeout=timeout)
            info = parse_ratelimit_headers(raw.headers)
            data = json.loads(await raw.read())
        except anthropic.APIStatusError as exc:
            info = parse_ratelimit_headers(exc.response.headers)
            body_ = exc.body if isinstance(exc.body, dict) else {}
            code = (body_.get("error") or {}).get("type") if isinstance(body_.get("error"), dict) else None
            raise classify_status(exc.status_code, str(exc.message), retry_after=info.get("retry_after"),
                                  ratelimit=info, code=code) from None
        except anthropic.APITimeoutError:
            raise ProviderError("transient", f"timed out after {timeout:g}s") from None
        except anthropic.APIConnectionError as exc:
            raise ProviderError("transient", f"connection error: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body: {exc}") from None
        try:
            text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
            u = data.get("usage") or {}
            usage = Usage(prompt_tokens=int(u.get("input_tokens") or 0) + int(u.get("cache_read_input_tokens") or 0),
                          completion_tokens=int(u.get("output_tokens") or 0),
                          cached_prompt_tokens=int(u.get("cache_read_input_tokens") or 0))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError("transient", f"unexpected response shape: {exc}") from None
        for stop in cut_at:
            start = len(text) - len(text.lstrip())
            if (at := text.find(stop, start + 1)) != -1:
                text = text[:at]
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=data.get("stop_reason"), endpoint=base_url, ratelimit=info)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
