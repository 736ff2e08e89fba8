"""Gemini through its OpenAI-compatible endpoint (``gemini:MODEL``), on the loopback server: the
URL, the bearer key, request bodies checked against the openai SDK's request types, and the
stream as Gemini sends it (tool calls whole in one chunk, without an ``index``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from slotmagic import Session
from slotmagic._errors import MissingAPIKey
from slotmagic.providers import ProviderSettings

from .sdk_types import check_body
from .wire_server import OA_DONE, WireServer, oa_chunk, oa_text_stream, oa_usage, sse_response

KEY = "AIzaSy-planted-gemini-key-0123456789"


@pytest.fixture
def session(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_BASE_URL", wire.url + "/v1beta/openai")
    with Session.open("gemini", db_path=":memory:", settings=ProviderSettings(connect_timeout=2, read_timeout=2)) as s:
        yield s


def gemini_call(name: str, arguments: dict[str, object]) -> list[object]:
    """A tool call as Gemini streams it: whole, in one chunk, with no index."""
    call = {"id": "function-call-1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    events = [
        oa_chunk({"role": "assistant", "tool_calls": [call]}, model="gemini-2.5-flash"),
        oa_chunk({}, "tool_calls", model="gemini-2.5-flash"),
        oa_chunk(choices=False, usage=oa_usage(50, 10)),
        OA_DONE,
    ]
    return sse_response(events)


def test_a_turn_with_a_tool_and_a_schema(session: Session, wire: WireServer) -> None:
    def population(city: str) -> int:
        """How many people live in a city."""
        return 709037

    session.tools.add(population)
    wire.script(
        gemini_call("population", {"city": "Oslo"}), sse_response(oa_text_stream('{"city": "Oslo", "people": 709037}'))
    )
    schema = {
        "title": "answer",
        "type": "object",
        "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
    }
    reply = session.submit_turn("How many live in Oslo?", model="gemini:gemini-2.5-flash", schema=schema)
    first, second = wire.requests
    assert first.path == "/v1beta/openai/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    for request in (first, second):
        check_body("chat", request.json())
    body = first.json()
    assert body["model"] == "gemini-2.5-flash" and body["response_format"]["json_schema"]["strict"] is True
    assert body["tools"][0]["function"]["name"] == "population"
    sent = next(m for m in second.json()["messages"] if m["role"] == "tool")
    assert sent == {"role": "tool", "tool_call_id": "function-call-1", "content": "709037"}
    assert reply.parsed == {"city": "Oslo", "people": 709037}
    assert reply.cost is not None and session._engine.window("gemini:gemini-2.5-flash") == (1_048_576, True)


def test_params_pass_through_and_a_missing_key_is_one_line(
    session: Session, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire.script(sse_response(oa_text_stream("ok")))
    session.submit_turn("Think a little", model="gemini:gemini-2.5-flash", params={"reasoning_effort": "low"})
    body = wire.requests[-1].json()
    check_body("chat", body)
    assert body["reasoning_effort"] == "low"
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GEMINI_BASE_URL")
    with pytest.raises(MissingAPIKey, match="set the GEMINI_API_KEY environment variable"):
        session.submit_turn("Hi", model="gemini:gemini-2.5-flash")
