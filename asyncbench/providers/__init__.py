"""The provider registry: `provider:model` names to the modules that speak each protocol.

Modules are imported only when their provider is used (the SDKs are heavy). Adding a
provider is one module with a `ProviderBase` subclass (see base.py: its URL, key
variable, prompt kinds, context discovery and pricing are class attributes) plus one line
in `REGISTRY`.
"""

from __future__ import annotations

import importlib
import os
from urllib.parse import urlsplit

from ..errors import UserError
from ..secrets import register, strip_userinfo
from ..types import ApiKind
from ..urls import validate_base_url
from .base import ModelSpec, Provider, ProviderBase, host_of, is_local

# name -> "module:Class", relative to this package
REGISTRY: dict[str, str] = {
    "openai": "openai:OpenAIProvider",
    "anthropic": "anthropic:AnthropicProvider",
    "tgi": "tgi:TGIProvider",
    "openai-compat": "openai_compat:OpenAICompatProvider",
}
NAMES = tuple(REGISTRY)


def provider_class(name: str) -> type[ProviderBase]:
    """The class registered under `name` (imported on first use)."""
    module, _, cls = REGISTRY[name].partition(":")
    found: type[ProviderBase] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return found


def make_provider(spec: ModelSpec, api_key: str | None) -> ProviderBase:
    provider = provider_class(spec.provider)(spec.model, api_key, api=spec.api)
    provider.stream = spec.stream
    return provider


def parse_model_spec(spec: str, base_urls: list[str] | None = None, *, endpoint_id: str | None = None,
                     api: ApiKind = "chat", stream: bool = True) -> ModelSpec:
    """Parse `provider:model`; raise UserError with the accepted forms otherwise."""
    if ":" not in spec or not spec.split(":", 1)[1]:
        raise UserError(
            f"malformed model spec {spec!r}: use PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(NAMES)} (e.g. openai:gpt-4o-mini), or 'sim'"
        )
    provider, model = spec.split(":", 1)
    if provider not in NAMES:
        raise UserError(f"unknown provider {provider!r} in model spec {spec!r}: use one of {', '.join(NAMES)}")
    cls = provider_class(provider)
    urls = [validate_base_url(u) for u in (base_urls or [])]
    if not urls:
        from_env = os.environ.get(cls.base_url_env) if cls.base_url_env else None
        default = from_env or cls.default_base_url
        if default is None:
            raise UserError(f"{provider} needs --base-url URL (the server's address, e.g. http://127.0.0.1:8080)")
        urls = [validate_base_url(default, str(cls.base_url_env) if from_env else "default URL")]
    for url in urls:
        register(urlsplit(url).password)
    # The cache identity of the endpoint: a fleet of replicas serving one model is one
    # identity (the sorted URL set, credentials cut out) unless the user names it.
    ident = endpoint_id or ",".join(sorted(strip_userinfo(u) for u in urls))
    return ModelSpec(provider=provider, model=model, base_urls=urls, endpoint_id=ident, api=api, stream=stream)


def key_variable(cls: type[ProviderBase], base_urls: list[str]) -> str:
    """The environment variable the key for these endpoints is read from (`api_key_for`):
    the provider's own for its own API, ASYNCBENCH_API_KEY for any other endpoint. An
    authentication error names it."""
    own_hosts = set()
    if cls.default_base_url:
        own_hosts.add(host_of(cls.default_base_url))
    if cls.base_url_env and os.environ.get(cls.base_url_env):
        own_hosts.add(host_of(os.environ[cls.base_url_env]))
    if cls.key_env and all(host_of(u) in own_hosts for u in base_urls):
        return cls.key_env
    return "ASYNCBENCH_API_KEY"


def api_key_for(cls: type[ProviderBase], base_urls: list[str]) -> str | None:
    """The key for these endpoints, and only theirs.

    A provider's own key (OPENAI_API_KEY, ANTHROPIC_API_KEY) goes to that provider's own
    API only: its default host, or the URL the user set in its base-URL variable. Every
    other endpoint — self-hosted servers, and an `openai:` or `anthropic:` model pointed
    at another --base-url — gets ASYNCBENCH_API_KEY or no key at all, so a key is never
    handed to a server that is not its owner's."""
    if key_variable(cls, base_urls) == cls.key_env and cls.key_env:
        key = os.environ.get(cls.key_env)
        if not key and not all(is_local(u) for u in base_urls):
            raise UserError(f"{cls.key_env} is not set: export {cls.key_env}=... to evaluate {cls.name} models "
                            "(or use --model sim)")
        return key or None
    return os.environ.get("ASYNCBENCH_API_KEY") or None


__all__ = ["NAMES", "REGISTRY", "ModelSpec", "Provider", "ProviderBase", "api_key_for", "key_variable", "make_provider",
           "parse_model_spec", "provider_class"]
