"""Fixtures for provider tests: a scripted HTTP server, settings that point at it, and an
environment without anyone's real keys or URLs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from wire_server import WireServer

from slotmagic.errors import ProviderError
from slotmagic.providers import ChatRequest, Completion, Provider, ProviderSettings, StreamEvent, TextDelta

PLANTED_OPENAI_KEY = "sk-test-PLANTED-openai-4f1c2b9e7d3a6c5b8e0f1a2d"
PLANTED_ANTHROPIC_KEY = "sk-ant-test-PLANTED-anthropic-9a8b7c6d5e4f3a2b1c0d"

_PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                       "OLLAMA_HOST")


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.close()


@pytest.fixture
def settings(wire: WireServer) -> ProviderSettings:
    """Every provider pointed at the scripted server, with fast retries and short timeouts."""
    return ProviderSettings(
        openai_api_key=PLANTED_OPENAI_KEY,
        openai_base_url=wire.url + "/v1",
        anthropic_api_key=PLANTED_ANTHROPIC_KEY,
        anthropic_base_url=wire.url,
        ollama_host=wire.url,
        connect_timeout=2.0,
        read_timeout=2.0,
        backoff_base=0.001,
    )


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


@pytest.fixture(params=["sync", "async"])
def drain(request: pytest.FixtureRequest) -> Drain:
    """Consume a provider's stream through ``stream`` or ``astream`` (each test runs with both)."""

    def sync(provider: Provider, chat: ChatRequest) -> Drained:
        events: list[StreamEvent] = []
        try:
            for event in provider.stream(chat):
                events.append(event)
        except ProviderError as exc:
            return Drained(events, exc)
        return Drained(events, None)

    def async_(provider: Provider, chat: ChatRequest) -> Drained:
        events: list[StreamEvent] = []

        async def consume() -> None:
            async for event in provider.astream(chat):
                events.append(event)

        try:
            asyncio.run(consume())
        except ProviderError as exc:
            return Drained(events, exc)
        return Drained(events, None)

    return sync if request.param == "sync" else async_
