"""The OpenAI wire format (chat completions and completions), shared by the SDK-based
`openai` provider and the plain-HTTP `openai-compat` provider."""

from __future__ import annotations

from typing import Any

from ..errors import ProviderError
from ..types import ApiKind, Request, Usage


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
    """(text, usage, finish_reason) from a chat.completion or text_completion body."""
    try:
        choice = data["choices"][0]
        if "message" in choice:
            text = choice["message"].get("content") or ""
        else:
            text = choice.get("text") or ""
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return text, Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_prompt_tokens=int(details.get("cached_tokens") or 0),
        ), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderError("transient", f"unexpected response shape: {type(exc).__name__}: {exc}") from None
