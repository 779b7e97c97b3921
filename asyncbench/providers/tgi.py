"""`tgi:<name>`: Hugging Face text-generation-inference over plain HTTP.

Raw-text samples (LongBench's few-shot and code tasks, base-model prompts, and every
prompt of a model LongBench's pred.py lists, already wrapped in its build_chat text:
official_models.py) go to the native `/generate`; other chat samples go to TGI's
Messages API (`/v1/chat/completions`), where the server applies the model's template.
`/info` tells the server's max input and total tokens, used for middle truncation.
Greedy decoding is `do_sample: false` (TGI rejects temperature 0). Streamed (--stream
on), raw samples go to `/generate_stream` and chat ones to the Messages API with
`stream: true` (`TGIStream`, openai_wire.OpenAIStream).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio

from ..errors import ProviderError, UserError
from ..tokenizers import approx_count
from ..types import ApiKind, Request, Response, Timing, Usage
from .base import LentTokenizer, ProviderBase, error_text
from .http import HTTPClient, SyncCallError, SyncClient
from .openai_wire import OpenAIStream, parse_body, request_body
from .stream_reply import StreamReply, stream_caps


class ServerTokenizer:
    """A TGI server's tokenizer through `POST /tokenize`, for pred.py's middle cut.

    TGI (router/src/server.rs `encoding_to_tokens`, v3.x) answers one `{id, text, start,
    stop}` per token, special ones (the BOS) included, where start/stop are UTF-8 *byte*
    offsets into the input (`input.bytes().skip(start)`) and a special token has an empty
    span ((0, 0); a null span is taken the same way). The cut keeps the bytes of the
    first and last `half` tokens and decodes each side as `decode(..., skip_special_tokens
    =True)` would: byte-fallback tokens of one character split by the cut become one
    U+FFFD each (tokenizers' ByteFallback decoder), and with a SentencePiece tokenizer
    (`strip_space`, Llama's) the second side loses the space its first `▁` piece stands
    for (the decoder's `Strip`). Calls are synchronous (prompts are built before they are
    queued)."""

    name = "tgi /tokenize"

    def __init__(self, url: str, headers: dict[str, str], strip_space: bool = False, timeout: float = 60.0) -> None:

        self.url = url
        self.strip_space = strip_space
        self.count_specials = True  # pred.py counts the BOS (its chatglm3 branch does not)
        self.client = SyncClient(url, headers, timeout)  # the run's --timeout

    def tokens(self, text: str) -> list[tuple[int, int] | None]:
        """Each token's byte span, None for a special (empty-span) token."""
        try:
            data = self.client.call("POST", self.url, {"inputs": text})
            if not isinstance(data, list):
                raise TypeError("expected a list of tokens")
            out: list[tuple[int, int] | None] = []
            for t in data:
                start, stop = t.get("start"), t.get("stop")
                out.append(None if start is None or stop is None or int(start) == int(stop) or t.get("special")
                           else (int(start), int(stop)))
            return out
        except (SyncCallError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderError("fatal", f"{self.url}: {exc}") from None

    def cut_middle(self, text: str, max_tokens: int) -> tuple[str, int]:
        spans = self.tokens(text)
        if not self.count_specials:
            spans = [s for s in spans if s is not None]
        if len(spans) <= max_tokens:
            return text, 0
        half = int(max_tokens / 2)
        raw = text.encode("utf-8", "surrogatepass")
        return (_side(raw, spans[:half], spans[half:], head=True)
                + _side(raw, spans[-half:], spans[:-half], head=False, strip_space=self.strip_space),
                len(spans) - 2 * half)

    def encode(self, text: str) -> list[int]:
        return list(range(len(self.tokens(text))))

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError("a TGI server tokenizer cuts by byte spans (cut_middle)")

    def count(self, text: str) -> int:
        return len(self.tokens(text))


def _side(raw: bytes, kept: list[tuple[int, int] | None], dropped: list[tuple[int, int] | None], *,
          head: bool, strip_space: bool = False) -> str:
    """The text of one side of the cut from its tokens' byte spans.

    Tokens that share a span are the byte pieces of one character (byte fallback). Where
    the cut separates a character's pieces, tokenizers' ByteFallback decoder turns the
    whole run of byte pieces at the seam into one U+FFFD per piece (the run is not valid
    UTF-8), so that run is replaced here the same way."""
    spans = [s for s in kept if s is not None]
    if not spans:
        return ""
    ordered = spans if head else spans[::-1]
    seam = ordered[-1]
    beyond = [s for s in dropped if s is not None]
    neighbour = (beyond[:1] if head else beyond[-1:])
    if neighbour and neighbour[0] == seam:  # a character split by the cut
        counts = Counter(spans + beyond)
        shared = {s for s, n in counts.items() if n > 1}
        run = 0
        for s in reversed(ordered):
            if s not in shared:
                break
            run += 1
        edge = ordered[len(ordered) - run]
        if head:
            return raw[: edge[0]].decode("utf-8", "replace") + "\ufffd" * run
        return "\ufffd" * run + raw[edge[1]:].decode("utf-8", "replace")
    if head:
        return raw[: seam[1]].decode("utf-8", "replace")
    out = raw[seam[0]:].decode("utf-8", "replace")
    return out[1:] if strip_space and out.startswith(" ") else out


class TGIProvider(ProviderBase):
    name = "tgi"
    serves_open_models = True
    ends_in_time = True  # send is one HTTPClient.post_json

    def __init__(self, model: str, api_key: str | None, api: ApiKind = "chat") -> None:
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
        infos: dict[str, dict[str, object]] = {}
        errors: list[str] = []
        down: list[tuple[str, str]] = []

        async def ask(url: str) -> None:
            try:
                infos[url] = await self.info(url)
            except ProviderError as exc:
                errors.append(f"{url}/info ({exc.message})")
                if (why := exc.unreachable) is not None:
                    down.append((url, why))

        async with anyio.create_task_group() as tg:
            for url in base_urls:
                tg.start_soon(ask, url)
        if not infos and down and len(down) == len(base_urls):  # nothing listens: said as such first
            url, why = down[0]
            raise UserError(f"cannot reach {urlsplit(url).netloc} ({why}); is the TGI server running? "
                            f"check --base-url {url}")
        if not infos:
            raise UserError(f"cannot read {'; '.join(errors)}; is the TGI server up?")
        models = {str(i.get("model_id")) for i in infos.values() if i.get("model_id")}
        if len(models) > 1:
            raise UserError(f"the TGI endpoints serve different models ({', '.join(sorted(models))}); "
                            "give one model's replicas per run")
        inputs = [int(n) for i in infos.values() if (n := i.get("max_input_tokens")) and isinstance(n, (int, float, str))]
        totals = [int(n) for i in infos.values() if (n := i.get("max_total_tokens")) and isinstance(n, (int, float, str))]
        if not inputs and not totals:
            return None, None, ""
        return (min(inputs) if inputs else None, min(totals) if totals else None,
                f"tgi /info ({len(base_urls)} endpoint{'s' if len(base_urls) > 1 else ''})")

    async def server_tokenizer(self, base_urls: list[str], strip_space: bool = False, timeout: float = 60.0) -> LentTokenizer | None:
        """TGI's `POST /tokenize` (the model's own tokenizer, special tokens included, as
        pred.py's `tokenizer(prompt)`), when the first replica serves it. `strip_space`:
        the model's decoder drops a span's leading `▁` space (SentencePiece, Llama)."""
        tok = ServerTokenizer(f"{base_urls[0]}/tokenize", self.http.headers, strip_space, timeout)
        try:
            await anyio.to_thread.run_sync(tok.tokens, "a", abandon_on_cancel=True)
        except ProviderError:
            return None
        return tok

    async def served_models(self, base_urls: list[str]) -> list[str]:
        """The model the server says it runs: /info `model_id` (first replica that answers)."""
        for url in base_urls:
            try:
                model_id = (await self.info(url)).get("model_id")
            except ProviderError:
                continue
            return [str(model_id)] if model_id else []
        return []

    async def info(self, base_url: str) -> dict[str, object]:
        """The server's /info, with `max_input_tokens` normalised across TGI versions."""
        data = await self.http.get_json(f"{base_url}/info")
        if "max_input_tokens" not in data and "max_input_length" in data:
            data["max_input_tokens"] = data["max_input_length"]
        return data

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        t0, sent_at = time.perf_counter(), time.time()
        caps = stream_caps(request.max_tokens, self.max_response_bytes)
        reply: StreamReply | None
        if request.messages is not None:
            url = f"{base_url}/v1/chat/completions"
            chat = reply = OpenAIStream(url, request.max_tokens, self.max_response_bytes, chat=True) if self.stream else None
            data, info, _ = await self.http.post_stream(url, request_body(request, "chat", stream=self.stream), timeout,
                                                        None if reply is None else reply.feed, caps)
            text, usage, finish = chat.answer() if chat is not None and data is None else parse_body(data)
        else:
            params: dict[str, object] = {"max_new_tokens": request.max_tokens, "details": True,
                                      **request.params}
            if request.temperature > 0:
                params.update(do_sample=True, temperature=request.temperature)
            else:
                params["do_sample"] = False
            url = f"{base_url}/generate_stream" if self.stream else f"{base_url}/generate"
            raw = reply = TGIStream(url, request.max_tokens, self.max_response_bytes) if self.stream else None
            data, info, headers = await self.http.post_stream(url, {"inputs": request.prompt, "parameters": params},
                                                              timeout, None if reply is None else reply.feed, caps)
            if raw is not None and data is None:
                data, headers = raw.answer(headers)
            text, usage, finish = parse_generate(data, headers, request.prompt or "")
        timing = reply.timing(t0, sent_at) if reply is not None and reply.events else Timing(sent_at)
        return Response(text=text, usage=usage, latency_ms=(time.perf_counter() - t0) * 1000,
                        finish_reason=finish, endpoint=base_url, ratelimit=info, timing=timing)

    async def aclose(self) -> None:
        await self.http.aclose()


def parse_generate(data: object, headers: Mapping[str, str], prompt: str) -> tuple[str, Usage, str | None]:
    """(text, usage, finish_reason) of a /generate answer. Only a `generated_text` string
    is an answer: a body with an `error` beside it, or whose text is null or absent, is a
    failed attempt (transient, retried), never cached. TGI reports token counts in
    `details.generated_tokens` and the x-prompt-tokens / x-generated-tokens headers; they
    are kept as claimed (claims.checked bounds them), our estimate where there are none."""
    if not isinstance(data, dict):
        raise ProviderError("transient", f"unexpected response shape: a JSON {type(data).__name__}, not an object")
    if data.get("error"):
        raise ProviderError("transient", f"the server answered 200 with an error: {error_text(data['error'])}")
    text = data.get("generated_text")
    if not isinstance(text, str):
        raise ProviderError("transient", "the answer has no text (generated_text is "
                                         f"{'absent' if 'generated_text' not in data else type(text).__name__})")
    found = data.get("details")
    details: dict[str, Any] = found if isinstance(found, dict) else {}  # counts kept as claimed (Usage)
    prompt_tokens = _header_count(headers.get("x-prompt-tokens"))
    generated = details.get("generated_tokens")
    if generated is None:
        generated = _header_count(headers.get("x-generated-tokens"))
    usage = Usage(prompt_tokens=approx_count(prompt) if prompt_tokens is None else prompt_tokens,
                  completion_tokens=approx_count(text) if generated is None else generated)
    return text, usage, details.get("finish_reason")


class TGIStream(StreamReply):
    """`/generate_stream`'s events (router/src/server.rs `generate_stream`; router/src/
    lib.rs `StreamResponse`): one per token, `{"index", "token": {"id", "text", "logprob",
    "special"}, "generated_text": null, "details": null}`; the last carries the whole
    `generated_text` and, with `details: true`, `details` {finish_reason, generated_tokens,
    seed, and since v3 `input_length`: the prompt's tokens}. A failure mid-stream is an
    event `{"error": ..., "error_type": ...}` (server.rs `generate_stream_internal`). A
    special token (the EOS) is not content.

    `answer` gives the /generate body the same request answers unstreamed (its text and
    details) and the prompt's tokens as /generate's `x-prompt-tokens` header, for
    `parse_generate`."""

    def __init__(self, url: str, max_tokens: int, max_bytes: int) -> None:
        super().__init__(url, max_tokens, max_bytes)
        self.final: dict[str, object] | None = None

    def on_event(self, name: str, payload: bytes, now: float) -> None:
        data = self.payload(payload)
        if data.get("error"):
            raise ProviderError("transient", f"the server streamed an error: {error_text(data['error'])}")
        token = data.get("token")
        if isinstance(token, dict) and not token.get("special") and isinstance(token.get("text"), str):
            self.content(token["text"], now)
        if data.get("generated_text") is not None or data.get("details") is not None:
            self.final = data

    def answer(self, headers: dict[str, str]) -> tuple[dict[str, object], dict[str, str]]:
        if self.final is None:
            raise self.incomplete("its last event (generated_text)")
        found = self.final.get("details")
        details: dict[str, object] = found if isinstance(found, dict) else {}
        if "generated_tokens" not in details:
            raise self.incomplete("usage (details.generated_tokens)", fatal=True)
        prompt = details.get("input_length")
        counted = {**headers, "x-prompt-tokens": str(prompt)} if prompt is not None else headers
        return {"generated_text": self.final.get("generated_text"), "details": details}, counted


def _header_count(value: str | None) -> Any:
    """A count from a header: its digits as an int, other text kept as the claim it is."""
    if value is None:
        return None
    return int(value) if value.strip().isdigit() else value
