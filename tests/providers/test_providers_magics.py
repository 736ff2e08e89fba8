"""``%%turn`` on real providers: keys and URLs from the environment reach the scripted server,
and a provider failure stops the cell with one line, stores nothing and shows no key."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from slotmagic import Session

from .support import PLANTED_ANTHROPIC_KEY, PLANTED_OPENAI_KEY
from .wire_server import WireServer, an_text_stream, json_response, oa_text_stream, sse_response


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    return next(c for c in ip.configurables if isinstance(c, SlotMagic)).session()


@pytest.fixture
def env(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", wire.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("OLLAMA_HOST", wire.url)


@pytest.mark.parametrize(
    ("model", "stream", "auth"),
    [
        ("openai:gpt-4o-mini", oa_text_stream("Hello", " there"), f"Bearer {PLANTED_OPENAI_KEY}"),
        ("anthropic:claude-haiku-4-5", an_text_stream("Hello", " there"), PLANTED_ANTHROPIC_KEY),
        ("ollama:llama3.2", oa_text_stream("Hello", " there"), None),
    ],
)
def test_turn_cells_reach_each_provider(
    ip: Any, wire: WireServer, env: None, model: str, stream: list[str], auth: str | None
) -> None:
    wire.script(sse_response(stream))
    ip.run_cell(f"%%turn --model {model}\nHi")
    assert session(ip).messages()[-1].content == "Hello there"
    sent = wire.requests[-1].headers
    assert sent.get("authorization", sent.get("x-api-key")) == auth


def test_a_provider_failure_is_one_line_and_stores_nothing(ip: Any, wire: WireServer, env: None) -> None:
    wire.script(
        json_response(
            401,
            {
                "error": {
                    "message": f"Incorrect API key provided: {PLANTED_OPENAI_KEY}",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )
    )
    with pytest.raises(UsageError) as caught:
        ip.run_cell("%%turn --model openai:gpt-4o-mini\nHi")
    message = str(caught.value)
    assert "HTTP 401 invalid_api_key" in message and "\n" not in message
    assert PLANTED_OPENAI_KEY not in message
    assert session(ip).messages() == []


def test_config_points_turns_at_a_server_and_sets_timeouts(
    ip: Any, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)  # keys only ever from the environment
    ip.run_cell(f'%config SlotMagic.openai_base_url = "{wire.url}/v1"')
    ip.run_cell("%config SlotMagic.read_timeout = 7.5")
    ip.run_cell("%config SlotMagic.max_retries = 0")
    ip.run_cell('%config SlotMagic.prices = {"openai:house-model": (1.0, 2.0)}')
    wire.script(sse_response(oa_text_stream("From the local server", usage=(1_000_000, 500_000, 0))))
    ip.run_cell("%%turn --model openai:house-model\nHi")
    reply = ip.user_ns["_"]
    assert reply.text == "From the local server"
    assert reply.cost == pytest.approx(1.0 + 1.0)  # 1M in at $1, 0.5M out at $2
    settings = session(ip).settings
    assert (settings.read_timeout, settings.max_retries, settings.openai_api_key) == (7.5, 0, None)


def test_a_bad_provider_setting_is_refused_when_set(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    # %config reports a refused value as one logged line and keeps the old value.
    ip.run_cell("%config SlotMagic.read_timeout = -1")
    ip.run_cell("%config SlotMagic.max_retries = -2")
    assert (
        "SlotMagic.read_timeout = -1 refused: read_timeout must be a positive number of seconds, at most 86400"
        in caplog.text
    )
    assert "SlotMagic.max_retries = -2 refused: max_retries must be a whole number from 0 to 100, e.g. 5" in caplog.text
    assert (session(ip).settings.read_timeout, session(ip).settings.max_retries) == (120.0, 3)


def test_provider_settings_from_the_environment(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic._magics.options import SlotMagicOptions

    monkeypatch.setenv("SLOTMAGIC_READ_TIMEOUT", "33")
    monkeypatch.setenv("SLOTMAGIC_MAX_RETRIES", "1")
    settings = SlotMagicOptions().provider_settings()
    assert (settings.read_timeout, settings.max_retries, settings.connect_timeout) == (33.0, 1, 10.0)
