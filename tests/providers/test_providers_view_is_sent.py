"""What a preview shows is what the wire sends, message for message, and what the budget counts:
a history the APIs would refuse (a tool call without its result) is repaired by a step of the
view pipeline, not after it, so the synthetic "not run" result is previewed and counted too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotmagic import Session
from slotmagic.core.messages import Message, ToolCall
from slotmagic.core.repair import NOT_RUN
from slotmagic.providers import ProviderSettings

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
