"""The simulator's streamed answers: the server-sent events each real server sends, built
from the same answers the unstreamed routes render (formats.py), so that a streamed
answer assembles to exactly the unstreamed one.

An answer streams as (head, one event per token, tail): the head goes with the first
token (a server sends nothing before its prefill is done), each later token after the
decode time, the tail at once after the last. A token is the simulator's token: four
characters of the answer (ceil(chars / 4) is its completion count).

- OpenAI chat completions (API reference, "The chat completion chunk object" and
  `stream_options.include_usage`; vLLM entrypoints/openai/serving_chat.py sends the same):
  a first chunk with `delta: {"role": "assistant", "content": ""}`, one chunk per token
  with `delta: {"content": ...}`, a last choice chunk with `delta: {}` and its
  `finish_reason`; with `include_usage` every chunk carries `"usage": null` and a final
  chunk with `choices: []` carries the usage; then `data: [DONE]`.
- OpenAI completions: `text_completion` chunks with `choices[0].text`, the same ending.
- Anthropic messages (docs "Streaming Messages": the event flow message_start,
  content_block_start, ping, content_block_delta..., content_block_stop, message_delta,
  message_stop), each as `event: NAME` + `data: JSON`; input and cache tokens in
  message_start's usage, the output tokens in message_delta's (cumulative).
- TGI `/generate_stream` (router/src/server.rs `generate_stream`, router/src/lib.rs
  `StreamResponse`/`StreamDetails`, v3.x): `data:{"index":..,"token":{...},
  "generated_text":null,"details":null}` per token, the last with the whole
  `generated_text` and `details` {finish_reason, generated_tokens, seed, input_length};
  axum writes `data:` without a space.
"""

from __future__ import annotations

import json
import time

from ..json_values import as_object
from .formats import Answer, Call

EVENT_STREAM = "text/event-stream; charset=utf-8"


def _data(value: object, space: bool = True) -> bytes:
    return b"data:" + (b" " if space else b"") + json.dumps(value, ensure_ascii=False,
                                                             separators=(",", ":")).encode("utf-8") + b"\n\n"


def _event(name: str, value: object) -> bytes:
    return f"event: {name}\n".encode() + _data(value)


def pieces(text: str) -> list[str]:
    """The answer's tokens as streamed: four characters each."""
    return [text[i:i + 4] for i in range(0, len(text), 4)]


def _openai_finish(a: Answer) -> str:
    return "length" if a.finish == "length" else "stop"


def openai_stream(call: Call, answers: list[Answer], request_id: str, usage: dict[str, object]) -> tuple[bytes, list[bytes], bytes]:
    chat = call.route == "chat"
    options = call.body.get("stream_options") or {}
    with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    created = int(time.time())
    if chat:
        envelope: dict[str, object] = {"id": f"chatcmpl-{request_id}", "object": "chat.completion.chunk",
                                    "created": created, "model": call.model, "system_fingerprint": "fp_asyncbench_sim"}
    else:
        envelope = {"id": f"cmpl-{request_id}", "object": "text_completion", "created": created, "model": call.model}
    if with_usage:
        envelope["usage"] = None

    def chunk(index: int, delta: dict[str, object] | str, finish: str | None) -> bytes:
        choice: dict[str, object] = {"index": index}
        if chat:
            choice["delta"] = delta
        else:
            choice["text"] = delta
        choice.update(logprobs=None, finish_reason=finish)
        return _data({**envelope, "choices": [choice]})

    head = b"".join(chunk(i, {"role": "assistant", "content": "", "refusal": None}, None)
                    for i in range(len(answers))) if chat else b""
    tokens = [chunk(i, {"content": p} if chat else p, None) for i, a in enumerate(answers) for p in pieces(a.text)]
    tail = b"".join(chunk(i, {} if chat else "", _openai_finish(a)) for i, a in enumerate(answers))
    if with_usage:
        tail += _data({**envelope, "choices": [], "usage": usage})
    return head, tokens, tail + b"data: [DONE]\n\n"


def anthropic_stream(call: Call, answer: Answer, request_id: str, stop_reason: str) -> tuple[bytes, list[bytes], bytes]:
    a = answer
    start = {"type": "message_start", "message": {
        "id": f"msg_{request_id}", "type": "message", "role": "assistant", "model": call.model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": a.prompt_tokens - a.cached_tokens - a.cache_write_tokens,
                  "cache_creation_input_tokens": a.cache_write_tokens, "cache_read_input_tokens": a.cached_tokens,
                  "output_tokens": 1}}}
    head = (_event("message_start", start)
            + _event("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            + _event("ping", {"type": "ping"}))
    tokens = [_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": p}}) for p in pieces(a.text)]
    tail = (_event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                       "usage": {"output_tokens": a.completion_tokens}})
            + _event("message_stop", {"type": "message_stop"}))
    return head, tokens, tail


def tgi_stream(call: Call, answer: Answer, finish: str) -> tuple[bytes, list[bytes], bytes]:
    a = answer
    params = as_object(call.body.get("parameters"))
    parts = pieces(a.text) or [""]
    events = []
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        event: dict[str, object] = {"index": i + 1, "token": {"id": 1000 + i, "text": p, "logprob": 0.0, "special": False},
                                 "generated_text": None, "details": None}
        if last:
            event["generated_text"] = call.prompts[0] + a.text if params.get("return_full_text") else a.text
            if params.get("details"):
                event["details"] = {"finish_reason": finish, "generated_tokens": a.completion_tokens,
                                    "seed": params.get("seed"), "input_length": a.prompt_tokens}
        events.append(_data(event, space=False))
    return b"", events, b""
