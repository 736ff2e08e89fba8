"""Client-side support for provider tests: the planted keys, and draining a stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from slotmagic._errors import ProviderError
from slotmagic.providers import ChatRequest, Completion, Provider, StreamEvent, TextDelta

PLANTED_OPENAI_KEY = "sk-test-PLANTED-openai-4f1c2b9e7d3a6c5b8e0f1a2d"
PLANTED_ANTHROPIC_KEY = "sk-ant-test-PLANTED-anthropic-9a8b7c6d5e4f3a2b1c0d"


@dataclass
class Drained:
    """What a consumer saw: the events before the end, and the error that ended it, if any."""

    events: list[StreamEvent]
    error: BaseException | None

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def completion(self) -> Completion:
        assert self.error is None, f"the stream failed: {self.error!r}"
        last = self.events[-1]
        assert isinstance(last, Completion) and not any(isinstance(e, Completion) for e in self.events[:-1])
        return last


Drain = Callable[[Provider, ChatRequest], Drained]


def drain_sync(provider: Provider, chat: ChatRequest) -> Drained:
    events: list[StreamEvent] = []
    try:
        for event in provider.stream(chat):
            events.append(event)
    except ProviderError as exc:
        return Drained(events, exc)
    return Drained(events, None)


def drain_async(provider: Provider, chat: ChatRequest) -> Drained:
    events: list[StreamEvent] = []

    async def consume() -> None:
        async for event in provider.astream(chat):
            events.append(event)

    try:
        asyncio.run(consume())
    except ProviderError as exc:
        return Drained(events, exc)
    return Drained(events, None)
