"""ModelClient: everything needed to talk to one model — its provider, endpoint pool,
rate limiter, price and token counter — built once per model per run.

Runners send a client's requests; the engine and planning never reach into a provider
themselves: they ask the client (as inspect-ai's `Model` wraps its `ModelAPI`).
"""

from __future__ import annotations

from typing import Any

import anyio

from .config import RunConfig
from .errors import UserError
from .limits import RateLimiter
from .pricing import Price, PriceTable
from .prompt_cache import PrefixPlan, mark_requests, plan_prefixes, prompt_text
from .providers import ModelSpec, ProviderBase, api_key_for, make_provider, provider_class
from .scheduler import EndpointPool
from .tokenizers import Tokenizer, approx_count, get_tokenizer, tiktoken_encoding_for
from .types import Request


class ModelClient:
    """Everything needed to talk to one model: provider, endpoint pool, limiter, price."""

    def __init__(self, spec: ModelSpec, provider: ProviderBase, cfg: RunConfig, prices: PriceTable,
                 rpm: float | None, tpm: float | None, api_key: str | None = None) -> None:
        self.spec = spec
        self.provider = provider
        provider.max_response_bytes = cfg.max_response_bytes
        self.api_key = api_key  # handed to Ray workers only; never stored or printed
        self.price: Price = prices.price(spec.model, by_prefix=provider.priced_by_prefix,
                                         billed=provider.bills_per_token, provider=spec.provider)
        self.limiter = RateLimiter(rpm, tpm)
        self.pool = EndpointPool(spec.base_urls, cfg.concurrency)
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
                params: dict[str, Any] | None = None) -> Request:
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


def make_client(spec: ModelSpec, cfg: RunConfig, prices: PriceTable, rpm: float | None,
                 tpm: float | None) -> ModelClient:
    key = api_key_for(provider_class(spec.provider), spec.base_urls)
    return ModelClient(spec, make_provider(spec, key), cfg, prices, rpm, tpm, key)


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
