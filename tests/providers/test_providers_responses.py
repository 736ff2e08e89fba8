"""The Responses API as a wire of the openai provider, on the loopback server: chosen for models
only it serves (from the SDK's model list) or by the setting; request bodies checked against the
official SDK's request type; the stream read from documented events (each checked against the
SDK's event types); function tools, reasoning items kept and sent back, images, store: false."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
from collections.abc import Iterator

import pytest

from slotmagic import Session
from slotmagic._errors import ProviderHTTPError
from slotmagic.providers import ProviderSettings

from .responses_wire import call_stream, failed_stream, text_stream
from .sdk_types import check_body
from .wire_server import WireServer, oa_text_stream, sse_response

PRO = "openai:o3-pro"


@pytest.fixture
def session(settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("responses", db_path=":memory:", settings=settings, system="Be brief.") as s:
        yield s


def test_the_models_only_it_serves_come_from_the_sdks_list() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from responses_models import responses_only

    from slotmagic.providers._responses_models import RESPONSES_ONLY

    assert set(responses_only()) == RESPONSES_ONLY, "run python tools/responses_models.py"
    assert {"o3-pro", "gpt-5-pro", "o3-deep-research"} <= RESPONSES_ONLY and "gpt-4o-mini" not in RESPONSES_ONLY


def test_a_responses_only_model_streams_from_responses(session: Session, wire: WireServer) -> None:
    wire.script(text_stream("Hel", "lo", reasoning="The user greets me.", input_tokens=30, output_tokens=9, cached=10))
    reply = session.submit_turn("Hi", model=PRO)
    request = wire.requests[-1]
    assert request.path == "/v1/responses"
    body = request.json()
    check_body("responses", body)
    assert body["store"] is False and body["stream"] is True
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"] == [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert reply.text == "Hello" and reply.finish_reason == "stop"
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (30, 9, 10)
    (kept,) = reply.message.thinking
    assert kept.provider == "openai-responses" and kept.text == "The user greets me."
    assert json.loads(kept.data or "")["encrypted_content"] == "gAAAAABo-encrypted"


def test_tools_and_reasoning_items_go_back_as_the_api_requires(session: Session, wire: WireServer) -> None:
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"{city}: -3 C, snow"

    session.tools.add(weather)
    wire.script(
        call_stream(
            ("call_a", "weather", '{"city": "Oslo"}'),
            ("call_b", "weather", '{"city": "Bergen"}'),
            reasoning="Two cities.",
        ),
        text_stream("Cold in both."),
    )
    reply = session.submit_turn("Weather in Oslo and Bergen?", model=PRO)
    first, second = (r.json() for r in wire.requests)
    check_body("responses", first)
    check_body("responses", second)
    assert first["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Today's weather in a city.",
            "parameters": session.tools.get("weather").parameters,
            "strict": False,
        }
    ]
    items = second["input"][2:]
    assert [i.get("type") for i in items] == [
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Two cities."}],
        "encrypted_content": "gAAAAABo-encrypted",
    }
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_a",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert items[3] == {"type": "function_call_output", "call_id": "call_a", "output": "Oslo: -3 C, snow"}
    assert reply.text == "Cold in both." and [s.name for s in reply.steps] == ["weather", "weather"]
    wire.script(text_stream("Yes."))
    session.submit_turn("Still cold?", model=PRO)  # the stored turn, reasoning and all, is sent back again
    third = wire.requests[-1].json()
    check_body("responses", third)
    assert third["input"][2:7] == items


def test_the_setting_chooses_for_any_model(
    settings: ProviderSettings, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = dataclasses.replace(settings, openai_responses_models="gpt-4o*")
    with Session.open("chosen", db_path=":memory:", settings=chosen) as session:
        wire.script(text_stream("ok"))
        session.submit_turn("Hi", model="openai:gpt-4o-mini")
        assert wire.requests[-1].path == "/v1/responses"
        assert "include" not in wire.requests[-1].json()  # not a reasoning model: nothing encrypted to keep
        wire.script(sse_response(oa_text_stream("ok")))
        session.submit_turn("Hi", model="openai:gpt-4.1")
        assert wire.requests[-1].path == "/v1/chat/completions"
    monkeypatch.setenv("OPENAI_RESPONSES_MODELS", "none")
    with Session.open("none", db_path=":memory:", settings=settings) as session:
        wire.script(sse_response(oa_text_stream("ok")))
        session.submit_turn("Hi", model=PRO)
        assert wire.requests[-1].path == "/v1/chat/completions"


def test_images_and_a_schema(session: Session, wire: WireServer) -> None:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 3), "red").save(buffer, format="PNG")
    wire.script(text_stream('{"color": "red"}'))
    schema = {"title": "color", "type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    reply = session.submit_turn("What color?", model=PRO, attachments={"swatch": buffer.getvalue()}, schema=schema)
    body = wire.requests[-1].json()
    check_body("responses", body)
    parts = body["input"][-1]["content"]
    assert parts[0]["type"] == "input_text" and parts[0]["text"].startswith("What color?\n\nAttached `swatch`")
    image = next(p for p in parts if p["type"] == "input_image")
    assert image["image_url"] == "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "color",
            "schema": {**schema, "additionalProperties": False},
            "strict": True,
        }
    }
    assert reply.parsed == {"color": "red"}


def test_incomplete_and_failed(session: Session, wire: WireServer) -> None:
    wire.script(text_stream("Once upon", end="response.incomplete"))
    reply = session.submit_turn("A long story", model=PRO, max_tokens=5)
    assert reply.finish_reason == "length" and wire.requests[-1].json()["max_output_tokens"] == 5
    before = session.messages()
    wire.script(failed_stream("server_error", "The model failed to generate a response."))
    with pytest.raises(ProviderHTTPError, match="The model failed to generate a response") as caught:
        session.submit_turn("Again", model=PRO)
    assert "\n" not in str(caught.value) and session.messages() == before


def test_a_stream_cut_short_stores_nothing(session: Session, wire: WireServer) -> None:
    from slotmagic._errors import StreamInterrupted

    full = text_stream("never", " finished")
    wire.script([*full[:-2], full[-1]])  # every event but the last, then the body ends cleanly
    with pytest.raises(StreamInterrupted, match=r"without its response\.completed event"):
        session.submit_turn("Hi", model=PRO)
    assert session.messages() == []
