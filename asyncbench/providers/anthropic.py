"""`anthropic:<model>` through the official `anthropic` SDK (messages API), retries off.

LongBench-style evaluation sends one plain user message and no system prompt. Models that
refuse `temperature` and `top_p` together (sampling_rules.py: Claude Opus 4.1, Sonnet 4.5,
Haiku 4.5 and newer; a 400 otherwise) are sent `temperature` alone: it is the parameter
every run sets (greedy 0 for LongBench, where top_p changes nothing; 100-LongBench's 0.9),
and the one Anthropic's migration guide keeps in its example.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..claims import claim, claim_sum
from ..errors import NotRun, ProviderError
from ..limits import parse_ratelimit_headers
from ..sampling_rules import one_sampler_only
from ..types import ApiKind, Request, Response, Timing, Usage
from .base import BatchResult, BatchStatus, ProviderBase, classify_status, error_text
from .bounded import Refused, refusal_cause
from .http import JSONTooDeep, json_value
from .sdk_transport import connection_reason, sdk_http_client, stream_headers, stream_into
from .stream_reply import StreamReply, stream_caps

if TYPE_CHECKING:
    import anthropic

# How far the provider's clock may be behind ours when walking its list of batches.
CLOCK_SKEW_S = 600.0


class AnthropicProvider(ProviderBase):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    base_url_env = "ANTHROPIC_BASE_URL"
    key_env = "ANTHROPIC_API_KEY"
    priced_by_prefix = True
    bills_per_token = True
    batch_limits = (100_000, 256 * 1024 * 1024)

    def __init__(self, model: str, api_key: str | None, api: ApiKind = "chat") -> None:
        super().__init__(model, api_key, api)
        self._clients: dict[str, Any] = {}
        # the SDK's import takes seconds of CPU: here, not inside the first request's deadline
        import anthropic  # noqa: F401
        self.batch_cut_at: dict[str, list[str]] = {}  # custom_id -> whitespace stops to apply

    def _client(self, base_url: str) -> Any:
        import anthropic

        if base_url not in self._clients:
            http = sdk_http_client(anthropic.DefaultAsyncHttpxClient, self.max_response_bytes)
            self._clients[base_url] = anthropic.AsyncAnthropic(api_key=self.api_key or "no-key", base_url=base_url,
                                                  max_retries=0, http_client=http)
        return self._clients[base_url]

    def prompt_cache_min_tokens(self) -> int | None:
        # the documented minimum cacheable prompt: 2,048 tokens for Haiku, 1,024 for the others
        return 2048 if "haiku" in self.model else 1024

    def _params(self, request: Request) -> tuple[dict[str, object], list[str]]:
        """The messages API parameters (as sent in a body) and the whitespace stop
        sequences applied to the answer here instead."""
        messages = request.messages or [{"role": "user", "content": request.prompt or ""}]
        system = [m["content"] for m in messages if m["role"] == "system"]
        params = dict(request.params)
        # The messages API refuses whitespace-only stop sequences ("\n" for samsum): those
        # are applied to the answer here instead, after its first non-blank character.
        stops = params.pop("stop", None) or []
        cut_at = [s for s in stops if not s.strip()]
        if kept := [s for s in stops if s.strip()]:
            params["stop_sequences"] = kept
        turns: list[dict[str, Any]] = [m for m in messages if m["role"] != "system"]
        if request.cache_prefix and len(turns) == 1 and isinstance(turns[0].get("content"), str):
            # --prompt-cache: the shared prefix as its own block, marked; the two blocks
            # together are exactly the prompt
            text, cut = turns[0]["content"], request.cache_prefix
            turns = [{"role": turns[0]["role"], "content": [
                {"type": "text", "text": text[:cut], "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": text[cut:]}]}]
        body: dict[str, object] = {"model": self.model, "max_tokens": request.max_tokens,
                                   "messages": turns,
                                   "temperature": request.temperature, **params}
        if "top_p" in body and one_sampler_only(self.model):  # refused beside temperature: module docstring
            del body["top_p"]
        if system:
            body["system"] = "\n".join(system)
        return body, cut_at

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        import anthropic

        params, cut_at = self._params(request)
        # The 2.x SDK no longer lists `temperature` as an argument; the messages API still
        # takes it, so greedy decoding and the other parameters go in the body.
        named = ("model", "max_tokens", "messages", "system")
        body: dict[str, object] = {k: params.pop(k) for k in named if k in params}
        body["extra_body"] = params
        t0, sent_at = time.perf_counter(), time.time()
        reply = AnthropicStream(f"{base_url}/v1/messages", request.max_tokens, self.max_response_bytes) \
            if self.stream else None
        try:
            if reply is not None:
                data, info = await self._streamed(base_url, body, timeout, reply)
            else:
                raw = await self._client(base_url).messages.with_raw_response.create(**body, timeout=timeout)
                info = parse_ratelimit_headers(raw.headers)
                data = json_value(await raw.read())
        except anthropic.APIStatusError as exc:
            info = parse_ratelimit_headers(exc.response.headers)
            raise _classified(exc, info) from None
        except anthropic.APITimeoutError:
            raise ProviderError("transient", f"timed out after {timeout:g}s") from None
        except anthropic.APIConnectionError as exc:
            if (refused := refusal_cause(exc)) is not None:
                raise ProviderError("fatal", str(refused)) from None
            raise ProviderError("transient", f"connection error: {connection_reason(exc)}") from None
        except (Refused, JSONTooDeep) as exc:  # raised while the SDK read the body, or parsing it
            raise ProviderError("fatal", f"{base_url}: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body: {exc}") from None
        resp = parse_message(data, cut_at)
        resp.latency_ms = (time.perf_counter() - t0) * 1000
        resp.endpoint, resp.ratelimit = base_url, info
        resp.timing = reply.timing(t0, sent_at) if reply is not None and reply.events else Timing(sent_at)
        return resp

    async def _streamed(self, base_url: str, body: dict[str, object], timeout: float,
                        reply: AnthropicStream) -> tuple[object, dict[str, float]]:
        """The message asked as a stream (`stream: true`), read through the SDK's raw
        byte stream (its transport's caps and the scheduler's deadline hold) into
        `reply`; the message body it assembles. A server that answers JSON instead is
        read whole."""
        client = self._client(base_url)
        cap, _ = stream_caps(reply.max_tokens, self.max_response_bytes)
        async with client.messages.with_streaming_response.create(**body, stream=True, timeout=timeout,
                                                                  extra_headers=stream_headers(cap)) as raw:
            info = parse_ratelimit_headers(raw.headers)
            if not raw.headers.get("content-type", "").lower().startswith("text/event-stream"):
                return json_value(await raw.read()), info
            await stream_into(raw, reply.feed)
        return reply.message(), info

    # -- Message Batches: the requests in one POST, results as JSONL at results_url ----
    def batch_entry(self, request: Request, custom_id: str) -> dict[str, object]:
        params, cut_at = self._params(request)
        if cut_at:  # applied to the answer when the results come (this or a later process)
            self.batch_cut_at[custom_id] = cut_at
        return {"custom_id": custom_id, "params": params}

    async def batch_submit(self, base_url: str, entries: list[dict[str, object]], meta: dict[str, str],
                           on_uploaded: Callable[[str], None] = lambda file_id: None) -> str:
        async with _errors():
            batch = await self._client(base_url).messages.batches.create(requests=entries)
        return str(batch.id)

    async def batch_find(self, base_url: str, intent: str, since: float, n_requests: int,
                         known: set[str]) -> str | None:
        """Message Batches carry no metadata: the one batch created since the intent was
        recorded (less clock skew) with its number of requests and not on record is it.
        None when there is none — or more than one, which cannot be told apart."""
        found: list[str] = []
        async with _errors():
            async for b in self._client(base_url).messages.batches.list(limit=100):
                if b.created_at.timestamp() < since - CLOCK_SKEW_S:
                    break
                rc = b.request_counts
                total = rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired
                if b.id not in known and total == n_requests:
                    found.append(str(b.id))
        return found[0] if len(found) == 1 else None

    async def batch_poll(self, base_url: str, batch_id: str) -> BatchStatus:
        async with _errors():
            b = await self._client(base_url).messages.batches.retrieve(batch_id)
        rc = b.request_counts
        counts = {"processing": rc.processing, "succeeded": rc.succeeded, "errored": rc.errored,
                  "canceled": rc.canceled, "expired": rc.expired}
        return BatchStatus(b.processing_status, b.processing_status == "ended", counts)

    async def batch_results(self, base_url: str, batch_id: str) -> BatchResult:
        client = self._client(base_url)
        async with _errors():
            b = await client.messages.batches.retrieve(batch_id)
            if not b.results_url:
                raise ProviderError("transient", f"batch {batch_id} has no results_url yet")
            raw = await client.get(b.results_url, cast_to=str)
        out: BatchResult = {}
        for line in str(raw).splitlines():
            try:
                item = json_value(line)
                cid, result = str(item["custom_id"]), item["result"]
                kind = result["type"]
            except (ValueError, KeyError, TypeError):
                continue  # not a result line: its request is sent again
            if kind == "succeeded":
                try:
                    answer = parse_message(result.get("message") or {}, self.batch_cut_at.get(cid, []))
                    answer.endpoint = base_url
                    out[cid] = answer
                except ProviderError as exc:
                    out[cid] = exc
            elif kind == "errored":
                err = ((result.get("error") or {}).get("error") or {})
                etype, message = str(err.get("type") or ""), str(err.get("message") or "")
                status = ERROR_STATUS.get(etype, 500)
                out[cid] = classify_status(status, f"{etype}: {message}", code=etype)
            else:  # canceled, expired: not run, send it again
                out[cid] = NotRun(f"{kind}: the request was not processed in its batch")
        return out

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()


def parse_message(data: object, cut_at: list[str]) -> Response:
    """A messages API answer (live or from a batch) as a Response (latency to be set).

    Only a message is an answer: a body with an `error` beside its content, or whose
    content is null, absent or holds no text block, is a failed attempt (transient,
    retried), never cached. Usage is kept as claimed (claims.checked bounds it)."""
    if not isinstance(data, dict):
        raise ProviderError("transient", f"unexpected response shape: a JSON {type(data).__name__}, not an object")
    if data.get("error") or data.get("type") == "error":
        raise ProviderError("transient", f"the server answered 200 with an error: {error_text(data.get('error'))}")
    try:
        content = data["content"]
        if not isinstance(content, list):
            raise ProviderError("transient", "the answer has no text (content is "
                                             f"{'null' if content is None else type(content).__name__})")
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if content and not blocks:
            raise ProviderError("transient", "the answer has no text (no text block in its content)")
        if any(not isinstance(b.get("text"), str) for b in blocks):
            raise ProviderError("transient", "the answer has no text (a text block without text)")
        text = "".join(b["text"] for b in blocks)
        u = data.get("usage") or {}
        read, written = claim(u, "cache_read_input_tokens"), claim(u, "cache_creation_input_tokens")
        usage = Usage(prompt_tokens=claim_sum(claim(u, "input_tokens"), read, written),  # type: ignore[arg-type]
                      completion_tokens=claim(u, "output_tokens"),
                      cached_prompt_tokens=read, cache_write_tokens=written)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderError("transient", f"unexpected response shape: {exc}") from None
    for stop in cut_at:
        start = len(text) - len(text.lstrip())
        if (at := text.find(stop, start + 1)) != -1:
            text = text[:at]
    return Response(text=text, usage=usage, latency_ms=0.0, finish_reason=data.get("stop_reason"))


# An error type of the messages API, as the HTTP status it comes with (a batch result's
# error and a stream's `error` event carry the type only).
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
                "api_error": 500, "overloaded_error": 529}


class AnthropicStream(StreamReply):
    """A message streamed as the messages API streams it (docs "Streaming Messages"):
    `message_start` (the message, its usage so far: input and cache tokens),
    `content_block_start` / `content_block_delta` (`text_delta`: a piece of a text
    block) / `content_block_stop`, `message_delta` (the stop reason, cumulative usage:
    the output tokens), `message_stop`; `ping` between them, and `error` (an
    `overloaded_error` mid-stream) classified as its HTTP status would be.

    `message` builds the message body the unstreamed request answers (its blocks with
    their text, stop reason and usage) for `parse_message`."""

    def __init__(self, url: str, max_tokens: int, max_bytes: int) -> None:
        super().__init__(url, max_tokens, max_bytes)
        self.started: dict[str, Any] | None = None
        self.usage: dict[str, object] = {}
        self.blocks: dict[int, dict[str, object]] = {}
        self.stop_reason: object = None
        self.stopped = False

    def on_event(self, name: str, payload: bytes, now: float) -> None:
        data = self.payload(payload)
        kind = data.get("type", name)
        if kind == "error" or name == "error":
            found = data.get("error")
            err: dict[str, object] = found if isinstance(found, dict) else {}
            etype = str(err.get("type") or "")
            raise classify_status(ERROR_STATUS.get(etype, 500), f"{etype}: {err.get('message') or ''} (in the stream)",
                                  code=etype)
        try:
            if kind == "message_start":
                self.started = data["message"]
                self.usage.update(self.started.get("usage") or {})
            elif kind == "content_block_start":
                self.blocks[int(data["index"])] = dict(data["content_block"])
            elif kind == "content_block_delta":
                delta = data["delta"]
                if delta.get("type") == "text_delta":
                    block = self.blocks[int(data["index"])]
                    block["text"] = str(block.get("text") or "") + delta["text"]
                    self.content(delta["text"], now)
            elif kind == "message_delta":
                self.stop_reason = (data.get("delta") or {}).get("stop_reason", self.stop_reason)
                self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            elif kind == "message_stop":
                self.stopped = True
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderError("transient", f"unexpected stream event from {self.url}: {type(exc).__name__}: {exc}") from None

    def message(self) -> dict[str, object]:
        if self.started is None or not self.stopped:
            raise self.incomplete("message_start and message_stop")
        if "output_tokens" not in self.usage or "input_tokens" not in self.usage:
            raise self.incomplete("usage", fatal=True)
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return {**self.started, "content": content, "stop_reason": self.stop_reason, "usage": self.usage}


def _classified(exc: anthropic.APIStatusError, info: dict[str, float] | None = None) -> ProviderError:
    body_ = exc.body if isinstance(exc.body, dict) else {}
    code = (body_.get("error") or {}).get("type") if isinstance(body_.get("error"), dict) else None
    return classify_status(exc.status_code, str(exc.message), retry_after=(info or {}).get("retry_after"),
                           ratelimit=info, code=code)


@asynccontextmanager
async def _errors() -> AsyncIterator[None]:
    """The SDK's errors on batch calls, classified as for a request."""
    import anthropic

    try:
        yield
    except anthropic.APIStatusError as exc:
        raise _classified(exc) from None
    except Refused as exc:
        raise ProviderError("fatal", str(exc)) from None
    except RecursionError:  # the SDK parsed a JSON answer nested deeper than any answer is
        raise ProviderError("fatal", "a JSON answer nested deeper than any answer is (a broken or hostile server?)") from None
    except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
        if (refused := refusal_cause(exc)) is not None:
            raise ProviderError("fatal", str(refused)) from None
        raise ProviderError("transient", f"connection error: {connection_reason(exc)}") from None
