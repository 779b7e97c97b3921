"""Wire formats the simulator speaks: request parsing and response/error bodies.

Each API is a `WireFormat` with the same four jobs: turn a JSON body into a `Call`
(prompt text, token budget, stop sequences), render a success body, render an error body
in that API's own shape, and name its rate-limit headers. Shapes follow the public API
references (OpenAI chat/completions, Anthropic messages, Hugging Face TGI `/generate`)
closely enough that the official SDKs parse them unchanged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..json_values import as_object
from ..sampling_rules import ANTHROPIC_BOTH_SAMPLERS, one_sampler_only
from .limits import anthropic_headers, openai_headers


class BadRequest(Exception):
    """The client sent something the real API would reject with 400 (or 401/422)."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass
class Call:
    """One generation request, independent of its wire format."""

    route: str
    model: str
    prompts: list[str]  # one per choice (legacy completions accept a list of prompts)
    max_tokens: int
    stop: list[str] = field(default_factory=list)
    body: dict[str, object] = field(default_factory=dict)
    # Anthropic: the prompt text up to the end of each block marked with `cache_control`
    # (prefixes of `text()`), shortest first
    cache_marks: list[str] = field(default_factory=list)
    stream: bool = False  # answered as server-sent events (streams.py)

    def text(self) -> str:
        return "\n".join(self.prompts)


@dataclass
class Answer:
    """What the model produced for one prompt of a call."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str  # "stop" | "length" | "stop_sequence"
    cached_tokens: int = 0  # read from the prompt cache
    cache_write_tokens: int = 0  # written to it (Anthropic's cache_creation_input_tokens)
    # prompt-cache entries this answer writes, usable once it is delivered (digests)
    cache_puts: list[bytes] = field(default_factory=list, repr=False)


def _content_text(content: object) -> str:
    """Text of an OpenAI/Anthropic message content: a string or a list of text blocks
    (concatenated as they are: a prompt split into blocks reads as the prompt)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
    if content is None:
        return ""
    raise BadRequest("message content must be a string or a list of content blocks")


def _int_param(body: dict[str, object], name: str, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{name}' must be a positive integer, got {value!r}")
    return value


def _stops(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise BadRequest("'stop' must be a string or a list of strings")


def _stream(body: dict[str, object], options: bool = False) -> bool:
    """Whether the call asks for a stream. OpenAI refuses `stream_options` without
    `stream` ("The 'stream_options' parameter is only allowed when 'stream' is enabled.")."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"'stream' must be a boolean, got {stream!r}")
    if options and body.get("stream_options") is not None and not stream:
        raise BadRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    return bool(stream)


# ---------------------------------------------------------------- OpenAI


def parse_chat(body: dict[str, object]) -> Call:
    stream = _stream(body, options=True)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    parts = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest("each message must be an object with a 'role'")
        parts.append(_content_text(message.get("content")))
    max_tokens = _int_param(body, "max_completion_tokens", None) or _int_param(body, "max_tokens", None)
    return Call("chat", str(body.get("model", "")), ["\n".join(parts)], max_tokens or 0, _stops(body.get("stop")), body,
                stream=stream)


def parse_completions(body: dict[str, object]) -> Call:
    stream = _stream(body, options=True)
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise BadRequest("'prompt' must be a string or a non-empty list of strings")
    max_tokens = _int_param(body, "max_tokens", 16)  # the legacy API's documented default
    return Call("completions", str(body.get("model", "")), prompts, max_tokens or 16, _stops(body.get("stop")), body,
                stream=stream)


def openai_usage(answers: list[Answer]) -> dict[str, object]:
    prompt = sum(a.prompt_tokens for a in answers)
    completion = sum(a.completion_tokens for a in answers)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": sum(a.cached_tokens for a in answers)},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _openai_finish(answer: Answer) -> str:
    return "length" if answer.finish == "length" else "stop"


def render_chat(call: Call, answers: list[Answer], request_id: str) -> dict[str, object]:
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call.model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": a.text, "refusal": None},
                "logprobs": None,
                "finish_reason": _openai_finish(a),
            }
            for i, a in enumerate(answers)
        ],
        "usage": openai_usage(answers),
        "system_fingerprint": "fp_asyncbench_sim",
    }


def render_completions(call: Call, answers: list[Answer], request_id: str) -> dict[str, object]:
    return {
        "id": f"cmpl-{request_id}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": call.model,
        "choices": [
            {"index": i, "text": a.text, "logprobs": None, "finish_reason": _openai_finish(a)}
            for i, a in enumerate(answers)
        ],
        "usage": openai_usage(answers),
    }


def openai_error(status: int, kind: str, message: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ---------------------------------------------------------------- Anthropic


def parse_messages(body: dict[str, object]) -> Call:
    stream = _stream(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: field required (a non-empty list)")
    max_tokens = _int_param(body, "max_tokens", None)
    if max_tokens is None:
        raise BadRequest("max_tokens: field required")
    if "temperature" in body and "top_p" in body and one_sampler_only(str(body.get("model", ""))):
        raise BadRequest(ANTHROPIC_BOTH_SAMPLERS)  # Claude Opus 4.1 and later (sampling_rules.py)
    parts = [_content_text(body.get("system"))] if body.get("system") else []
    marks: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise BadRequest("messages: each message needs role 'user' or 'assistant'")
        content = message.get("content")
        if isinstance(content, list):  # where a block marked for the prompt cache ends
            done = ""
            for block in content:
                if isinstance(block, dict) and block.get("type") == "text":
                    done += block.get("text", "")
                    if isinstance(block.get("cache_control"), dict):
                        marks.append("\n".join([*parts, done]))
        parts.append(_content_text(content))
    return Call("messages", str(body.get("model", "")), ["\n".join(parts)], max_tokens,
                _stops(body.get("stop_sequences")), body, marks, stream)


def anthropic_stop_reason(a: Answer) -> str:
    return {"length": "max_tokens", "stop_sequence": "stop_sequence"}.get(a.finish, "end_turn")


def render_messages(call: Call, answers: list[Answer], request_id: str) -> dict[str, object]:
    a = answers[0]
    stop_reason = anthropic_stop_reason(a)
    return {
        "id": f"msg_{request_id}",
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": [{"type": "text", "text": a.text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": a.prompt_tokens - a.cached_tokens - a.cache_write_tokens,
            "output_tokens": a.completion_tokens,
            "cache_creation_input_tokens": a.cache_write_tokens,
            "cache_read_input_tokens": a.cached_tokens,
        },
    }


def anthropic_error(status: int, kind: str, message: str, code: str | None = None) -> dict[str, object]:
    """The Messages API's error body: the error and the request's id (`req_...`), as the
    API answers, e.g. BerriAI/litellm#15097's 400 for claude-sonnet-4-5."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": f"req_{uuid.uuid4().hex[:24]}"}


# ---------------------------------------------------------------- TGI


TGI_DEFAULT_MAX_NEW_TOKENS = 100


def parse_generate(body: dict[str, object]) -> Call:
    if body.get("stream"):  # /generate answers whole; /generate_stream streams
        raise BadRequest("Input validation error: `stream` is not supported on /generate: use /generate_stream",
                         422, "validation")
    inputs = body.get("inputs")
    if not isinstance(inputs, str):
        raise BadRequest("Input validation error: `inputs` must be a string", 422, "validation")
    params = body.get("parameters") or {}
    if not isinstance(params, dict):
        raise BadRequest("Input validation error: `parameters` must be an object", 422, "validation")
    try:
        max_new = _int_param(params, "max_new_tokens", TGI_DEFAULT_MAX_NEW_TOKENS)
        stops = _stops(params.get("stop"))
    except BadRequest as exc:
        raise BadRequest(f"Input validation error: {exc}", 422, "validation") from None
    return Call("generate", "", [inputs], max_new or TGI_DEFAULT_MAX_NEW_TOKENS, stops, body)


def parse_generate_stream(body: dict[str, object]) -> Call:
    """TGI's `/generate_stream`: the body of /generate, answered as events (streams.py)."""
    call = parse_generate({k: v for k, v in body.items() if k != "stream"})
    call.stream = True
    return call


def tgi_finish(a: Answer) -> str:
    return {"length": "length", "stop_sequence": "stop_sequence"}.get(a.finish, "eos_token")


def render_generate(call: Call, answers: list[Answer], request_id: str) -> dict[str, object]:
    a = answers[0]
    params = as_object(call.body.get("parameters"))
    text = call.prompts[0] + a.text if params.get("return_full_text") else a.text
    out: dict[str, object] = {"generated_text": text}
    if params.get("details"):
        finish = tgi_finish(a)
        pieces = [a.text[i : i + 4] for i in range(0, len(a.text), 4)]
        out["details"] = {
            "finish_reason": finish,
            "generated_tokens": a.completion_tokens,
            "seed": params.get("seed"),
            "prefill": [] if not params.get("decoder_input_details") else [{"id": 0, "text": "<s>", "logprob": None}],
            "tokens": [{"id": 1000 + i, "text": p, "logprob": 0.0, "special": False} for i, p in enumerate(pieces)],
        }
    return out


def tgi_error(status: int, kind: str, message: str, code: str | None = None) -> dict[str, object]:
    return {"error": message, "error_type": kind}


# ---------------------------------------------------------------- registry


@dataclass(frozen=True)
class WireFormat:
    """Everything the server needs to know about one API."""

    api: str  # "openai" | "anthropic" | "tgi"
    parse: Callable[[dict[str, object]], Call]
    render: Callable[[Call, list[Answer], str], dict[str, object]]
    error: Callable[[int, str, str, str | None], dict[str, object]]
    ratelimit_headers: Callable[[dict[str, float]], dict[str, str]]


def _no_headers(snapshot: dict[str, float]) -> dict[str, str]:
    return {}


ROUTES: dict[str, WireFormat] = {
    "/v1/chat/completions": WireFormat("openai", parse_chat, render_chat, openai_error, openai_headers),
    "/v1/completions": WireFormat("openai", parse_completions, render_completions, openai_error, openai_headers),
    "/v1/messages": WireFormat("anthropic", parse_messages, render_messages, anthropic_error, anthropic_headers),
    "/generate": WireFormat("tgi", parse_generate, render_generate, tgi_error, _no_headers),
    "/generate_stream": WireFormat("tgi", parse_generate_stream, render_generate, tgi_error, _no_headers),
}
