"""Images in requests, in each API's documented shape, through a real HTTP server on 127.0.0.1:
OpenAI's ``image_url`` parts with a base64 data URL, Anthropic's ``image`` blocks with a base64
source, Ollama's /v1 (the same parts as OpenAI's, base64 only). Every body also passes the
wire-rule validator (tests/providers/wire_rules.py: ``an_images``, ``oa_content_parts``)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic._errors import ConfigError
from slotmagic.providers import ProviderSettings

from .wire_rules import check
from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response


def png(width: int = 64, height: int = 48) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_openai_gets_image_url_parts(tmp_path: Path, wire: WireServer, settings: ProviderSettings) -> None:
    raw = png()
    wire.script(sse_response(oa_text_stream("A red square.")))
    with Session.open("img", db_path=tmp_path / "s.db", model="openai:gpt-4o-mini", settings=settings) as session:
        session.submit_turn("What is it?", attachments={"pic": raw})
    user = wire.requests[0].json()["messages"][-1]
    assert user["role"] == "user"
    text, image = user["content"]
    assert text["type"] == "text" and text["text"].startswith("What is it?\n\nAttached `pic` (bytes): an image")
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(raw).decode()},
    }


def test_anthropic_gets_base64_image_blocks(tmp_path: Path, wire: WireServer, settings: ProviderSettings) -> None:
    raw = png()
    wire.script(sse_response(an_text_stream("A red square.")))
    model = "anthropic:claude-sonnet-4-5"
    with Session.open("img", db_path=tmp_path / "s.db", model=model, settings=settings) as session:
        session.submit_turn("What is it?", attachments={"pic": raw})
    user = wire.requests[0].json()["messages"][-1]
    assert [b["type"] for b in user["content"]] == ["text", "image"]
    assert user["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(raw).decode(),
    }


def test_ollama_vision_model_gets_base64_parts(tmp_path: Path, wire: WireServer, settings: ProviderSettings) -> None:
    raw = png()
    wire.script(sse_response(oa_text_stream("A red square.")))
    with Session.open("img", db_path=tmp_path / "s.db", model="ollama:llava", settings=settings) as session:
        session.options.context_windows = {"ollama:*": 8192}  # asks the server nothing about its window
        session.submit_turn("What is it?", attachments=[raw])
    request = wire.requests[0]
    assert request.path.endswith("/v1/chat/completions")
    parts = request.json()["messages"][-1]["content"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_model_without_images_is_refused_before_anything_is_sent(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    with Session.open("img", db_path=tmp_path / "s.db", model="ollama:llama3.2", settings=settings) as session:
        session.options.context_windows = {"ollama:*": 8192}
        with pytest.raises(
            ConfigError, match=r"^ollama:llama3.2 is not one of Ollama's vision models.*nothing was sent$"
        ):
            session.submit_turn("What is it?", attachments={"pic": png()})
        assert session.messages() == []
    assert not wire.requests


def test_earlier_images_reach_a_text_model_as_their_labels(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    """A slot whose history holds an image can go on with a model that takes none: the
    history keeps the image, that model's requests carry the text that names it."""
    wire.script(sse_response(oa_text_stream("Red.")), sse_response(oa_text_stream("Still red.")))
    with Session.open("img", db_path=tmp_path / "s.db", model="openai:gpt-4o", settings=settings) as session:
        session.submit_turn("Colour?", attachments={"pic": png()})
        session.submit_turn("And now?", model="openai:gpt-3.5-turbo")
        assert session.messages()[0].images  # still stored
    later = wire.requests[1].json()["messages"]
    assert isinstance(later[0]["content"], str) and "Attached `pic`" in later[0]["content"]


def test_the_validator_catches_a_malformed_image() -> None:
    """The rules fail when the shape is wrong (so the tests above would notice)."""
    bad_openai = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    assert any("oa_content_parts" in p for p in check("/v1/chat/completions", bad_openai))
    bad_anthropic = {
        "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]}]
    }
    assert any("an_images" in p for p in check("/v1/messages", bad_anthropic))
