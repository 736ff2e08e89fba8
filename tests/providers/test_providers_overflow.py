"""A provider's context-overflow reply recovers: OpenAI's ``context_length_exceeded``,
Anthropic's "prompt is too long" and a 413 ``request_too_large``, each answered by a loopback
server. With auto-compaction on the turn learns from the error's numbers, compacts, sends the
request again once and stores the reply, saying so in one line; with it off (or "ask") the
line names the command, running the turn again is refused before anything is sent, and the
slot is as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Reply, Session
from slotmagic._core.compaction import COMPACTION_MARKER
from slotmagic._engine.compaction.overflow import is_overflow, learned_window, overflow_numbers
from slotmagic._errors import CompactionNeeded, OverBudget, ProviderHTTPError
from slotmagic.providers import ProviderSettings

from .wire_server import WireServer, an_text_stream, json_response, oa_text_stream, sse_response

WINDOW = 4_000


def openai_overflow(sent: int) -> list[Any]:
    return json_response(400, {"error": {
        "message": f"This model's maximum context length is {WINDOW} tokens. However, your messages resulted in "
                   f"{sent} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
    }})  # fmt: skip


def anthropic_overflow(sent: int) -> list[Any]:
    return json_response(400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": f"prompt is too long: {sent} tokens > {WINDOW} maximum",
    }})  # fmt: skip


def too_large(sent: int) -> list[Any]:
    return json_response(413, {"type": "error", "error": {
        "type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes.",
    }})  # fmt: skip


SHAPES = {
    "openai": ("openai:gpt-4o-mini", openai_overflow),
    "anthropic": ("anthropic:claude-sonnet-4-5", anthropic_overflow),
    "413": ("anthropic:claude-sonnet-4-5", too_large),
}
SUMMARY = (
    '<card>{"topics": ["the clauses"], "facts": ["clause 3 is the deposit"]}</card>'
    "<summary>The user asked about clauses.</summary>"
)


def text(model: str, *pieces: str) -> list[Any]:
    return sse_response(an_text_stream(*pieces) if model.startswith("anthropic:") else oa_text_stream(*pieces))


def history() -> list[Message]:
    words = " ".join(f"term{j}" for j in range(30))
    return [
        m
        for i in range(22)
        for m in (Message.user(f"question {i}: {words}"), Message.assistant(f"answer {i}: {words}"))
    ]


def open_session(tmp_path: Path, model: str, settings: ProviderSettings) -> Session:
    session = Session.open("overflow", db_path=tmp_path / "o.sqlite3", model=model, settings=settings)
    session.options.context_windows = {model: WINDOW}
    session.append(history())
    return session


Turn = Callable[..., Reply]


@pytest.fixture(params=["sync", "async"])
def turn(request: pytest.FixtureRequest) -> Turn:
    if request.param == "sync":
        return lambda session, text, **options: session.submit_turn(text, **options)
    return lambda session, text, **options: asyncio.run(session.asubmit_turn(text, **options))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_overflow_compacts_and_sends_again_once(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, shape: str, turn: Turn
) -> None:
    model, error = SHAPES[shape]
    with open_session(tmp_path, model, settings) as session:
        before = session.preview()
        assert before.report is not None and not before.report.needs_compaction  # it fits by our count
        sent = max(WINDOW + 300, before.report.request_used * 3 // 2)  # the model counts more than we do
        wire.script(error(sent), text(model, "Here is the answer."))
        wire.route(COMPACTION_MARKER, *[text(model, SUMMARY) for _ in range(40)])
        reply = turn(session, "What does clause 3 say?")
        assert reply.text == "Here is the answer."
        [line] = [n for n in reply.notes if "refused the request as too long" in n]
        assert "compacted the slot and sent the request again" in line and "\n" not in line
        if shape != "413":
            assert f"{sent:,} tokens by its count, over its {WINDOW:,}" in line
        [compaction] = session.compactions()
        assert compaction.replaced > 0 and compaction.method == "model"
        main = [r for r in wire.requests if COMPACTION_MARKER.encode() not in r.body]
        assert len(main) == 2  # the refused request and the one sent again
        assert len(main[1].body) < len(main[0].body)
        assert session.messages()[-2:] == [
            Message.user("What does clause 3 say?"),
            Message.assistant("Here is the answer."),
        ]
        # the window learnt stays: the next turn is budgeted to it
        after = session.preview()
        assert after.report is not None and after.report.limit < before.report.limit


@pytest.mark.parametrize("setting", ["off", "ask"])
def test_with_auto_compaction_off_the_line_names_the_command_and_the_slot_is_unchanged(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, setting: str
) -> None:
    model, error = SHAPES["anthropic"]
    with open_session(tmp_path, model, settings) as session:
        session.options.auto_compact = setting
        stored = session.messages()
        wire.script(error(5_000))
        kind = OverBudget if setting == "off" else CompactionNeeded
        with pytest.raises(kind, match=r"refused the request as too long .*%slot compact") as caught:
            session.submit_turn("What does clause 3 say?")
        assert "\n" not in str(caught.value)
        assert session.messages() == stored and session.compactions() == []
        requests = len(wire.requests)
        with pytest.raises(kind, match="%slot compact"):  # again: refused before anything is sent
            session.submit_turn("What does clause 3 say?")
        assert len(wire.requests) == requests


def test_a_second_overflow_is_not_retried_again(wire: WireServer, settings: ProviderSettings, tmp_path: Path) -> None:
    model, error = SHAPES["openai"]
    with open_session(tmp_path, model, settings) as session:
        stored = session.messages()
        wire.script(error(5_000), error(5_000))
        wire.route(COMPACTION_MARKER, *[text(model, SUMMARY) for _ in range(40)])
        with pytest.raises(ProviderHTTPError, match="context_length_exceeded"):
            session.submit_turn("What does clause 3 say?")
        assert session.messages() == stored and session.compactions() == []
        assert len([r for r in wire.requests if COMPACTION_MARKER.encode() not in r.body]) == 2


def test_other_refusals_are_not_overflows() -> None:
    assert not is_overflow(ProviderHTTPError("x refused the request (HTTP 400): bad temperature", status=400))
    assert not is_overflow(ProviderHTTPError("x failed (HTTP 500): prompt is too long", status=500))
    assert is_overflow(ProviderHTTPError("x (HTTP 400): Input tokens exceed the configured limit", status=400))
    text = "Input tokens exceed the configured limit of 272,000 tokens. Your messages resulted in 288,001 tokens."
    assert overflow_numbers(text) == (288_001, 272_000)
    assert overflow_numbers("prompt is too long: 210345 tokens > 200000 maximum") == (210_345, 200_000)
    assert overflow_numbers("prompt is too long") is None
    assert learned_window(4_000, 3_000, (6_000, 4_000)) < learned_window(4_000, 3_000, (4_400, 4_000)) < 4_000
    assert learned_window(4_000, 3_000, None) < 4_000
