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
    from slotmagic.magics import SlotMagic

    return next(c for c in ip.configurables if isinstance(c, SlotMagic)).session()


@pytest.fixture
def env(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", wire.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("OLLAMA_HOST", wire.url)


@pytest.mark.parametrize(("model", "stream", "auth"), [
    ("openai:gpt-4o-mini", oa_text_stream("Hello", " there"), f"Bearer {PLANTED_OPENAI_KEY}"),
    ("anthropic:claude-haiku-4-5", an_text_stream("Hello", " there"), PLANTED_ANTHROPIC_KEY),
    ("ollama:llama3.2", oa_text_stream("Hello", " there"), None),
])
def test_turn_cells_reach_each_provider(ip: Any, wire: WireServer, env: None, model: str,
                                        stream: list[str], auth: str | None) -> None:
    wire.script(sse_response(stream))
    ip.run_cell(f"%%turn --model {model}\nHi")
    assert session(ip).messages()[-1].content == "Hello there"
    sent = wire.requests[-1].headers
    assert sent.get("authorization", sent.get("x-api-key")) == auth


def test_a_provider_failure_is_one_line_and_stores_nothing(ip: Any, wire: WireServer, env: None) -> None:
    wire.script(json_response(401, {"error": {"message": f"Incorrect API key provided: {PLANTED_OPENAI_KEY}",
                                              "type": "invalid_request_error", "code": "invalid_api_key"}}))
    with pytest.raises(UsageError) as caught:
        ip.run_cell("%%turn --model openai:gpt-4o-mini\nHi")
    message = str(caught.value)
    assert "HTTP 401 invalid_api_key" in message and "\n" not in message
    assert PLANTED_OPENAI_KEY not in message
    assert session(ip).messages() == []
