"""What a model provider is: a request in, a stream of events out.

A provider's ``stream`` yields any number of ``TextDelta`` events and then exactly one
``Completion`` as its last event. A stream that stops before its ``Completion`` did not
complete, and the session stores nothing from it. Failures are raised as ``ProviderError``s
with one-line messages that never contain an API key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Protocol

from .._core.messages import Message
from .._core.request import ChatRequest
from .._core.usage import Usage


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
