"""The pure pieces the wire modules and the engine share: repairing tool pairs, mapping call
ids, and the stored form of thinking and error results."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotmagic import Session, SlotConfig
from slotmagic._core.messages import Message, Thinking, ToolCall, fields_from_extra
from slotmagic._core.repair import NOT_RUN, orphan_as_text, repair_tool_pairs, wire_call_id

A = ToolCall("a", "f", '{"x": 1}')
B = ToolCall("b", "g", "{}")


def test_a_sound_history_comes_back_as_it_is() -> None:
    history = [
        Message.system("s"),
        Message.user("q"),
        Message.assistant("", [A, B]),
        Message.tool("b", "B"),  # results in any order: both APIs accept it
        Message.tool("a", "A"),
        Message.assistant("done"),
    ]
    repaired = repair_tool_pairs(history)
    assert repaired == tuple(history) and all(x is y for x, y in zip(repaired, history, strict=True))


def test_unanswered_calls_are_answered_right_after_them() -> None:
    repaired = repair_tool_pairs([Message.user("q"), Message.assistant("", [A, B]), Message.user("next")])
    assert repaired == (
        Message.user("q"),
        Message.assistant("", [A, B]),
        Message.tool("a", NOT_RUN, "f", is_error=True),
        Message.tool("b", NOT_RUN, "g", is_error=True),
        Message.user("next"),
    )


def test_the_note_says_why() -> None:
    repaired = repair_tool_pairs([Message.assistant("", [A])], note="the call was not run: tools are off")
    assert repaired[-1].content == "the call was not run: tools are off"


def test_results_separated_from_their_call_become_text() -> None:
    """A result after a user message no longer answers the call before it (OpenAI wants the
    tool messages right after the assistant message)."""
    history = [Message.assistant("", [A]), Message.user("wait"), Message.tool("a", "late", "f")]
    repaired = repair_tool_pairs(history)
    assert repaired[1] == Message.tool("a", NOT_RUN, "f", is_error=True)
    assert repaired[2] == Message.user("wait")
    assert repaired[3] == orphan_as_text(Message.tool("a", "late", "f"))
    assert repaired[3].content.endswith("\nlate") and "'f'" in repaired[3].content


def test_repair_is_idempotent() -> None:
    history = [
        Message.tool("z", "orphan"),
        Message.assistant("", [A, A]),
        Message.tool("a", "1"),
        Message.tool("a", "2"),
        Message.tool("a", "3"),
        Message.assistant("", [ToolCall("", "h")]),
    ]
    once = repair_tool_pairs(history)
    assert repair_tool_pairs(once) == once
    assert once[0].role == "user" and once[0].content.endswith("\norphan")
    assert once[1].tool_calls == (A, ToolCall("a_2", "f", '{"x": 1}'))
    assert [(m.tool_call_id, m.content) for m in once[2:4]] == [("a", "1"), ("a_2", "2")]
    assert once[4].role == "user" and once[4].content.endswith("\n3")
    assert once[5].tool_calls == (ToolCall("call_1", "h", "{}"),)
    assert once[6] == Message.tool("call_1", NOT_RUN, "h", is_error=True)


@pytest.mark.parametrize(
    ("call_id", "limit", "expected"),
    [
        ("call_abc", 40, "call_abc"),
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", 40, "toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
        ("", 40, None),
        ("functions.get_weather:0", 64, None),
        ("chatcmpl-tool-4f1e9a2b8c7d6e5f4a3b2c1d0e9f8a7b", 40, None),
    ],
)
def test_wire_call_ids(call_id: str, limit: int, expected: str | None) -> None:
    mapped = wire_call_id(call_id, limit)
    assert mapped == wire_call_id(call_id, limit)
    assert 0 < len(mapped) <= limit and all(c.isalnum() or c in "_-" for c in mapped) and mapped.isascii()
    if expected is not None:
        assert mapped == expected
    else:
        assert mapped != call_id


def test_thinking_and_errors_round_trip_through_to_dict() -> None:
    messages = [
        Message.assistant("text", [A], [Thinking("thinking", "t", "sig"), Thinking("redacted_thinking", data="d")]),
        Message.tool("a", "error: f raised ValueError: no", "f", is_error=True),
        Message.user("plain"),
    ]
    for message in messages:
        assert Message.from_dict(message.to_dict()) == message
    assert Message.user("plain").extra() is None
    assert fields_from_extra({})["thinking"] == () and fields_from_extra({})["is_error"] is False


def test_thinking_and_errors_belong_to_their_roles() -> None:
    with pytest.raises(ValueError, match="only assistant messages carry thinking"):
        Message("user", "q", thinking=(Thinking("thinking", "t"),))
    with pytest.raises(ValueError, match="only tool messages can be errors"):
        Message("assistant", "a", is_error=True)
    with pytest.raises(ValueError, match="unknown thinking kind"):
        Thinking("musing")  # type: ignore[arg-type]


def test_thinking_survives_the_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    reply = Message.assistant("Let me check.", [A], [Thinking("thinking", "hm", "sig")])
    messages = [Message.user("q"), reply, Message.tool("a", "error: boom", "f", is_error=True)]
    with Session.open("s", db_path=path, model="echo") as session:
        session.create_slot("kept", SlotConfig.readonly(), messages=messages)
    with Session.open("s", db_path=path, model="echo") as session:
        assert session.messages("kept") == messages
