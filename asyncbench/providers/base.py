"""What every provider is: one Request in, one HTTP call, one Response (or a classified
ProviderError) out. Retries, limits, caching and cost live above, in the scheduler.

Model specs are `provider:model` — `openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`,
`tgi:<name>`, `openai-compat:<model>` — plus `sim` (the built-in simulator's baseline).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import ProviderError, UserError
from ..types import Request, Response

PROVIDERS = ("openai", "anthropic", "tgi", "openai-compat")


@dataclass
class ModelSpec:
    provider: str
    model: str
    base_urls: list[str] = field(default_factory=list)
    endpoint_id: str = ""
    api: str = "chat"  # "chat" or "completion" (base models)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_spec(spec: str, base_urls: list[str] | None = None, *, endpoint_id: str | None = None,
                     api: str = "chat") -> ModelSpec:
    """Parse `provider:model`; raise UserError with the accepted forms otherwise."""
    if ":" not in spec or not spec.split(":", 1)[1]:
        raise UserError(
            f"malformed model spec {spec!r}: use PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(PROVIDERS)} (e.g. openai:gpt-4o-mini), or 'sim'"
        )
    provider, model = spec.split(":", 1)
    if provider not in PROVIDERS:
        raise UserError(f"unknown provider {provider!r} in model spec {spec!r}: use one of {', '.join(PROVIDERS)}")
    urls = [u.rstrip("/") for u in (base_urls or [])]
    if provider in ("tgi", "openai-compat") and not urls:
        raise UserError(f"{provider} needs --base-url URL (the server's address, e.g. http://127.0.0.1:8080)")
    if provider == "openai" and not urls:
        urls = [os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")]
    if provider == "anthropic" and not urls:
        urls = [os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")]
    # The cache identity of the endpoint: a fleet of replicas serving one model is one
    # identity (the sorted URL set) unless the user names it.
    ident = endpoint_id or ",".join(sorted(urls))
    return ModelSpec(provider=provider, model=model, base_urls=urls, endpoint_id=ident, api=api)


def api_key_for(provider: str, base_urls: list[str]) -> str | None:
    """The key from the environment; a clear UserError when a real API needs one."""
    env = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(provider)
    if env is None:  # tgi / openai-compat: optional key
        return os.environ.get("ASYNCBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY")
    key = os.environ.get(env)
    local = all(u.startswith(("http://127.", "http://localhost", "http://[::1]")) for u in base_urls)
    if not key and not local:
        raise UserError(f"{env} is not set: export {env}=... to evaluate {provider} models (or use --model sim)")
    return key or "local-no-key"


class Provider(Protocol):
    name: str

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        """One HTTP call. Raises ProviderError classified as rate_limited/transient/fatal."""
        ...

    async def aclose(self) -> None: ...


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
    # + `max_new_tokens` must be <= N", vLLM "... context length"
    if ("context" in lowered and ("length" in lowered or "window" in lowered)) or "too long" in lowered \
            or ("tokens" in lowered and "must be <=" in lowered):
        return ProviderError("fatal", "context too long: " + text, status=status)
    return ProviderError("fatal", text, status=status)


def make_provider(spec: ModelSpec, api_key: str | None) -> Provider:
    if spec.provider == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(spec.model, api_key, api=spec.api)
    if spec.provider == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(spec.model, api_key)
    if spec.provider == "tgi":
        from .tgi import TGIProvider

        return TGIProvider(spec.model, api_key)
    from .openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(spec.model, api_key, api=spec.api)
