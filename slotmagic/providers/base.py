"""What a model provider is: a request in, a stream of events out.

A provider's ``stream`` yields any number of ``TextDelta`` events and then exactly one
``Completion`` as its last event. A stream that stops before its ``Completion`` did not
complete, and the session stores nothing from it. Failures are raised as ``ProviderError``s
with one-line messages that never contain an API key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.messages import Message
from ..core.usage import Usage as Usage  # re-exported: providers speak it


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


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Completion:
    """The whole assistant message, assembled from the stream, and what it cost."""

    message: Message
    usage: Usage
    finish_reason: str | None = None
    model: str | None = None  # the model that answered, as the provider reported it


StreamEvent = TextDelta | Completion


class Provider(Protocol):
    name: str

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]: ...

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]: ...

    def close(self) -> None: ...
