"""ModelClient: everything needed to talk to one model — its provider, endpoint pool,
rate limiter, price and token counter — built once per model per run.

Runners send a client's requests; the engine and planning never reach into a provider
themselves: they ask the client (as inspect-ai's `Model` wraps its `ModelAPI`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import anyio

from .errors import UserError
from .limits import RateLimiter, TokenBucket
from .pricing import Price, PriceTable
from .prompt_cache import PrefixPlan, mark_requests, plan_prefixes, prompt_text
from .providers import ModelSpec, ProviderBase, api_key_for, key_variable, make_provider, provider_class
from .providers.bounded import DEFAULT_MAX_RESPONSE_BYTES
from .scheduler import EndpointPool
from .tokenizers import Tokenizer, approx_count, get_tokenizer, tiktoken_encoding_for
from .types import Request


class ModelClient:
    """Everything needed to talk to one model: provider, endpoint pool, limiter, price.
    Made by planning from what it decided for this model (its limits, its requests in
    flight per endpoint, the largest answer it takes), never from the run's whole config."""

    def __init__(self, spec: ModelSpec, provider: ProviderBase, prices: PriceTable, *, concurrency: int,
                 rpm: float | None = None, tpm: float | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, api_key: str | None = None,
                 key_env: str = "ASYNCBENCH_API_KEY") -> None:
        self.spec = spec
        # what an authentication error tells the user to fix
        self.key_hint = f"check {key_env}" if api_key else f"no API key was sent: set {key_env}"
        self.provider = provider
        provider.max_response_bytes = max_response_bytes
        self.api_key = api_key  # handed to Ray workers only; never stored or printed
        self.price: Price = prices.price(spec.model, by_prefix=provider.priced_by_prefix,
                                         billed=provider.bills_per_token, provider=spec.provider)
        # one request alone first (no limit configured): a refused key stops the run after
        # it, and its rate-limit headers set the pace before the others open with a burst
        self.limiter: RateLimiter = AccountLimiter(rpm, tpm)
        self.pool = EndpointPool(spec.base_urls, concurrency)
        # Token counting for TPM: tiktoken for OpenAI models, ceil(chars/4) otherwise.
        enc = tiktoken_encoding_for(spec.model) if provider.tiktoken_counts else None
        self.counter: Tokenizer | None = get_tokenizer(enc) if enc else None
        # Checked before the first request is sent, not before the run: a fully cached
        # re-run needs no server.
        self.reachable = False

    # -- what the engine and planning ask of the provider (they never reach into it) --
    @property
    def batch_limits(self) -> tuple[int, int] | None:
        """(requests, bytes) per batch of the provider's batch API; None: it has none."""
        return self.provider.batch_limits

    @property
    def has_batch_api(self) -> bool:
        return self.provider.batch_limits is not None

    @property
    def serves_open_models(self) -> bool:
        return self.provider.serves_open_models

    @property
    def unreachable(self) -> str | None:
        """One line saying the server is down, once planning found it so (else None)."""
        said: str | None = getattr(self.provider, "unreachable", None)
        return said

    def prompt_cache_min_tokens(self) -> int | None:
        """The shortest prefix the provider's prompt cache takes; None: no prompt cache."""
        return self.provider.prompt_cache_min_tokens()

    def sends_raw(self, chat: bool) -> bool:
        """Whether a plain prompt goes as raw text (completion endpoints, TGI non-chat)."""
        return self.provider.sends_raw(chat)

    async def aclose(self) -> None:
        """Close the provider's connections (its HTTP client or SDK)."""
        await self.provider.aclose()

    def count(self, text: str) -> int:
        return self.counter.count(text) if self.counter else approx_count(text)

    def plan_prefixes(self, requests: list[Request], mark: bool = False) -> PrefixPlan:
        """The requests' shared prefixes for the provider's prompt cache (prompt_cache.py);
        `mark`: set each member's `cache_prefix`. None where the provider has no prompt cache."""
        least = self.prompt_cache_min_tokens()
        if least is None:
            return PrefixPlan()
        if mark:
            return mark_requests(requests, self.count, least)
        return plan_prefixes([prompt_text(r) for r in requests], self.count, least)

    def request(self, *, prompt: str | None = None, messages: list[dict[str, str]] | None = None,
                max_tokens: int, temperature: float = 0.0, repeat: int = 0, chat: bool = True,
                task: str | None = None, stop: list[str] | None = None,
                params: dict[str, object] | None = None) -> Request:
        """A Request in the shape this provider takes: one plain user message for chat APIs,
        raw text for completion endpoints and for TGI's non-chat prompts."""
        if messages is None:
            text = prompt or ""
            if self.sends_raw(chat):
                prompt, messages = text, None
            else:
                prompt, messages = None, [{"role": "user", "content": text}]
        return Request(provider=self.spec.provider, model=self.spec.model, endpoint_id=self.spec.endpoint_id,
                       prompt=prompt, messages=messages, max_tokens=max_tokens, temperature=temperature,
                       repeat=repeat, task=task, params={**(params or {}), **({"stop": list(stop)} if stop else {})})


def make_client(spec: ModelSpec, prices: PriceTable, *, concurrency: int, rpm: float | None = None,
                tpm: float | None = None, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> ModelClient:
    """The client of `spec`, its provider holding the API key its variable gives."""
    cls = provider_class(spec.provider)
    key = api_key_for(cls, spec.base_urls)
    return ModelClient(spec, make_provider(spec, key), prices, concurrency=concurrency, rpm=rpm, tpm=tpm,
                       max_response_bytes=max_response_bytes, api_key=key, key_env=key_variable(cls, spec.base_urls))


async def check_reachable(client: ModelClient) -> None:
    """Fail fast with one line when no endpoint answers at all (wrong URL, server down)."""
    from urllib.parse import urlsplit

    errors = []
    for url in client.spec.base_urls:
        parts = urlsplit(url)
        try:
            with anyio.fail_after(5):
                stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1",
                                                 parts.port or (443 if parts.scheme == "https" else 80))
                await stream.aclose()
            return
        except (OSError, TimeoutError) as exc:
            errors.append(f"{url} ({type(exc).__name__})")
    raise UserError(f"cannot reach {', '.join(errors)}; check --base-url and that the server is running")


def account_key(provider: str, base_urls: list[str], api_key: str | None) -> str:
    """Who a provider counts requests against: its name, the endpoints and the API key,
    hashed (the key itself is never kept or shown)."""
    blob = "\0".join([provider, *sorted(base_urls), api_key or ""])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class AccountLimiter(RateLimiter):
    """An account's limiter: a run's, or shared by a set's runs. Until the first answer (or
    error) has come back, with no limit configured, one request goes alone: its rate-limit
    headers say the account's limits, which every run then keeps to, instead of every
    run's workers opening with a burst the provider answers with 429s; a 401 on it stops
    the run with nothing else sent. The others wait for it at most PROBE_WAIT_S (a probe
    that never answers does not hold the run)."""

    PROBE_WAIT_S = 10.0

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        super().__init__(rpm, tpm)
        self._learned: anyio.Event | None = None if rpm or tpm else anyio.Event()
        self._probing = False

    def free(self) -> bool:
        return (self._learned is None or self._learned.is_set()) and super().free()

    async def acquire(self, tokens: int) -> None:
        if self._learned is not None and not self._learned.is_set():
            if self._probing:
                with anyio.move_on_after(self.PROBE_WAIT_S):
                    await self._learned.wait()
            self._probing = True
        await super().acquire(tokens)

    def observe(self, info: Mapping[str, float]) -> None:
        super().observe(info)
        if self._learned is not None:
            self._learned.set()

    def tighten(self, rpm: float | None, tpm: float | None) -> None:
        """Lower the configured limits to `rpm`/`tpm` where they are tighter (a limit
        known: no probe needed)."""
        if rpm and (self.configured_rpm is None or rpm < self.configured_rpm):
            self.configured_rpm = rpm
            self.requests = TokenBucket(rpm, self.burst_s)
        if tpm and (self.configured_tpm is None or tpm < self.configured_tpm):
            self.configured_tpm = tpm
            self.tokens = TokenBucket(tpm, self.burst_s)
        if (rpm or tpm) and self._learned is not None:
            self._learned.set()


class SharedEndpoints:
    """The limiters and endpoint pools of an eval set, one per provider account
    (`account_key`): providers enforce RPM/TPM per key, so the clients of several models
    on one key must draw from one limiter (and learn its limit once from the headers or a
    429), or each would believe it owns the whole limit. Different accounts stay apart
    and proceed in parallel. The tighter of two configured limits wins."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[AccountLimiter, EndpointPool]] = {}

    def attach(self, client: ModelClient) -> str:
        """Point `client` at its account's limiter and pool (the first client's become the
        account's); returns the account key."""
        key = account_key(client.spec.provider, client.spec.base_urls, client.api_key)
        own = client.limiter
        if key not in self._groups:
            self._groups[key] = (AccountLimiter(own.configured_rpm, own.configured_tpm), client.pool)
        limiter, pool = self._groups[key]
        limiter.tighten(own.configured_rpm, own.configured_tpm)
        client.limiter, client.pool = limiter, pool
        return key

    def accounts(self) -> int:
        return len(self._groups)

