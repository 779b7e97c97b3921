"""The OpenAI wire format (chat completions and completions), shared by the SDK-based
`openai` provider and the plain-HTTP `openai-compat` provider."""

from __future__ import annotations

from typing import Any

from ..claims import claim
from ..errors import ProviderError
from ..types import ApiKind, Request, Usage
from .base import error_text


def request_body(request: Request, api: ApiKind) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens,
                            "temperature": request.temperature}
    body.update(request.params)
    if api == "completion" or request.messages is None:
        body["prompt"] = request.prompt if request.prompt is not None else request.text()
    else:
        body["messages"] = request.messages
    return body


def parse_body(data: dict[str, Any]) -> tuple[str, Usage, str | None]:
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
