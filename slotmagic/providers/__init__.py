"""Model providers, chosen by a model string ``provider:model`` (or just ``echo``)."""

from __future__ import annotations

from ..errors import UnknownModel
from .base import ChatRequest, Completion, Provider, StreamEvent, TextDelta, ToolSpec, Usage
from .echo import EchoProvider

__all__ = [
    "ChatRequest",
    "Completion",
    "EchoProvider",
    "Provider",
    "StreamEvent",
    "TextDelta",
    "ToolSpec",
    "Usage",
    "parse_model",
    "resolve_provider",
]

KNOWN_PROVIDERS = ("echo",)


def parse_model(model: str) -> tuple[str, str]:
    """Split ``"provider:model"`` into its parts; a bare ``echo`` is ``("echo", "echo")``."""
    provider, sep, name = model.partition(":")
    if not sep:
        if model == "echo":
            return "echo", "echo"
        raise UnknownModel(
            f"model {model!r} names no provider; write provider:model, e.g. "
            f"openai:gpt-4o-mini, anthropic:claude-sonnet-4-5 or echo"
        )
    if not name:
        raise UnknownModel(f"model {model!r} names no model after {provider + ':'!r}")
    return provider, name


def resolve_provider(model: str) -> tuple[Provider, str]:
    """The provider that serves ``model``, and the model name to send it."""
    provider, name = parse_model(model)
    if provider == "echo":
        return EchoProvider(), name
    raise UnknownModel(
        f"unknown provider {provider!r} in model {model!r}; known: {', '.join(KNOWN_PROVIDERS)}"
    )
