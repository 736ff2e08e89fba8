"""What a preview shows is what the wire sends, message for message, and what the budget counts:
what the APIs would refuse (a tool call without its result, a blank message, an image sent to a
model that takes none) is mended by steps of the view pipeline, not after it, so a synthetic
"not run" result is previewed and counted too, and what is left out is neither shown nor counted.
What one API's format adds (Anthropic's user message before a history that starts with a reply,
the bare tool definitions a request without tools carries beside a history's tool calls) is
previewed and counted for the models that speak it."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic._core.images import Image
from slotmagic._core.messages import Message, Thinking, ToolCall
from slotmagic._core.repair import NOT_RUN
from slotmagic._core.request import ToolSpec
from slotmagic._engine.view.inputs import Counting
from slotmagic.providers import ProviderSettings
from slotmagic.providers._wire import EARLIER
from slotmagic.tokens import TokenCounter

from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

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
        sent_alone = replace(cat, images=())  # counted as what is sent
        assert preview.entries[0].tokens == Counting(TokenCounter.for_model(text_only)).count(sent_alone)
        session.submit_turn("Thanks", model=text_only)
    sent = [from_wire(m) for m in wire.requests[0].json()["messages"]]
    assert sent == [as_sent(m) for m in (*preview.messages, Message.user("Thanks"))]


def test_a_reply_of_thinking_alone_is_left_out_of_the_preview_as_of_the_wire(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    """A reply that spent its tokens thinking: chat completions send no reasoning, so nothing."""
    wire.script(sse_response(oa_text_stream("Sure.")))
    thought = Message.assistant("", thinking=[Thinking("thinking", "Let me think.", "sig")])
    with Session.open("thought", db_path=tmp_path / "s.db", model="openai:gpt-4o-mini", settings=settings) as session:
        session.append([Message.user("Hard question?"), thought, Message.user("Well?"), Message.assistant("42.")])
        preview = session.preview()
        assert [(o.lo, o.reason) for o in preview.omitted] == [(1, "blank")]
        session.submit_turn("Why?", tools=[])
    sent = [from_wire(m) for m in wire.requests[0].json()["messages"]]
    assert sent == [as_sent(m) for m in (*preview.messages, Message.user("Why?"))]


# -- what Anthropic's format adds -----------------------------------------------------------------

Sent = tuple[str, str, tuple[str, ...]]  # role, text, the tool ids it carries


def an_as_sent(message: Message) -> Sent:
    """A message as Anthropic's Messages API carries it: a tool result in a user message."""
    ids = tuple(c.id for c in message.tool_calls) or ((message.tool_call_id,) if message.tool_call_id else ())
    return ("assistant" if message.role == "assistant" else "user"), message.content, ids


def an_from_wire(body: dict[str, Any]) -> Sent:
    blocks = body["content"]
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    ids = tuple(b.get("id") or b["tool_use_id"] for b in blocks if b["type"] in ("tool_use", "tool_result"))
    if any(b["type"] == "tool_result" for b in blocks):
        text = "".join(b.get("content", "") for b in blocks if b["type"] == "tool_result")
    return body["role"], text, ids


def test_a_history_that_starts_with_a_reply_is_previewed_and_counted_with_the_user_message_anthropic_wants(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    wire.script(sse_response(an_text_stream("6.")))
    claude = "anthropic:claude-sonnet-4-5"
    with Session.open("first", db_path=tmp_path / "s.db", model=claude, settings=settings) as session:
        session.append([Message.assistant("Ask me sums."), Message.user("2+2?"), Message.assistant("4.")])
        preview = session.preview()
        assert [e.kind for e in preview.entries] == ["opening", "history", "history", "history"]
        opening = preview.entries[0]
        assert opening.message == Message.user(EARLIER) and opening.position is None
        assert opening.tokens == Counting(TokenCounter.for_model(claude)).count(opening.message) > 0
        assert preview.report is not None  # the opening message counts in the history share
        priming = TokenCounter.for_model(claude).priming
        conversation = sum(e.tokens for e in preview.entries if e.message.role != "system")
        assert preview.report.history.used == conversation + priming
        assert "added: the API wants a user message first" in preview.to_text()
        # chat completions take a reply first: a model that speaks them is sent the history as it is
        assert [e.kind for e in session.preview(model="openai:gpt-4o-mini").entries] == ["history"] * 3
        session.submit_turn("And 3+3?", tools=[])
    sent = [an_from_wire(m) for m in wire.requests[0].json()["messages"]]
    assert sent == [an_as_sent(m) for m in (*preview.messages, Message.user("And 3+3?"))]


@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"])
def test_the_bare_tool_definitions_a_history_of_calls_needs_are_counted_and_sent_alike(
    model: str, tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    anthropic = model.startswith("anthropic:")
    wire.script(sse_response(an_text_stream("Sure.") if anthropic else oa_text_stream("Sure.")))
    history = [Message.user("Weather in Oslo?"), Message.assistant("", [OSLO])]
    history += [Message.tool(OSLO.id, "12 C", OSLO.name), Message.assistant("12 C in Oslo.")]
    with Session.open("bare", db_path=tmp_path / "s.db", model=model, settings=settings) as session:
        session.append(history)
        preview = session.preview()
        assert preview.bare_tools == (ToolSpec("get_weather", "", {"type": "object"}),)
        counting = Counting(TokenCounter.for_model(model))
        system = any(e.message.role == "system" for e in preview.entries)
        tools = counting.scale(counting.counter.count_tools(preview.bare_tools, has_system=system))
        assert preview.report is not None and preview.report.tools.used == tools > 0
        assert "with bare tool definitions (get_weather)" in preview.to_text()
        assert session.preview(model="echo").bare_tools == ()  # echo is sent no definitions
        session.submit_turn("Thanks", tools=[])
    body = wire.requests[0].json()
    if anthropic:
        assert [t["name"] for t in body["tools"]] == ["get_weather"] and body["tool_choice"] == {"type": "none"}
        sent = [an_from_wire(m) for m in body["messages"]]
        assert sent == [an_as_sent(m) for m in (*preview.messages, Message.user("Thanks"))]
    else:
        assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"] and body["tool_choice"] == "none"
        assert [from_wire(m) for m in body["messages"]] == [
            as_sent(m) for m in (*preview.messages, Message.user("Thanks"))
        ]


# -- what a turn's params make Anthropic's API take only as text ------------------------------------

THINKING_ON = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


def test_with_thinking_on_a_last_tool_round_made_without_it_is_previewed_counted_and_sent_as_text(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    """The round another provider made (no thinking before its calls, none can be made up) goes
    to a thinking Claude as text: a preview made with the turn's params shows it so, counted."""
    wire.script(sse_response(an_text_stream("Still cold.")))
    claude = "anthropic:claude-sonnet-4-5"
    history = [Message.user("Weather in Oslo?"), Message.assistant("Checking.", [OSLO])]
    history += [Message.tool(OSLO.id, "-3 C, snow", OSLO.name)]
    with Session.open("round", db_path=tmp_path / "s.db", model=claude, settings=settings) as session:
        session.append(history)
        plain = session.preview()
        assert [e.kind for e in plain.entries] == ["history"] * 3  # thinking off: tool_use as it is
        preview = session.preview(params=THINKING_ON)
        assert [(e.kind, e.position, e.message.role) for e in preview.entries] == [
            ("history", 0, "user"), ("told", 1, "assistant"), ("told", 2, "user"),
        ]  # fmt: skip
        call, result = preview.entries[1].message, preview.entries[2].message
        assert call.content == 'Checking.\n[tool call get_weather({"city": "Oslo"})]' and not call.tool_calls
        assert result.content == "[tool result get_weather: -3 C, snow]"
        counting = Counting(TokenCounter.for_model(claude))
        assert [e.tokens for e in preview.entries[1:]] == [counting.count(call), counting.count(result)]
        assert plain.bare_tools and not preview.bare_tools  # told as text: no definitions needed
        assert "told as text: thinking is on" in preview.to_text()
        assert session.view(params=THINKING_ON) == list(preview.messages)
        session.submit_turn("And now?", tools=[], params=THINKING_ON)
    body = wire.requests[0].json()
    assert "tools" not in body  # the round told as text needs no tool definitions
    sent = [an_from_wire(m) for m in body["messages"]]
    previewed = [an_as_sent(m) for m in preview.messages]
    # the result and the new question go as one user message on the wire: the same text
    assert sent == [*previewed[:2], ("user", previewed[2][1] + "And now?", ())]


def test_a_server_tools_blocks_the_turn_does_not_offer_are_previewed_counted_and_sent_as_text(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    """A web search Claude ran server-side: sent back whole to a turn that offers the search
    tool (not text of the message, not counted), told as text to any other, where it came."""
    wire.script(sse_response(an_text_stream("More.")), sse_response(an_text_stream("More.")))
    claude = "anthropic:claude-sonnet-4-5"
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "oslo"}}
    block = Thinking("block", '[web_search {"query": "oslo"}]', data=json.dumps(search), at=0)
    found = Message.assistant("Oslo is cold today.", thinking=[block])
    web_search = {"type": "web_search_20250305", "name": "web_search"}
    with Session.open("search", db_path=tmp_path / "s.db", model=claude, settings=settings) as session:
        session.append([Message.user("News from Oslo?"), found])
        told = session.preview()
        said = told.entries[1].message
        assert said.content == '[web_search {"query": "oslo"}]\nOslo is cold today.' and not said.thinking
        counting = Counting(TokenCounter.for_model(claude))
        assert told.entries[1].tokens == counting.count(said) > counting.count(found)
        whole = session.preview(params={"tools": [web_search]})
        block_json = counting.scale(counting.counter.count_text(json.dumps(search)))  # the API reads it whole
        assert whole.entries[1].message == found and whole.entries[1].tokens == counting.count(found) + block_json
        session.submit_turn("More?", tools=[])
        session.submit_turn("More?", tools=[], params={"tools": [web_search]}, slot=None)
    first, second = (r.json() for r in wire.requests)
    assert [an_from_wire(m) for m in first["messages"]][:2] == [an_as_sent(m) for m in told.messages]
    assert [b["type"] for b in second["messages"][1]["content"]] == ["server_tool_use", "text"]
