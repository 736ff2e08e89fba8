"""Model providers, chosen by a model string ``provider:model`` (or just ``echo``).

    openai:gpt-4o-mini            OpenAI, or any OpenAI-compatible server at OPENAI_BASE_URL
    anthropic:claude-sonnet-4-5   Anthropic's Messages API
    ollama:llama3.2               a local Ollama server (OLLAMA_HOST), no key needed
    echo                          offline test model

The HTTP providers live in :mod:`.openai` and :mod:`.anthropic` and are imported when a model
needs them, so ``import slotmagic`` does not load httpx.
"""

from __future__ import annotations

from ..errors import UnknownModel
from .base import ChatRequest, Completion, Provider, StreamEvent, TextDelta, ToolSpec, Usage
from .echo import EchoProvider
from .prices import BUILTIN_PRICES, cost_of, price_of
from .settings import ProviderSettings

__all__ = [
    "BUILTIN_PRICES",
    "ChatRequest",
    "Completion",
    "EchoProvider",
    "Provider",
    "ProviderSettings",
    "StreamEvent",
    "TextDelta",
    "ToolSpec",
    "Usage",
    "cost_of",
    "parse_model",
    "price_of",
    "resolve_provider",
]

KNOWN_PROVIDERS = ("openai", "anthropic", "ollama", "echo")


def parse_model(model: str) -> tuple[str, str]:
    """Split ``"provider:model"`` into its parts; a bare ``echo`` is ``("echo", "echo")``."""
    provider, sep, name = model.partition(":")
    if not sep:
        if model == "echo":
            return "echo", "echo"
        raise UnknownModel(
            f"model {model!r} names no provider; write provider:model, e.g. "
            f"openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:llama3.2 or echo"
        )
    if not name:
        raise UnknownModel(f"model {model!r} names no model after {provider + ':'!r}")
    return provider, name


def resolve_provider(model: str, settings: ProviderSettings | None = None) -> tuple[Provider, str]:
    """A new provider that serves ``model``, and the model name to send it.

    Keys and URLs are not checked here but at each request, so a provider made before a key
    was exported still works once it is.
    """
    provider, name = parse_model(model)
    if provider == "echo":
        return EchoProvider(), name
    if provider in ("openai", "ollama"):
        from .openai import OpenAIProvider

        return OpenAIProvider(settings, name=provider), name
    if provider == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(settings), name
    raise UnknownModel(f"unknown provider {provider!r} in model {model!r}; known: {', '.join(KNOWN_PROVIDERS)}")
