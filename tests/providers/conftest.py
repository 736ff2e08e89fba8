"""Fixtures for provider tests: a scripted HTTP server, settings that point at it, and an
environment without anyone's real keys or URLs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotmagic.providers import ProviderSettings

from .support import PLANTED_ANTHROPIC_KEY, PLANTED_OPENAI_KEY, Drain, drain_async, drain_sync
from .wire_server import WireServer

_PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_REASONING_MODELS",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
)


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def wire(request: pytest.FixtureRequest) -> Iterator[WireServer]:
    """The loopback server; every request body it received must keep the documented wire
    rules (tests/providers/wire_rules.py), unless the test is marked ``broken_bodies``."""
    server = WireServer()
    yield server
    server.close()
    if request.node.get_closest_marker("broken_bodies") is None:
        assert not server.violations, f"requests broke the wire rules: {server.violations}"


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


@pytest.fixture(params=["sync", "async"])
def drain(request: pytest.FixtureRequest) -> Drain:
    """Consume a provider's stream through ``stream`` or ``astream`` (each test runs with both)."""
    return drain_sync if request.param == "sync" else drain_async
