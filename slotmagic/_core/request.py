"""What is sent to a model: the request and the tools it may call, as plain values.

They live below every layer that reads them: providers send them, token counting counts them,
tools describe themselves with :class:`ToolSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .messages import Message
from .schema import ResponseSchema

__all__ = ["ChatRequest", "ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: its name, what it does, and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str  # the provider's own model name, without the "provider:" prefix
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # provider-specific, passed through
    prompt_cache: bool = False  # mark the request's stable prefix for the provider's prompt cache
    schema: ResponseSchema | None = None  # the reply must match it (structured output, _core/schema.py)
