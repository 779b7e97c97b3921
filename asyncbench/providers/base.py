"""What every provider is: one Request in, one HTTP call, one Response (or a classified
ProviderError) out. Retries, limits, caching and cost live above, in the scheduler.

Model specs are `provider:model` — `openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`,
`tgi:<name>`, `openai-compat:<model>` — plus `sim` (the built-in simulator's baseline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol
from urllib.parse import urlsplit

from ..errors import ProviderError
from ..tokenizers import Tokenizer
from ..types import ApiKind, Request, Response
from .bounded import DEFAULT_MAX_RESPONSE_BYTES


class LentTokenizer(Tokenizer, Protocol):
    """A tokenizer a server lends (providers' `server_tokenizer`); `count_specials` is
    set False for pred.py's chatglm3 branch, which counts no BOS."""

    count_specials: bool


@dataclass
class ModelSpec:
    provider: str
    model: str
    base_urls: list[str] = field(default_factory=list)
    endpoint_id: str = ""
    api: ApiKind = "chat"  # "completion": base models
    stream: bool = True  # live answers streamed where the provider streams (--stream)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


@dataclass
class BatchStatus:
    """One poll of a provider batch: its state in the provider's words, whether it ended
    (results can be downloaded), and its request counts."""

    state: str
    ended: bool
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # why a batch failed as a whole (its input did not validate)


# What a batch result is for one request: its answer, or a classified error (an expired
# or cancelled request, a server error: transient, sent again; a bad request: fatal).
BatchResult = dict[str, "Response | ProviderError"]


class Provider(Protocol):
    @property
    def name(self) -> str: ...

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        """One HTTP call. Raises ProviderError classified as rate_limited/transient/fatal."""
        ...

    async def aclose(self) -> None: ...


class ProviderBase:
    """What a provider knows about itself, as class attributes the rest of the package
    asks instead of testing provider names. A provider module subclasses this, implements
    `send` and `aclose`, and adds one line to the registry in `providers/__init__.py`."""

    name: ClassVar[str]
    # Where requests go without --base-url (None: --base-url is required), and the
    # environment variable that overrides it.
    default_base_url: ClassVar[str | None] = None
    base_url_env: ClassVar[str | None] = None
    # The provider's own key variable. Its value is sent only to the provider's own API:
    # to `default_base_url`'s host, or to the URL the user put in `base_url_env`.
    key_env: ClassVar[str | None] = None
    # Prompt tokens for TPM limits counted with tiktoken (else ceil(chars/4)).
    tiktoken_counts: ClassVar[bool] = False
    # Price entries match by model-name prefix (dated snapshots of a listed model).
    priced_by_prefix: ClassVar[bool] = False
    # The provider bills per token: a model of it missing from the price table is unpriced
    # (unknown cost), not free as a self-hosted one is.
    bills_per_token: ClassVar[bool] = False
    # Serves open models that LongBench's pred.py prompts as raw text (official_models.py)
    serves_open_models: ClassVar[bool] = False
    # A batch API (runners/batch.py): (max requests, max bytes) per batch; None: none.
    batch_limits: ClassVar[tuple[int, int] | None] = None
    # `send` ends within its timeout by itself: its only calls are HTTPClient.post_json,
    # whose deadline (http1.py) is total (connecting, sending, every byte of the answer), so
    # the scheduler sets no second deadline around it (a cancel scope per request, ~4% of
    # a fast local run's CPU). An SDK's timeout is per read: those providers keep it.
    ends_in_time: ClassVar[bool] = False

    def __init__(self, model: str, api_key: str | None, api: ApiKind = "chat") -> None:
        self.model = model
        self.api_key = api_key
        self.api = api
        # Ask for streamed answers (--stream on, the run's default: make_provider sets it
        # from the spec), which time the first token and each one after it
        # (stream_reply.py); the answer, its usage and its cache key are those of the
        # unstreamed request.
        self.stream = False
        self._max_response_bytes = DEFAULT_MAX_RESPONSE_BYTES

    @property
    def max_response_bytes(self) -> int:
        """The cap on one answer's decoded body (--max-response-bytes; bounded.py)."""
        return self._max_response_bytes

    @max_response_bytes.setter
    def max_response_bytes(self, limit: int) -> None:
        self._max_response_bytes = limit
        http = getattr(self, "http", None)  # the HTTPClient of openai-compat and tgi
        if http is not None:
            http.max_bytes = limit

    def prompt_cache_min_tokens(self) -> int | None:
        """The shortest prefix this model's prompt cache takes, for `--prompt-cache auto`
        (prompt_cache.py); None: the provider has no prompt cache to mark prefixes for."""
        return None

    def sends_raw(self, chat: bool) -> bool:
        """Whether a sample goes as raw text (a completion endpoint) rather than as one
        chat message. `chat` is False for samples the official scripts send without a
        chat template (LongBench's few-shot and code tasks)."""
        return self.api == "completion"

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        """One HTTP call. Raises ProviderError classified as rate_limited/transient/fatal."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close pooled connections."""

    # -- batch API (providers with `batch_limits`) ------------------------------------
    def batch_entry(self, request: Request, custom_id: str) -> dict[str, object]:
        """One request as a line of this provider's batch input."""
        raise NotImplementedError

    async def batch_submit(self, base_url: str, entries: list[dict[str, object]], meta: dict[str, str],
                           on_uploaded: Callable[[str], None] = lambda file_id: None) -> str:
        """Submit one batch; returns its id. `meta` goes in the batch's metadata where the
        API has it (OpenAI); `on_uploaded` hears the input file's id before the batch is
        created (so that it is on record if the process dies between the two)."""
        raise NotImplementedError

    async def batch_find(self, base_url: str, intent: str, since: float, n_requests: int,
                         known: set[str]) -> str | None:
        """The id of a batch submitted for `intent` (a client-made id in `meta`) at or
        after `since`, whose reply never reached the record; None if there is none."""
        raise NotImplementedError

    async def batch_poll(self, base_url: str, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    async def batch_results(self, base_url: str, batch_id: str) -> BatchResult:
        """custom_id -> answer or classified error, for every request the batch reports."""
        raise NotImplementedError

    async def server_tokenizer(self, base_urls: list[str], strip_space: bool = False, timeout: float = 60.0) -> LentTokenizer | None:
        """The model's own tokenizer as its server offers it (a `Tokenizer` with `cut_middle`),
        or None when the server has no tokenize endpoint. `strip_space`: the model's
        decoder drops a span's leading `▁` space (for servers that give offsets only);
        `timeout`: the run's --timeout for each tokenize call."""
        return None

    async def served_models(self, base_urls: list[str]) -> list[str]:
        """The model ids the server says it serves (TGI /info, /v1/models), to find the
        official settings for them (official_models.py); [] where it does not say."""
        return []

    async def takes_min_tokens(self, base_urls: list[str]) -> bool:
        """Whether the server takes vLLM's `min_tokens` and `stop_token_ids` (samsum)."""
        return False

    async def context_limits(self, base_urls: list[str]) -> tuple[int | None, int | None, str]:
        """(max input tokens, max total tokens, where they came from) as the server itself
        reports them; (None, None, "") when it does not say (the model-context table is
        used then)."""
        return None, None, ""


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def is_local(url: str) -> bool:
    """A server on this machine (the simulator, a local vLLM): no real key is needed."""
    host = host_of(url)
    return host in ("localhost", "::1") or host.startswith("127.")


def classify_status(status: int, message: str, *, retry_after: float | None = None,
                    ratelimit: dict[str, float] | None = None, code: str | None = None) -> ProviderError:
    """Map an HTTP error status to the scheduler's three kinds (one place for all providers)."""
    text = f"HTTP {status}: {message}"[:500]
    lowered = (message + " " + (code or "")).lower()
    if status == 429:
        if "insufficient_quota" in lowered or "quota" in (code or ""):
            return ProviderError("fatal", text + " (out of quota: check your plan and billing)", status=status)
        return ProviderError("rate_limited", text, status=status, retry_after=retry_after, ratelimit=ratelimit)
    if status in (408, 409, 425) or status >= 500:
        return ProviderError("transient", text, status=status, retry_after=retry_after, ratelimit=ratelimit)
    if status in (401, 403):
        return ProviderError("fatal", text + " (authentication failed: check the API key)", status=status)
    # OpenAI "maximum context length", Anthropic "prompt is too long", TGI "`inputs` tokens
    # + `max_new_tokens` must be <= N", vLLM "... context length", llama.cpp type
    # "exceed_context_size_error": "request (N tokens) exceeds the available context size"
    # (tools/server/server-context.cpp, the slot's n_ctx check)
    if ("context" in lowered and ("length" in lowered or "window" in lowered or "context size" in lowered)) \
            or "too long" in lowered or ("tokens" in lowered and "must be <=" in lowered):
        return ProviderError("fatal", "context too long: " + text, status=status)
    return ProviderError("fatal", text, status=status)


def error_text(error: object) -> str:
    """The message of an error object a server put in a 200 answer (or the object), short."""
    if isinstance(error, dict) and error.get("message") is not None:
        return str(error["message"])[:300]
    return str(error)[:300]


def redirect_refused(url: str, status: int, location: str | None) -> ProviderError:
    """A 3xx that asyncbench will not follow, as a fatal error naming where it pointed. The
    prompt goes only where the user sent it: a redirect to another origin would hand the
    prompt to a server nobody named, and its answer would be cached as this endpoint's."""
    where = f" to {location[:200]}" if location else ""
    return ProviderError("fatal", f"{url} answered {status}, a redirect{where}; asyncbench does not follow "
                                  "redirects: give the URL that answers as the base URL", status=status)
