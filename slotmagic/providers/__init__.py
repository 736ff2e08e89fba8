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

from .._core.messages import Message
from .._core.request import ChatRequest, ToolSpec
from .._core.usage import Usage
from ._base import Completion, Provider, StreamEvent, TextDelta
from ._registry import REGISTRY, KeyedEndpoint, ProviderSpec, Registry, SettingSpec
from ._registry import load_plugins as _load_plugins
from ._window_rules import FixedWindow, Window
from ._windows import DEFAULT_CONTEXT_WINDOW, model_window, window_for

# The providers installed packages add (the ``slotmagic.providers`` entry point group), once the
# names a provider's module imports from here are bound, and before the settings class is made
# from every registered provider's settings.
_load_plugins()

from ._echo import EchoProvider  # noqa: E402
from ._prices import BUILTIN_PRICES, cache_savings_of, cost_of, price_of  # noqa: E402
from ._settings import ProviderSettings  # noqa: E402

__all__ = [
    "BUILTIN_PRICES",
    "DEFAULT_CONTEXT_WINDOW",
    "KNOWN_PROVIDERS",
    "REGISTRY",
    "ChatRequest",
    "Completion",
    "EchoProvider",
    "FixedWindow",
    "KeyedEndpoint",
    "Message",
    "Provider",
    "ProviderSettings",
    "ProviderSpec",
    "Registry",
    "SettingSpec",
    "StreamEvent",
    "TextDelta",
    "ToolSpec",
    "Usage",
    "Window",
    "cache_savings_of",
    "cost_of",
    "model_window",
    "parse_model",
    "price_of",
    "resolve_provider",
    "window_for",
]

# A package's providers (the entry point group), registered once this package's names above
# are bound: its module imports them from here (``from slotmagic.providers import ProviderSpec``).

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
