"""What a preview shows is what the wire sends, message for message, and what the budget counts:
what the APIs would refuse (a tool call without its result, a blank message, an image sent to a
model that takes none) is mended by steps of the view pipeline, not after it, so a synthetic
"not run" result is previewed and counted too, and what is left out is neither shown nor counted."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic.core.images import Image
from slotmagic.core.messages import Message, ToolCall
from slotmagic.core.repair import NOT_RUN
from slotmagic.engine.inputs import Counting
from slotmagic.providers import ProviderSettings
from slotmagic.tokens import TokenCounter

from .wire_server import WireServer, oa_text_stream, sse_response

OSLO = ToolCall("call_Oslo1", "get_weather", '{"city": "Oslo"}')


def as_sent(message: Message) -> tuple[str, str | None, str | None]:
    """A message as chat completions carries it: role, text (none beside tool calls), call id."""
    content = None if message.tool_calls and not message.content.strip() else message.content
    return message.role, content, message.tool_call_id


def from_wire(body: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return body["role"], body.get("content"), body.get("tool_call_id")


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "openai:a-model-counted-by-estimate"])
def test_a_dangling_tool_call_is_previewed_counted_and_sent_alike(
    model: str, tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    wire.script(sse_response(oa_text_stream("Sure.")))
    with Session.open("pairs", db_path=tmp_path / "s.db", model=model, settings=settings) as session:
        session.append([Message.user("Weather in Oslo?"), Message.assistant("", [OSLO])])
        preview = session.preview()
        kinds = [e.kind for e in preview.entries]
        assert kinds == ["history", "history", "not_run"]
        not_run = preview.entries[2]
        assert not_run.message == Message.tool(OSLO.id, NOT_RUN, OSLO.name, is_error=True)
        assert not_run.position == 1 and not_run.tokens > 0  # shown beside its call, and counted
        assert preview.report is not None
        assert preview.report.tool_results.used == not_run.tokens
        assert preview.tokens == sum(e.tokens for e in preview.entries)
        assert "added: the call was not run" in preview.to_text()
        assert session.view() == list(preview.messages)

        session.submit_turn("Never mind.", tools=[])
    sent = [from_wire(m) for m in wire.requests[0].json()["messages"]]
    assert sent == [as_sent(m) for m in (*preview.messages, Message.user("Never mind."))]


def test_blank_messages_and_images_a_model_cannot_take_are_left_out_of_the_preview_as_of_the_wire(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    buffer = io.BytesIO()
    PILImage.new("RGB", (64, 64), (10, 120, 200)).save(buffer, format="PNG")
    cat = Message.from_parts("user", ["Look:", Image.from_bytes(buffer.getvalue())])
    wire.script(sse_response(oa_text_stream("Sure.")))
    text_only = "openai:gpt-3.5-turbo"
    with Session.open("plain", db_path=tmp_path / "s.db", model="openai:gpt-4o-mini", settings=settings) as session:
        session.append([cat, Message.assistant("  "), Message.user("hello?"), Message.assistant("A cat.")])
        seeing = session.preview()
        assert seeing.messages[0].images and len(seeing.entries) == 3
        assert [(o.lo, o.reason) for o in seeing.omitted] == [(1, "blank")]
        assert "blank: nothing to send (stored message 2)" in seeing.to_text()
        preview = session.preview(model=text_only)
        assert not any(m.images for m in preview.messages)
        sent_alone = replace(cat, images=(), tokens=0)  # counted as what is sent
        assert preview.entries[0].tokens == Counting(TokenCounter.for_model(text_only)).count(sent_alone)
        session.submit_turn("Thanks", model=text_only)
    sent = [from_wire(m) for m in wire.requests[0].json()["messages"]]
    assert sent == [as_sent(m) for m in (*preview.messages, Message.user("Thanks"))]
