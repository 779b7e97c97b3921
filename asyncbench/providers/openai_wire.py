"""The OpenAI wire format (chat completions and completions), shared by the SDK-based
`openai` provider and the plain-HTTP `openai-compat` provider: the request body, the
answer, and the answer streamed (`OpenAIStream`)."""

from __future__ import annotations

from ..claims import claim
from ..errors import ProviderError
from ..types import ApiKind, Request, Usage
from .base import error_text
from .stream_reply import StreamReply


def request_body(request: Request, api: ApiKind, stream: bool = False) -> dict[str, object]:
    """The body of `request`; `stream`: asked as a stream whose last chunk carries the
    usage (`stream_options.include_usage`, OpenAI's API reference; vLLM, llama.cpp's
    server and TGI's Messages API take it too)."""
    body: dict[str, object] = {"model": request.model, "max_tokens": request.max_tokens,
                               "temperature": request.temperature}
    body.update(request.params)
    if stream:
        body["stream"], body["stream_options"] = True, {"include_usage": True}
    if api == "completion" or request.messages is None:
        body["prompt"] = request.prompt if request.prompt is not None else request.text()
    else:
        body["messages"] = request.messages
    return body


def parse_body(data: object) -> tuple[str, Usage, str | None]:
    """(text, usage, finish_reason) from a chat.completion or text_completion body.

    A 200 is an answer only when it is one: a body with an `error` object beside its
    choices, or a choice whose content is null or absent (a refusal, a tool call, a
    server that failed half-way), is a failed attempt (transient: retried like a dropped
    connection, then the sample fails with this reason), never an answer to cache. The
    usage is kept as claimed (claims.checked bounds it before anything books it)."""
    if not isinstance(data, dict):
        raise ProviderError("transient", f"unexpected response shape: a JSON {type(data).__name__}, not an object")
    if data.get("error"):
        raise ProviderError("transient", f"the server answered 200 with an error: {error_text(data['error'])}")
    try:
        choice = data["choices"][0]
        if "message" in choice:
            message = choice["message"]
            text = message.get("content")
            if text is None:
                why = f"refused: {message['refusal']}" if message.get("refusal") else "no content"
                raise ProviderError("transient", f"the answer has no text ({why})"[:300])
        else:
            text = choice.get("text")
            if text is None:
                raise ProviderError("transient", "the answer has no text (no content)")
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return text, Usage(
            prompt_tokens=claim(usage, "prompt_tokens"),
            completion_tokens=claim(usage, "completion_tokens"),
            cached_prompt_tokens=claim(details, "cached_tokens"),
        ), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderError("transient", f"unexpected response shape: {type(exc).__name__}: {exc}") from None


class OpenAIStream(StreamReply):
    """A chat or text completion streamed as `chat.completion.chunk` / `text_completion`
    events (OpenAI's API reference, "The chat completion chunk object"; vLLM
    serving_chat.py and llama.cpp's server send the same): each chunk's
    `choices[0].delta.content` (chat) or `choices[0].text` (completions) is a piece, a
    chunk's `finish_reason` ends the choice, a last chunk with `choices: []` carries the
    `usage` (stream_options.include_usage), and `data: [DONE]` ends the stream. A chunk
    with an `error` object (vLLM and llama.cpp report a failure mid-stream so) is a failed
    attempt, as a 200 body with an error is.

    `answer` builds the body the unstreamed request answers (its choice's content, finish
    reason and usage) and parses it with `parse_body`."""

    def __init__(self, url: str, max_tokens: int, max_bytes: int, chat: bool) -> None:
        super().__init__(url, max_tokens, max_bytes)
        self.chat = chat
        self.usage: object = None
        self.finish: object = None
        self.refusal: list[str] = []
        self.done = False
        self.choices = False  # a chunk with a choice came

    def on_event(self, name: str, payload: bytes, now: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        data = self.payload(payload)
        if data.get("error"):
            raise ProviderError("transient", f"the server streamed an error: {error_text(data['error'])}")
        if data.get("usage") is not None:
            self.usage = data["usage"]
        choices = data.get("choices")
        if not choices:
            return
        try:
            choice = choices[0]
            if self.chat:
                delta = choice.get("delta") or {}
                piece, refusal = delta.get("content"), delta.get("refusal")
                if isinstance(refusal, str):
                    self.refusal.append(refusal)
            else:
                piece = choice.get("text")
            finish = choice.get("finish_reason")
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise ProviderError("transient", f"unexpected stream chunk from {self.url}: {type(exc).__name__}: {exc}") from None
        self.choices = True
        if piece is not None:
            if not isinstance(piece, str):
                raise ProviderError("transient", f"unexpected stream chunk from {self.url}: content is "
                                                 f"{type(piece).__name__}")
            self.content(piece, now)
        if finish is not None:
            self.finish = finish

    def answer(self) -> tuple[str, Usage, str | None]:
        """(text, usage, finish_reason) of the whole stream, as `parse_body` reads the
        unstreamed answer."""
        if not self.choices or self.finish is None:
            raise self.incomplete("its last choice (no finish_reason)")
        if self.usage is None:
            raise self.incomplete("usage", fatal=True)
        text: str | None = "".join(self.parts)
        if not text and self.refusal:
            text = None
        message = {"content": text, "refusal": "".join(self.refusal) or None}
        choice = {"message": message} if self.chat else {"text": text}
        return parse_body({"choices": [{**choice, "finish_reason": self.finish}], "usage": self.usage})
