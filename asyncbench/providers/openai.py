"""`openai:<model>` through the official `openai` SDK (async), its retries off.

Chat models get chat completions; `--api completion` uses the completions endpoint for
base models (e.g. davinci-002, gpt-3.5-turbo-instruct). Errors are mapped onto the
scheduler's kinds by `classify_status`, with rate-limit headers kept for adaptation.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..errors import NotRun, ProviderError
from ..limits import parse_ratelimit_headers
from ..prompt_cache import prefix_key, prompt_text
from ..types import ApiKind, Request, Response, Timing
from .base import BatchResult, BatchStatus, ProviderBase, classify_status
from .bounded import Refused, refusal_cause
from .http import JSONTooDeep, json_value
from .openai_wire import OpenAIStream, parse_body, request_body
from .sdk_transport import connection_reason, sdk_http_client, stream_headers, stream_into
from .stream_reply import stream_caps

# The batch metadata key holding the client-made id of a submission (runners/batch.py),
# and how far the provider's clock may be behind ours when walking its list of batches.
INTENT_KEY = "asyncbench_intent"
CLOCK_SKEW_S = 600.0


class OpenAIProvider(ProviderBase):
    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"
    key_env = "OPENAI_API_KEY"
    tiktoken_counts = True
    priced_by_prefix = True
    bills_per_token = True
    batch_limits = (50_000, 200 * 1024 * 1024)

    def __init__(self, model: str, api_key: str | None, api: ApiKind = "chat") -> None:
        super().__init__(model, api_key, api)
        self._clients: dict[str, Any] = {}
        # the SDK's import takes seconds of CPU: here, not inside the first request's deadline
        import openai  # noqa: F401

    def _client(self, base_url: str) -> Any:
        import openai

        if base_url not in self._clients:
            # the SDK insists on a key; servers that want none ignore this placeholder
            http = sdk_http_client(openai.DefaultAsyncHttpxClient, self.max_response_bytes)
            self._clients[base_url] = openai.AsyncOpenAI(api_key=self.api_key or "no-key", base_url=base_url,
                                                         max_retries=0, http_client=http)
        return self._clients[base_url]

    def prompt_cache_min_tokens(self) -> int | None:
        # prompts of 1,024 tokens and more are cached automatically (chat completions);
        # a shared prefix gets a `prompt_cache_key` so that its requests route alike
        return None if self.api == "completion" else 1024

    def _body(self, request: Request, stream: bool = False) -> tuple[dict[str, Any], bool]:
        """The request body, and whether it goes to the completions endpoint."""
        completion = self.api == "completion" or request.messages is None
        body = request_body(request, "completion" if completion else "chat", stream=stream)
        if not completion and self.model.startswith(("o1", "o3", "o4", "gpt-5")):
            # reasoning models take max_completion_tokens and only the default temperature
            body["max_completion_tokens"] = body.pop("max_tokens")
            body.pop("temperature", None)
        if request.cache_prefix and not completion and (text := prompt_text(request)) is not None:
            body["prompt_cache_key"] = prefix_key(text[:request.cache_prefix])
        return body, completion

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        import openai

        client = self._client(base_url)
        body, completion = self._body(request, stream=self.stream)
        endpoint = client.completions if completion else client.chat.completions
        t0, sent_at = time.perf_counter(), time.time()
        reply = OpenAIStream(f"{base_url}/{'completions' if completion else 'chat/completions'}", request.max_tokens,
                             self.max_response_bytes, chat=not completion) if self.stream else None
        streamed, data = False, None
        try:
            if reply is not None:
                # the raw byte stream (the transport's caps and the scheduler's deadline hold)
                cap, _ = stream_caps(request.max_tokens, self.max_response_bytes)
                async with endpoint.with_streaming_response.create(**body, timeout=timeout,
                                                                   extra_headers=stream_headers(cap)) as raw:
                    info = parse_ratelimit_headers(raw.headers)
                    if raw.headers.get("content-type", "").lower().startswith("text/event-stream"):
                        await stream_into(raw, reply.feed)
                        data, streamed = None, True
                    else:  # a server that answers whole: read as such
                        data = json_value(await raw.read())
            else:
                raw = await endpoint.with_raw_response.create(**body, timeout=timeout)
                info = parse_ratelimit_headers(raw.headers)
                data = json_value(raw.content)
        except openai.APIStatusError as exc:
            info = parse_ratelimit_headers(exc.response.headers)
            code = exc.code if isinstance(getattr(exc, "code", None), str) else None
            raise classify_status(exc.status_code, exc.message, retry_after=info.get("retry_after"),
                                  ratelimit=info, code=code) from None
        except openai.APITimeoutError:
            raise ProviderError("transient", f"timed out after {timeout:g}s") from None
        except openai.APIConnectionError as exc:
            if (refused := refusal_cause(exc)) is not None:
                raise ProviderError("fatal", str(refused)) from None
            raise ProviderError("transient", f"connection error: {connection_reason(exc)}") from None
        except (Refused, JSONTooDeep) as exc:  # raised while the SDK read the body, or parsing it
            raise ProviderError("fatal", f"{base_url}: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body: {exc}") from None
        if streamed:
            assert reply is not None
            (text, usage, finish), timing = reply.answer(), reply.timing(t0, sent_at)
        else:  # a JSON `null` body too: parse_body says what it is
            (text, usage, finish), timing = parse_body(data), Timing(sent_at)
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info, timing=timing)

    # -- OpenAI Batch: a JSONL file of requests, then a batch over it ------------------
    def batch_entry(self, request: Request, custom_id: str) -> dict[str, Any]:
        body, completion = self._body(request)
        return {"custom_id": custom_id, "method": "POST",
                "url": "/v1/completions" if completion else "/v1/chat/completions", "body": body}

    async def batch_submit(self, base_url: str, entries: list[dict[str, Any]], meta: dict[str, str],
                           on_uploaded: Callable[[str], None] = lambda file_id: None) -> str:
        client = self._client(base_url)
        data = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in entries).encode()
        async with _errors():
            f = await client.files.create(file=("asyncbench-batch.jsonl", data), purpose="batch")
            on_uploaded(str(f.id))
            batch = await client.batches.create(input_file_id=f.id, endpoint=entries[0]["url"],
                                                completion_window="24h", metadata=meta)
        return str(batch.id)

    async def batch_find(self, base_url: str, intent: str, since: float, n_requests: int,
                         known: set[str]) -> str | None:
        """The batch whose metadata names `intent`: the list is newest first, so the walk
        stops at batches created well before the intent was recorded."""
        async with _errors():
            async for b in self._client(base_url).batches.list(limit=100):
                if (b.metadata or {}).get(INTENT_KEY) == intent:
                    return str(b.id)
                if b.created_at < since - CLOCK_SKEW_S:
                    break
        return None

    async def batch_poll(self, base_url: str, batch_id: str) -> BatchStatus:
        async with _errors():
            b = await self._client(base_url).batches.retrieve(batch_id)
        rc = b.request_counts
        counts = {"total": rc.total, "completed": rc.completed, "failed": rc.failed} if rc is not None else {}
        error = None
        if b.status == "failed":
            errs = (b.errors.data if b.errors is not None else None) or []
            error = "; ".join(f"{e.code} (line {e.line}): {e.message}" for e in errs[:3]) or "batch failed"
        return BatchStatus(b.status, b.status in ("completed", "failed", "expired", "cancelled"), counts, error)

    async def batch_results(self, base_url: str, batch_id: str) -> BatchResult:
        client = self._client(base_url)
        async with _errors():
            b = await client.batches.retrieve(batch_id)
            lines: list[bytes] = []
            for file_id in (b.output_file_id, b.error_file_id):
                if file_id:
                    lines += (await client.files.content(file_id)).content.splitlines()
        out: BatchResult = {}
        for raw in lines:
            if not raw.strip():
                continue
            try:
                line = json_value(raw)
                cid = str(line["custom_id"])
            except (ValueError, KeyError, TypeError):
                continue  # not a result line: its request is sent again
            resp, err = line.get("response") or {}, line.get("error")
            if resp.get("status_code") == 200:
                try:
                    text, usage, finish = parse_body(resp.get("body") or {})
                    out[cid] = Response(text=text, usage=usage, latency_ms=0.0, finish_reason=finish,
                                        endpoint=base_url)
                except ProviderError as exc:
                    out[cid] = exc
            elif resp.get("status_code"):
                body = resp.get("body") or {}
                found = body.get("error")
                e: dict[str, object] = found if isinstance(found, dict) else {}
                out[cid] = classify_status(int(resp["status_code"]), str(e.get("message") or body),
                                           code=code if isinstance(code := e.get("code"), str) else None)
            else:  # batch_expired, batch_cancelled: not run, send it again
                why: dict[str, object] = err if isinstance(err, dict) else {}
                out[cid] = NotRun(f"{why.get('code') or 'not run'}: {why.get('message') or ''}")
        return out

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()


@asynccontextmanager
async def _errors() -> AsyncIterator[None]:
    """The SDK's errors on batch calls, classified as for a request."""
    import openai

    try:
        yield
    except openai.APIStatusError as exc:
        code = exc.code if isinstance(getattr(exc, "code", None), str) else None
        raise classify_status(exc.status_code, exc.message, code=code) from None
    except Refused as exc:
        raise ProviderError("fatal", str(exc)) from None
    except RecursionError:  # the SDK parsed a JSON answer nested deeper than any answer is
        raise ProviderError("fatal", "a JSON answer nested deeper than any answer is (a broken or hostile server?)") from None
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        if (refused := refusal_cause(exc)) is not None:
            raise ProviderError("fatal", str(refused)) from None
        raise ProviderError("transient", f"connection error: {connection_reason(exc)}") from None
