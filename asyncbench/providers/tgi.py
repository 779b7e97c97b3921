"""`tgi:<name>`: Hugging Face text-generation-inference over plain HTTP.

Raw-text samples (LongBench's few-shot and code tasks, base-model prompts) go to the
native `/generate`; chat samples go to TGI's Messages API (`/v1/chat/completions`), so
the server applies the model's own chat template — as LongBench's pred.py does locally.
`/info` tells the server's max input and total tokens, used for middle truncation.
Greedy decoding is `do_sample: false` (TGI rejects temperature 0).
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from ..errors import ProviderError, UserError
from ..tokenizers import approx_count
from ..types import Request, Response, Usage
from .base import ProviderBase
from .http import HTTPClient
from .openai_wire import parse_body, request_body


class ServerTokenizer:
    """A TGI server's tokenizer through `POST /tokenize`: each token with its character
    span in the text, so a prompt is cut exactly where the model's tokens fall. Calls are
    synchronous (prompts are built before they are queued)."""

    name = "tgi /tokenize"

    def __init__(self, url: str, headers: dict[str, str], timeout: float = 60.0) -> None:
        import httpx

        self.url = url
        self.client = httpx.Client(headers=headers, timeout=timeout)  # the run's --timeout

    def spans(self, text: str) -> list[tuple[int, int]]:
        import httpx

        try:
            resp = self.client.post(self.url, json={"inputs": text})
            resp.raise_for_status()
            data = resp.json()
            if not isinstance(data, list):
                raise TypeError("expected a list of tokens")
            return [(int(t["start"]), int(t["stop"])) for t in data]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ProviderError("fatal", f"{self.url}: {exc}") from None

    def encode(self, text: str) -> list[int]:
        return list(range(len(self.spans(text))))

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError("a server tokenizer cuts by spans")

    def count(self, text: str) -> int:
        return len(self.spans(text))


class TGIProvider(ProviderBase):
    name = "tgi"

    def __init__(self, model: str, api_key: str | None, api: str = "chat") -> None:
        super().__init__(model, api_key, api)
        self.http = HTTPClient({"Authorization": f"Bearer {api_key}"} if api_key else {})

    def sends_raw(self, chat: bool) -> bool:
        """Raw prompts go to the native /generate; chat ones to the Messages API, where
        the server applies the model's own chat template."""
        return self.api == "completion" or not chat

    async def context_limits(self, base_urls: list[str]) -> tuple[int | None, int | None, str]:
        """Ask every replica's /info: the prompt must fit the smallest of them (a fleet
        can mix launch settings), and all must serve the same model, or the cache would
        file one model's answers under another's name. Replicas that are down are left
        to the pool's health checks, as long as one answers."""
        infos: dict[str, dict[str, Any]] = {}
        errors: list[str] = []

        async def ask(url: str) -> None:
            try:
                infos[url] = await self.info(url)
            except ProviderError as exc:
                errors.append(f"{url}/info ({exc.message})")

        async with anyio.create_task_group() as tg:
            for url in base_urls:
                tg.start_soon(ask, url)
        if not infos:
            raise UserError(f"cannot read {'; '.join(errors)}; is the TGI server up?")
        models = {str(i.get("model_id")) for i in infos.values() if i.get("model_id")}
        if len(models) > 1:
            raise UserError(f"the TGI endpoints serve different models ({', '.join(sorted(models))}); "
                            "give one model's replicas per run")
        inputs = [int(i["max_input_tokens"]) for i in infos.values() if i.get("max_input_tokens")]
        totals = [int(i["max_total_tokens"]) for i in infos.values() if i.get("max_total_tokens")]
        if not inputs and not totals:
            return None, None, ""
        return (min(inputs) if inputs else None, min(totals) if totals else None,
                f"tgi /info ({len(base_urls)} endpoint{'s' if len(base_urls) > 1 else ''})")

    async def server_tokenizer(self, base_urls: list[str], timeout: float = 60.0) -> Any:
        """TGI's `POST /tokenize` (the model's own tokenizer, special tokens included, as
        pred.py's `tokenizer(prompt)`), when the first replica serves it."""
        tok = ServerTokenizer(f"{base_urls[0]}/tokenize", self.http.headers, timeout)
        try:
            await anyio.to_thread.run_sync(tok.spans, "a")
        except ProviderError:
            return None
        return tok

    async def info(self, base_url: str) -> dict[str, Any]:
        """The server's /info, with `max_input_tokens` normalised across TGI versions."""
        data = await self.http.get_json(f"{base_url}/info")
        if "max_input_tokens" not in data and "max_input_length" in data:
            data["max_input_tokens"] = data["max_input_length"]
        return data

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        t0 = time.perf_counter()
        if request.messages is not None:
            data, info, _ = await self.http.post_json(f"{base_url}/v1/chat/completions",
                                                   request_body(request, "chat"), timeout)
            text, usage, finish = parse_body(data)
        else:
            params: dict[str, Any] = {"max_new_tokens": request.max_tokens, "details": True,
                                      **request.params}
            if request.temperature > 0:
                params.update(do_sample=True, temperature=request.temperature)
            else:
                params["do_sample"] = False
            data, info, headers = await self.http.post_json(f"{base_url}/generate",
                                                   {"inputs": request.prompt, "parameters": params}, timeout)
            text = data.get("generated_text", "") if isinstance(data, dict) else ""
            details = (data.get("details") or {}) if isinstance(data, dict) else {}
            finish = details.get("finish_reason")
            # TGI reports token counts in x-prompt-tokens / x-generated-tokens headers.
            prompt_tokens = headers.get("x-prompt-tokens")
            generated = details.get("generated_tokens", headers.get("x-generated-tokens"))
            usage = Usage(
                prompt_tokens=int(prompt_tokens) if prompt_tokens is not None else approx_count(request.prompt or ""),
                completion_tokens=int(generated) if generated is not None else approx_count(text),
            )
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info)

    async def aclose(self) -> None:
        await self.http.aclose()
