"""Summaries that read well: a decision kept with its question, a merge whose summary fell back
to keywords saying so (and why) in its one line, with no JSON in what the parent's model reads,
and recall giving the model the literal text it found, with the message's position."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Session
from slotmagic._core.compaction import COMPACTION_MARKER, Compaction, parse_summary
from slotmagic._engine.run.reading import recall_tool
from slotmagic.providers import _echo as echo


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    with Session.open("read", db_path=tmp_path / "r.db", model="echo") as opened:
        yield opened


def test_a_decision_keeps_its_question() -> None:
    card = {"topics": ["sources"], "decisions": [{"question": "Which source first?", "decision": "the largest",
                                                  "reason": "it holds the most"}]}  # fmt: skip
    reply = f"<card>{json.dumps(card)}</card><summary>The user picked the largest source first.</summary>"
    parsed, text = parse_summary(reply, "[user] which source first? " * 20)
    [decision] = parsed.decisions
    assert (decision.question, decision.decision, decision.reason) == (
        "Which source first?",
        "the largest",
        "it holds the most",
    )
    made = Compaction(4, 4, parsed, text, "m", "model", 100, 40, 4)
    assert "- Decided: Which source first? The largest, because it holds the most." in made.message().content
    assert Compaction.from_dict(made.to_dict()).card == parsed  # stored with its question


def test_a_merge_that_fell_back_to_keywords_says_why_and_sends_no_json(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = echo.EchoProvider.stream

    def junk_summaries(self: echo.EchoProvider, request: Any) -> Any:
        if any(COMPACTION_MARKER in m.content for m in request.messages):
            request = type(request)(request.model, (Message.user("no card here"),))
        return original(self, request)

    monkeypatch.setattr(echo.EchoProvider, "stream", junk_summaries)
    session.submit_turn("Which source first, 'region' or 'revenue'?")
    session.derive_slot("branch")
    session.submit_turn("Draft the 'region' report.", slot="branch")
    merge = session.history.merge("branch")
    line = merge.describe()
    assert "\n" not in line and "(keyword summary: the reply does not hold a <card> and a <summary>)" in line
    merged = session.messages("default")[-1].content
    assert "{" not in merged and "Key points:\n- Topics: Draft the 'region' report." in merged


def test_recall_returns_the_literal_text_with_its_position(session: Session) -> None:
    session.append([Message.user("Note this: the code is PELICAN-42, keep it."), Message.assistant("Noted.")])
    session.append([Message.user(f"filler {i} " + "words " * 30) for i in range(4)])
    session.compactions.compact(keep=2)
    tool = recall_tool(session.store, session.session_id, "default", session.compactions()[-1].upto)
    found = tool(query="pelican")
    assert found.startswith("[message 0, user, turn 1] Note this: the code is PELICAN-42, keep it.")
    assert "[" not in found.split("] ", 1)[1].split("\n")[0]  # no marks around the words found
    long = "x " * 400 + "the vault code is HERON-7 " + "y " * 400
    session.append([Message.user(long)])
    session.append([Message.user("more"), Message.assistant("ok")] * 3)
    session.compactions.compact(keep=2)
    tool = recall_tool(session.store, session.session_id, "default", session.compactions()[-1].upto)
    excerpt = tool(query="heron")
    assert "the vault code is HERON-7" in excerpt and excerpt.split("] ", 1)[1].startswith("…")
