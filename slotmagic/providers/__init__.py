"""Model providers, chosen by a model string ``provider:model`` (or just ``echo``).

    openai:gpt-4o-mini            OpenAI, or any OpenAI-compatible server at OPENAI_BASE_URL
    anthropic:claude-sonnet-4-5   Anthropic's Messages API
    ollama:llama3.2               a local Ollama server (OLLAMA_HOST), no key needed
    echo                          offline test model

Each provider is one registration in :mod:`.registry`; the names known, how a model string is
read and which class serves it all come from there. The HTTP providers live in :mod:`.openai`
and :mod:`.anthropic` and are imported when a model needs them, so ``import slotmagic`` does
not load httpx.
"""

from __future__ import annotations

from .base import ChatRequest, Completion, Provider, StreamEvent, TextDelta, ToolSpec, Usage
from .echo import EchoProvider
from .prices import BUILTIN_PRICES, cost_of, price_of
from .registry import REGISTRY, ProviderSpec, Registry, SettingSpec
from .settings import ProviderSettings

__all__ = [
    "BUILTIN_PRICES",
    "KNOWN_PROVIDERS",
    "REGISTRY",
    "ChatRequest",
    "Completion",
    "EchoProvider",
    "Provider",
    "ProviderSettings",
    "ProviderSpec",
    "Registry",
    "SettingSpec",
    "StreamEvent",
    "TextDelta",
    "ToolSpec",
    "Usage",
    "cost_of",
    "parse_model",
    "price_of",
    "resolve_provider",
]

KNOWN_PROVIDERS: tuple[str, ...] = REGISTRY.names()


def parse_model(model: str) -> tuple[str, str]:
    """Split ``"provider:model"`` into its parts; a bare ``echo`` is ``("echo", "echo")``.
    The provider must be registered."""
    return REGISTRY.parse_model(model)


def resolve_provider(model: str, settings: ProviderSettings | None = None) -> tuple[Provider, str]:
    """A new provider that serves ``model``, and the model name to send it.

    Keys and URLs are not checked here but at each request, so a provider made before a key
    was exported still works once it is.
    """
    provider, name = REGISTRY.provider(model, settings if settings is not None else ProviderSettings())
    return provider, name
