"""The endpoint simulator: a real HTTP server on 127.0.0.1 speaking OpenAI, Anthropic and TGI.

Routes: POST /v1/chat/completions, /v1/completions (OpenAI; also TGI's Messages API),
the batch APIs (batch.py: /v1/files, /v1/batches, /v1/messages/batches),
POST /v1/messages (Anthropic), POST /generate, GET /info, GET /health (TGI), GET /v1/models,
GET /stats[?log=1], POST /stats/reset, POST /stats/hold and /stats/release (test
controls: hold every answer from now on, counted and logged on arrival, until released).

A generation request goes through, in order: parse (400 in the API's own error shape),
context-length check (the marker `<<SIM:CONTEXT_TOO_LONG>>` always fails it), rate limits
(429 with `retry-after`), the baseline answerer (`answerer.py`), the injected fault if one
is drawn, and the latency, counted from the request's arrival. Tokens are counted as
ceil(characters / 4), the same rule as `asyncbench.tokenizers.approx_count`. A chat
request without `max_tokens` costs only its prompt at admission and is capped at
CHAT_DEFAULT_MAX_TOKENS output tokens.

Faults and jitter are drawn from `Random(f"{seed}:{prompt sha256}:{attempt}")`, where
`attempt` counts earlier requests with the same prompt: the fate of each attempt is
reproducible whatever the arrival order, and a retry draws afresh, so retries eventually
succeed.

Prompt caching, with a TTL of `prompt_cache_ttl_s` (300 s, refreshed on each hit); as at
the providers, a prefix written by a request can be read once that request has been
answered (requests sent together before then all write it):
- Anthropic: only blocks marked `cache_control` are cached: the prompt up to the end of
  the last marked block is written (`cache_creation_input_tokens`) when it is at least
  the model's minimum (2,048 tokens for a "haiku" model, 1,024 otherwise), and read
  (`cache_read_input_tokens`) by a later request with the same marked prefix;
  `input_tokens` counts only the rest.
- OpenAI, like the provider's automatic caching of prompts of 1,024 tokens and more in
  128-token steps — but only for a request carrying `prompt_cache_key`: its cached tokens
  are the longest 128-token-aligned prefix (≥ 1,024) an earlier request sent. A request
  without `prompt_cache_key` keeps the simulator's older, narrower rule (only an exact
  repeat of a prompt of ≥ 1,024 tokens reads its aligned length from cache), so default
  simulator runs report what they always did (tests/test_parity.py).

It is built on aiohttp's low-level server without an access log and does constant work
per request beyond JSON parsing and the answerer's linear scans, so one core serves
thousands of small requests per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..errors import UserError
from ..json_values import as_list
from . import streams
from .answerer import answer
from .formats import ROUTES, Answer, BadRequest, Call, WireFormat, anthropic_stop_reason, openai_usage, tgi_finish
from .limits import RateLimiter, retry_headers
from .stats import SimStats

if TYPE_CHECKING:
    from .model_tokenizer import ModelTokenizer

CONTEXT_MARKER = "<<SIM:CONTEXT_TOO_LONG>>"
CHAT_DEFAULT_MAX_TOKENS = 256  # generation cap when a chat request sets no max_tokens
_JSON = "application/json"


def count_tokens(text: str) -> int:
    """ceil(chars / 4), as `asyncbench.tokenizers.approx_count`."""
    return -(-len(text) // 4)


@dataclass
class SimConfig:
    """Every knob of the simulator; the defaults are a fast, well-behaved endpoint."""

    host: str = "127.0.0.1"
    port: int = 0  # 0 picks a free port
    latency_ms: float = 0.0
    per_token_ms: float = 0.0  # decode: each output token's time (a streamed answer's gap between tokens)
    # prefill: time per 1,000 prompt tokens not read from the prompt cache, before the
    # first token (a streamed answer's time to first token grows with its prompt)
    prefill_ms_per_ktok: float = 0.0
    jitter_ms: float = 0.0
    rpm: int | None = None
    tpm: int | None = None
    burst_s: float = 1.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 600.0
    malformed_rate: float = 0.0
    max_context_tokens: int = 131072
    seed: int = 0
    model_id: str = "asyncbench-sim"
    served_model_name: str | None = None  # vLLM's --served-model-name: /v1/models `id`, model_id its `root`
    # the one key accepted (None: any); another key, or none, gets the provider's 401
    api_key: str | None = None
    # the model's own tokenizer.json (model_tokenizer.py): /tokenize, /detokenize and every
    # token count as the real server's; the /v1 routes then answer errors as vLLM does
    tokenizer_file: str | None = None
    prompt_cache_ttl_s: float = 300.0  # prompt-cache entries live this long after their last use
    # Batch APIs (batch.py): seconds from submission to results, how many of the first
    # batches expire (half their requests unprocessed), and the providers' size limits.
    batch_turnaround_s: float = 1.0
    batch_expire: int = 0
    openai_batch_max_requests: int = 50_000
    openai_batch_max_bytes: int = 200 * 1024 * 1024
    anthropic_batch_max_requests: int = 100_000
    anthropic_batch_max_bytes: int = 256 * 1024 * 1024
    # Seconds to hold a batch call at a stage ("upload": a file upload before it is
    # stored; "create": a batch create before the batch exists; "created": after it exists,
    # before the reply), so a test can kill the client at each point of a submission.
    batch_hold_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rates = {
            "error_rate": self.error_rate,
            "drop_rate": self.drop_rate,
            "stall_rate": self.stall_rate,
            "malformed_rate": self.malformed_rate,
        }
        for name, value in rates.items():
            if not 0.0 <= value <= 1.0:
                raise UserError(f"simulator: {name} must be between 0 and 1, got {value}")
        if sum(rates.values()) > 1.0:
            raise UserError("simulator: error, drop, stall and malformed rates must add up to at most 1")
        for name in ("latency_ms", "per_token_ms", "prefill_ms_per_ktok", "jitter_ms", "stall_s", "batch_turnaround_s", "batch_expire",
                     "prompt_cache_ttl_s"):
            if getattr(self, name) < 0:
                raise UserError(f"simulator: {name} must not be negative")
        if self.burst_s <= 0:
            raise UserError("simulator: burst_s must be positive")
        if self.max_context_tokens < 1:
            raise UserError("simulator: max_context_tokens must be positive")

    @property
    def faulty(self) -> bool:
        return bool(self.error_rate or self.drop_rate or self.stall_rate or self.malformed_rate or self.jitter_ms)


def _json(data: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return web.Response(body=body, status=status, headers=headers, content_type=_JSON)


class SimServer:
    """The request handler and its state (limits, counters); one per listening server."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.limiter = RateLimiter(config.rpm, config.tpm, config.burst_s)
        self.stats = SimStats()
        self._attempts: dict[str, int] = {}
        self._served: set[str] = set()
        self._prefix_cache: dict[bytes, float] = {}  # prompt-cache entries: prefix digest -> expiry
        self._next_id = 0
        self._pieces: dict[str, int] = {}  # the vLLM-style tokenizer's vocabulary, grown as it is used
        self._piece_list: list[str] = []
        self.model_tokenizer: ModelTokenizer | None = None
        if config.tokenizer_file:
            from .model_tokenizer import ModelTokenizer

            self.model_tokenizer = ModelTokenizer(config.tokenizer_file)
        from .batch import BatchService

        self.batches = BatchService(self)
        self._simple = {
            ("GET", "/health"): self._health,
            ("GET", "/info"): self._info,
            ("GET", "/v1/models"): self._models,
            ("GET", "/stats"): self._get_stats,
            ("POST", "/stats/reset"): self._reset_stats,
            ("POST", "/stats/hold"): self._hold,
            ("POST", "/stats/release"): self._release,
        }
        # Set while answers flow; cleared by /stats/hold. A test freezes what its client
        # has in flight with it (every request received, none answered) to compare the
        # client's counts with the server's at a moment when neither can move.
        self._flowing = asyncio.Event()
        self._flowing.set()

    @staticmethod
    def check_anthropic_headers(request: web.BaseRequest) -> None:
        _check_anthropic_headers(request)

    def reset(self) -> None:
        """Forget counters, the log, attempts and cache state; refill the rate limits."""
        self.stats = SimStats()
        self._attempts.clear()
        self._served.clear()
        self._prefix_cache.clear()
        self.limiter = RateLimiter(self.config.rpm, self.config.tpm, self.config.burst_s)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        fmt = ROUTES.get(request.path)
        if fmt is not None and request.method == "POST":
            return await self._generate(request, fmt)
        if request.method == "POST" and request.path == "/tokenize":
            return await self._tokenize(request)
        if request.method == "POST" and request.path == "/detokenize":
            return await self._detokenize(request)
        simple = self._simple.get((request.method, request.path))
        if simple is not None:
            return simple(request)
        if request.path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
            return await self.batches.handle(request)
        return _json({"error": f"no route {request.method} {request.path}"}, 404)

    # ------------------------------------------------------------ small endpoints

    def _health(self, request: web.BaseRequest) -> web.Response:
        return web.Response(status=200)

    def _info(self, request: web.BaseRequest) -> web.Response:
        total = self.config.max_context_tokens
        return _json(
            {
                "model_id": self.config.model_id,
                "model_sha": None,
                "model_dtype": "torch.float16",
                "model_device_type": "cpu",
                "model_pipeline_tag": "text-generation",
                "max_concurrent_requests": 128,
                "max_best_of": 2,
                "max_stop_sequences": 4,
                "max_input_tokens": total - 1,
                "max_input_length": total - 1,
                "max_total_tokens": total,
                "validation_workers": 2,
                "max_client_batch_size": 4,
                "router": "asyncbench-sim",
                "version": "asyncbench-sim",
                "sha": None,
                "docker_label": None,
            }
        )

    async def _tokenize(self, request: web.BaseRequest) -> web.Response:
        """`POST /tokenize`: the simulated model's tokenizer (model_tokenizer.py), else the
        4-character pieces the context check counts. TGI's form (`inputs`): each token
        with its UTF-8 byte span; vLLM's (`prompt`): token ids, which `/detokenize` turns
        back into text."""
        try:
            body = json.loads(await request.read())
            text = body["inputs"] if "inputs" in body else body["prompt"]
            if not isinstance(text, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return _json({"error": "Input validation error: `inputs` must be a string", "error_type": "validation"}, 422)
        special = body.get("add_special_tokens", True) is not False
        if self.model_tokenizer is not None:
            if "prompt" in body:  # vLLM
                ids = self.model_tokenizer.ids(text, special)
                return _json({"count": len(ids), "max_model_len": self.config.max_context_tokens, "tokens": ids})
            return _json(self.model_tokenizer.tgi_tokens(text, special))
        pieces = [text[j: j + 4] for j in range(0, len(text), 4)]
        if "prompt" in body:  # vLLM
            ids = [self._piece_id(p) for p in pieces]
            return _json({"count": len(ids), "max_model_len": self.config.max_context_tokens, "tokens": ids})
        # TGI's offsets are UTF-8 byte offsets (router/src/server.rs encoding_to_tokens)
        out, at = [], 0
        for i, p in enumerate(pieces):
            size = len(p.encode("utf-8", "surrogatepass"))
            out.append({"id": i, "text": p, "start": at, "stop": at + size})
            at += size
        return _json(out)

    def _piece_id(self, piece: str) -> int:
        """The piece's id, a new one the first time it is seen."""
        if piece not in self._pieces:
            self._pieces[piece] = len(self._piece_list)
            self._piece_list.append(piece)
        return self._pieces[piece]

    async def _detokenize(self, request: web.BaseRequest) -> web.Response:
        """vLLM's `POST /detokenize`: the text of token ids /tokenize gave."""
        try:
            ids = json.loads(await request.read())["tokens"]
            if self.model_tokenizer is not None:
                text = self.model_tokenizer.detokenize([int(i) for i in ids])
            else:
                text = "".join(self._piece_list[int(i)] for i in ids)
        except (ValueError, KeyError, TypeError, IndexError):
            return _json({"object": "error", "message": "invalid tokens", "type": "BadRequestError", "code": 400}, 400)
        return _json({"prompt": text})

    def _models(self, request: web.BaseRequest) -> web.Response:
        # as vLLM (vllm/entrypoints/openai/serving_models.py show_available_models): `id` the
        # served name (--served-model-name, else the model), `root` the model's path or
        # repository, `max_model_len` the context
        model = {"id": self.config.served_model_name or self.config.model_id, "object": "model", "created": 0,
                 "owned_by": "asyncbench", "root": self.config.model_id, "parent": None,
                 "max_model_len": self.config.max_context_tokens}
        return _json({"object": "list", "data": [model]})

    def _get_stats(self, request: web.BaseRequest) -> web.Response:
        return _json(self.stats.as_dict(with_log=request.query.get("log") in ("1", "true")))

    def _reset_stats(self, request: web.BaseRequest) -> web.Response:
        self.reset()
        return _json({"reset": True})

    def _hold(self, request: web.BaseRequest) -> web.Response:
        self._flowing.clear()
        return _json({"held": True})

    def _release(self, request: web.BaseRequest) -> web.Response:
        self._flowing.set()
        return _json({"held": False})

    # ------------------------------------------------------------ generation

    def _error(self, fmt: WireFormat, status: int, kind: str, message: str, code: str | None = None,
               headers: dict[str, str] | None = None) -> web.Response:
        return _json(fmt.error(status, kind, message, code), status, headers)

    def _check_key(self, request: web.BaseRequest, fmt: WireFormat) -> None:
        """With `api_key` set, any other key is refused as the real APIs refuse it: OpenAI
        401 `invalid_api_key` "Incorrect API key provided: sk-...XYZ", Anthropic 401
        `authentication_error` "invalid x-api-key", TGI/HF endpoints 401."""
        expected = self.config.api_key
        if expected is None:
            return
        given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        if given == expected:
            return
        if fmt.api == "anthropic":
            raise BadRequest("invalid x-api-key", 401, "authentication_error")
        shown = f"{given[:3]}*****{given[-4:]}" if len(given) > 8 else "*****"
        raise BadRequest(f"Incorrect API key provided: {shown}. You can find your API key at "
                         "https://platform.openai.com/account/api-keys.", 401, "invalid_request_error")

    def _bad(self, fmt: WireFormat, exc: BadRequest) -> web.Response:
        self.stats.bad_requests += 1
        return self._error(fmt, exc.status, exc.kind, str(exc))

    async def _generate(self, request: web.BaseRequest, fmt: WireFormat) -> web.StreamResponse:
        stats = self.stats
        stats.requests += 1
        stats.routes[request.path] += 1
        arrived = asyncio.get_running_loop().time()
        raw = await request.read()
        try:
            if fmt.api == "anthropic":
                _check_anthropic_headers(request)
            self._check_key(request, fmt)
            try:
                body = json.loads(raw)
            except ValueError:
                raise BadRequest("the request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            call = fmt.parse(body)
        except BadRequest as exc:
            return self._bad(fmt, exc)
        if not call.model:
            call.model = self.config.model_id

        text = call.text()
        fingerprint = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        stats.log.append(fingerprint)
        stats.times.append(time.time())
        attempt = self._attempts.get(fingerprint, 0)
        self._attempts[fingerprint] = attempt + 1

        prompt_tokens = self.prompt_tokens(call)
        refusal = self._check_context(fmt, call, text, max(prompt_tokens))
        if refusal is not None:
            stats.context_length_errors += 1
            return refusal

        headers: dict[str, str] = {}
        if self.limiter.enabled:
            decision = self.limiter.admit(sum(prompt_tokens) + call.max_tokens * len(call.prompts))
            headers = fmt.ratelimit_headers(decision.snapshot)
            if not decision.admitted:
                stats.rate_limited += 1
                return self._rate_limited(fmt, decision.reason, decision.retry_after, headers)

        answers = self.answers(fmt, call, fingerprint, raw)
        completion = sum(a.completion_tokens for a in answers)
        return await self._deliver(request, fmt, call, answers, completion, fingerprint, attempt, headers, arrived)

    def prompt_tokens(self, call: Call) -> list[int]:
        """Each prompt's tokens: the model's own tokenizer's count as its server makes it
        (model_tokenizer.py: raw text with special tokens, chat through the template),
        else ceil(chars / 4)."""
        tok = self.model_tokenizer
        if tok is None:
            return [count_tokens(p) for p in call.prompts]
        if call.route == "chat":
            messages = [m for m in as_list(call.body.get("messages")) if isinstance(m, dict)]
            return [tok.count(tok.chat_prompt(messages), special=False)]
        return [tok.count(p) for p in call.prompts]

    def answers(self, fmt: WireFormat, call: Call, fingerprint: str, raw: bytes) -> list[Answer]:
        """The model's answers to a parsed call, with the prompt-cache usage (live and batch)."""
        cap = call.max_tokens or CHAT_DEFAULT_MAX_TOKENS
        repeat = fingerprint in self._served and fmt.api == "openai"
        out = []
        for p, n in zip(call.prompts, self.prompt_tokens(call)):
            a = _answer(call, p, n, cap, repeat)
            if fmt.api == "anthropic" and call.cache_marks:
                a.cached_tokens, a.cache_write_tokens = self._marked_cache(call, a.cache_puts)
            elif fmt.api == "openai" and call.body.get("prompt_cache_key"):
                a.cached_tokens = max(a.cached_tokens, self._automatic_cache(p, a.prompt_tokens, a.cache_puts))
            out.append(a)
        return out

    def _cache_hit(self, digest: bytes, now: float) -> bool:
        """Whether a prefix is cached (unexpired); a hit refreshes its TTL."""
        expiry = self._prefix_cache.get(digest)
        if expiry is None or expiry < now:
            return False
        self._prefix_cache[digest] = now + self.config.prompt_cache_ttl_s
        return True

    def _marked_cache(self, call: Call, puts: list[bytes]) -> tuple[int, int]:
        """Anthropic: (tokens read, tokens written) for the blocks marked `cache_control`;
        the entry to write goes to `puts`."""
        now = time.monotonic()
        least = 2048 if "haiku" in call.model.lower() else 1024
        marks = [(m, count_tokens(m)) for m in call.cache_marks]
        marks = [(m, t) for m, t in marks if t >= least]
        if not marks:
            return 0, 0
        read = 0
        for mark, tokens in reversed(marks):  # the longest cached marked prefix
            if self._cache_hit(hashlib.sha256(mark.encode("utf-8", "surrogatepass")).digest()[:16], now):
                read = tokens
                break
        longest, tokens = marks[-1]
        if tokens <= read:
            return read, 0
        puts.append(hashlib.sha256(longest.encode("utf-8", "surrogatepass")).digest()[:16])
        return read, tokens - read

    def _automatic_cache(self, prompt: str, prompt_tokens: int, puts: list[bytes]) -> int:
        """OpenAI: the longest 128-token-aligned prefix (≥ 1,024 tokens) of this prompt an
        earlier answered request sent; every other such prefix of this one goes to `puts`."""
        if prompt_tokens < 1024:
            return 0
        now = time.monotonic()
        h = hashlib.sha256()
        step = 128 * 4  # 128 tokens of ceil(chars / 4)
        cached = 0
        for k in range(1, len(prompt) // step + 1):
            h.update(prompt[(k - 1) * step:k * step].encode("utf-8", "surrogatepass"))
            if k * 128 < 1024:
                continue
            digest = h.copy().digest()[:16]
            if self._cache_hit(digest, now):
                cached = k * 128
            else:
                puts.append(digest)
        return min(cached, prompt_tokens)

    def served(self, fingerprint: str, answers: list[Answer]) -> None:
        """Count a successful answer as billed, and remember its prompt for prompt caching."""
        stats = self.stats
        stats.ok += 1
        stats.prompt_tokens += sum(a.prompt_tokens for a in answers)
        stats.completion_tokens += sum(a.completion_tokens for a in answers)
        stats.cached_tokens += sum(a.cached_tokens for a in answers)
        stats.cache_write_tokens += sum(a.cache_write_tokens for a in answers)
        self._served.add(fingerprint)
        expiry = time.monotonic() + self.config.prompt_cache_ttl_s
        for a in answers:  # what this answer wrote to the prompt cache is readable from now
            for digest in a.cache_puts:
                self._prefix_cache[digest] = expiry

    def check_context(self, fmt: WireFormat, call: Call, text: str) -> web.Response | None:
        return self._check_context(fmt, call, text, max(self.prompt_tokens(call)))

    def _check_context(self, fmt: WireFormat, call: Call, text: str, prompt_tokens: int) -> web.Response | None:
        limit = self.config.max_context_tokens
        if fmt.api == "tgi" and CONTEXT_MARKER not in text and prompt_tokens + call.max_tokens <= limit \
                and prompt_tokens > limit - 1:  # router/src/validation.rs InputLength (max_input_tokens = total - 1)
            msg = f"Input validation error: `inputs` must have less than {limit - 1} tokens. Given: {prompt_tokens}"
            return self._error(fmt, 422, "validation", msg)
        if CONTEXT_MARKER not in text and prompt_tokens + call.max_tokens <= limit:
            return None
        if fmt.api == "anthropic":
            msg = f"prompt is too long: {prompt_tokens} tokens > {limit - call.max_tokens} maximum"
            return self._error(fmt, 400, "invalid_request_error", msg)
        if fmt.api == "tgi":
            msg = (
                f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {limit}. "
                f"Given: {prompt_tokens} `inputs` tokens and {call.max_tokens} `max_new_tokens`"
            )
            return self._error(fmt, 422, "validation", msg)
        msg = (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + call.max_tokens} tokens ({prompt_tokens} in the messages, "
            f"{call.max_tokens} in the completion). Please reduce the length of the messages or completion."
        )
        if self.model_tokenizer is not None:  # a self-hosted model: vLLM's body (protocol.py ErrorResponse,
            # the message from entrypoints/openai/serving_engine.py `_validate_input`, v0.6-v0.8)
            return _json({"object": "error", "message": msg, "type": "BadRequestError", "param": None,
                          "code": 400}, 400)
        return self._error(fmt, 400, "invalid_request_error", msg, "context_length_exceeded")

    def _rate_limited(self, fmt: WireFormat, reason: str | None, retry_after: float | None,
                      headers: dict[str, str]) -> web.Response:
        if retry_after is not None:
            headers.update(retry_headers(retry_after))
        if reason == "too_large":
            msg = f"Request too large for {self.config.model_id} on tokens per min (TPM): Limit {self.config.tpm}."
        else:
            limit = self.config.rpm if reason == "requests" else self.config.tpm
            unit = "requests per min (RPM)" if reason == "requests" else "tokens per min (TPM)"
            msg = f"Rate limit reached for {self.config.model_id} on {unit}: Limit {limit}. Please try again in {retry_after:.3f}s."
        if fmt.api == "anthropic":
            return self._error(fmt, 429, "rate_limit_error", msg, headers=headers)
        if fmt.api == "tgi":
            return self._error(fmt, 429, "overloaded", "Model is overloaded", headers=headers)
        return self._error(fmt, 429, reason or "requests", msg, "rate_limit_exceeded", headers)

    async def _deliver(self, request: web.BaseRequest, fmt: WireFormat, call: Call, answers: list[Answer],
                       completion: int, fingerprint: str, attempt: int, headers: dict[str, str],
                       arrived: float) -> web.StreamResponse:
        cfg = self.config
        await self._flowing.wait()
        fault, jitter = "", 0.0
        if cfg.faulty:
            rng = random.Random(f"{cfg.seed}:{fingerprint}:{attempt}")
            fault = _draw_fault(cfg, rng.random())
            jitter = rng.uniform(-cfg.jitter_ms, cfg.jitter_ms) if cfg.jitter_ms else 0.0
        uncached = sum(a.prompt_tokens - a.cached_tokens for a in answers)
        first_ms = cfg.latency_ms + cfg.prefill_ms_per_ktok * uncached / 1000.0 + jitter
        if call.stream and fault != "error":
            return await self._stream(request, fmt, call, answers, fingerprint, headers, arrived, first_ms, fault)
        delay_ms = first_ms + cfg.per_token_ms * completion
        if fault == "stall":
            self.stats.stalled += 1
            delay_ms += cfg.stall_s * 1000.0
        # The latency runs from the request's arrival, like a real server's: the time spent
        # parsing and answering is part of it, not added on top.
        remaining = delay_ms / 1000.0 - (asyncio.get_running_loop().time() - arrived)
        if remaining > 0:
            await asyncio.sleep(remaining)

        stats = self.stats
        if fault == "drop":
            stats.dropped += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # no response: the connection is gone
        if fault == "error":
            stats.errors_5xx += 1
            status = random.Random(f"{fingerprint}:{attempt}:status").choice((500, 502, 503))
            kind = {"anthropic": "api_error" if status == 500 else "overloaded_error", "tgi": "server_error"}
            msg = f"The server had an error while processing your request (simulated {status})."
            return self._error(fmt, status, kind.get(fmt.api, "server_error"), msg, None, headers)

        self._next_id += 1
        payload = json.dumps(fmt.render(call, answers, f"sim{self._next_id:012x}"), ensure_ascii=False,
                             separators=(",", ":")).encode("utf-8")
        if fault == "malformed":
            stats.malformed += 1
            return web.Response(body=payload[: max(1, len(payload) // 2)], headers=headers, content_type=_JSON)
        self.served(fingerprint, answers)
        return web.Response(body=payload, headers=headers, content_type=_JSON)


    async def _stream(self, request: web.BaseRequest, fmt: WireFormat, call: Call, answers: list[Answer],
                      fingerprint: str, headers: dict[str, str], arrived: float, first_ms: float,
                      fault: str) -> web.StreamResponse:
        """The answers as the server streams them (streams.py): nothing until the prefill
        time has passed since the request arrived, then the head and first token, then a
        token every `per_token_ms`, then the tail. A fault strikes after the first token,
        as a real server fails mid-stream: a stall holds the stream open, a drop cuts the
        connection, a malformed event ends it."""
        loop = asyncio.get_running_loop()
        self._next_id += 1
        rid = f"sim{self._next_id:012x}"
        if fmt.api == "anthropic":
            head, tokens, tail = streams.anthropic_stream(call, answers[0], rid, anthropic_stop_reason(answers[0]))
        elif fmt.api == "tgi":
            head, tokens, tail = streams.tgi_stream(call, answers[0], tgi_finish(answers[0]))
        else:
            head, tokens, tail = streams.openai_stream(call, answers, rid, openai_usage(answers))
        remaining = first_ms / 1000.0 - (loop.time() - arrived)
        if remaining > 0:
            await asyncio.sleep(remaining)
        response = web.StreamResponse(status=200, headers={**headers, "Content-Type": streams.EVENT_STREAM,
                                                           "Cache-Control": "no-cache"})
        await response.prepare(request)
        await response.write(head + (tokens[0] if tokens else b""))
        stats = self.stats
        if fault == "stall":
            stats.stalled += 1
            await asyncio.sleep(self.config.stall_s)
        elif fault == "drop":
            stats.dropped += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        elif fault == "malformed":
            stats.malformed += 1
            await response.write(b'data: {"choices": [{"delta": \n\n')
            await response.write_eof()
            return response
        step, start = self.config.per_token_ms / 1000.0, loop.time()
        if step <= 0:
            await response.write(b"".join(tokens[1:]) + tail)
        else:
            for i, event in enumerate(tokens[1:], start=1):
                wait = start + i * step - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await response.write(event)
            await response.write(tail)
        self.served(fingerprint, answers)
        await response.write_eof()
        return response


def _check_anthropic_headers(request: web.BaseRequest) -> None:
    """Anthropic requires a key and a version; SDK 2.x sends the key as a bearer token."""
    if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
        raise BadRequest("x-api-key header is required", 401, "authentication_error")
    if not request.headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required", 400, "invalid_request_error")


def _draw_fault(cfg: SimConfig, u: float) -> str:
    """Map one uniform draw onto the mutually exclusive faults."""
    for name, rate in (("drop", cfg.drop_rate), ("error", cfg.error_rate), ("stall", cfg.stall_rate),
                       ("malformed", cfg.malformed_rate)):
        if u < rate:
            return name
        u -= rate
    return ""


def _answer(call: Call, prompt: str, prompt_tokens: int, cap: int, cache_ok: bool) -> Answer:
    text = answer(prompt, cap * 4)
    finish = "length" if len(text) >= cap * 4 else "stop"
    for stop in call.stop:
        cut = text.find(stop) if stop else -1
        if cut >= 0:
            text, finish = text[:cut], "stop_sequence"
    cached = (prompt_tokens // 128) * 128 if cache_ok and prompt_tokens >= 1024 else 0
    return Answer(text, prompt_tokens, max(1, count_tokens(text)), finish, cached)


# ---------------------------------------------------------------- running it


async def start_server(config: SimConfig) -> tuple[web.BaseRunner, SimServer, int]:
    """Start listening; returns the runner (to clean up), the handler state and the port."""
    sim = SimServer(config)
    max_body = max(config.openai_batch_max_bytes, config.anthropic_batch_max_bytes) + (1 << 20)

    def make_request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        # bodies up to the batch limits (aiohttp's default refuses more than 1 MB)
        return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                               client_max_size=max_body)

    server = web.Server(sim.handle, access_log=None, handler_cancellation=True, request_factory=make_request)
    runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=1024)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise UserError(f"simulator: cannot listen on {config.host}:{config.port} ({exc.strerror}); "
                        "pick another --port or use --port 0") from None
    port = runner.addresses[0][1]
    return runner, sim, port


@dataclass
class SimHandle:
    """A simulator running in a background thread; `stop()` shuts it down."""

    base_url: str
    port: int
    server: SimServer
    _loop: asyncio.AbstractEventLoop
    _stop: asyncio.Event
    _thread: threading.Thread

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)

    def stats(self) -> dict[str, object]:
        """The counters, read without going through HTTP."""
        return self.server.stats.as_dict(with_log=True)


@contextlib.contextmanager
def run_sim_in_thread(config: SimConfig | None = None) -> Iterator[SimHandle]:
    """Run a simulator on its own event loop in a daemon thread for the `with` block."""
    config = config or SimConfig()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        try:
            runner, sim, port = await start_server(config)
        except BaseException as exc:  # surfaced in the caller's thread
            box["error"] = exc
            ready.set()
            return
        stop = asyncio.Event()
        box.update(sim=sim, port=port, stop=stop, loop=asyncio.get_running_loop())
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="asyncbench-sim", daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:
        raise box["error"]
    handle = SimHandle(f"http://{config.host}:{box['port']}", box["port"], box["sim"], box["loop"], box["stop"], thread)
    try:
        yield handle
    finally:
        handle.stop()


async def serve_forever(config: SimConfig, announce: Any = None) -> None:
    """Serve until cancelled; `announce(port)` is called once listening."""
    runner, _, port = await start_server(config)
    try:
        if announce is not None:
            announce(port)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()

