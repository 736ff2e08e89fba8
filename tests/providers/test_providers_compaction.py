"""Compaction through a real provider: the model is asked for the structured summary over the
wire; when it answers junk, invalid JSON, an echo of its input, a 500 or nothing in time, the
keyword summary is used instead and the user's turn still completes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from slotmagic import ContextBudget, Session
from slotmagic.core.compaction import COMPACTION_MARKER
from slotmagic.providers import ProviderSettings

from .wire_server import Pause, WireServer, json_response, oa_text_stream, sse_response

BUDGET = ContextBudget(system=150, history=240, tools=0, tool_results=0, reserve=50)
QUESTION = "Question {i}: what does clause {i} of the lease say about deposits and repairs?"
ANSWER = "Clause {i} says the landlord must return the deposit within thirty days, itemising any repairs."
GOOD = {"topics": ["lease clauses"], "decisions": [], "open_questions": ["clause 3"], "facts": ["30 days"]}


@pytest.fixture
def session(settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("compaction", db_path=":memory:", model="openai:gpt-4o-mini", settings=settings) as s:
        s.configure_slot(budget=BUDGET)
        yield s


def fill(wire: WireServer, session: Session, turns: int = 5) -> None:
    for i in range(turns):
        wire.script(sse_response(oa_text_stream(ANSWER.format(i=i))))
        assert not session.submit_turn(QUESTION.format(i=i)).notes


def compaction_requests(wire: WireServer) -> list[dict[str, Any]]:
    return [r.json() for r in wire.requests if COMPACTION_MARKER in json.dumps(r.json())]


def test_the_model_writes_the_structured_summary(wire: WireServer, session: Session) -> None:
    fill(wire, session)
    summary = f"<card>{json.dumps(GOOD)}</card><summary>Three lease clauses were read.</summary>"
    wire.script(sse_response(oa_text_stream(summary)), sse_response(oa_text_stream("Noted.")))
    reply = session.submit_turn(QUESTION.format(i=5))
    assert reply.text == "Noted." and reply.notes[0].startswith("compacted ")
    [asked] = compaction_requests(wire)
    assert asked["model"] == "gpt-4o-mini" and "Question 0" in asked["messages"][-1]["content"]
    compaction = session.compactions()[-1]
    assert (compaction.method, compaction.text, compaction.card.facts) == (
        "model",
        "Three lease clauses were read.",
        ("30 days",),
    )
    sent = wire.requests[-1].json()["messages"]
    assert sent[0]["role"] == "system" and "Three lease clauses were read." in sent[0]["content"]
    assert sent[-1]["content"] == QUESTION.format(i=5)


TRANSCRIPT = " ".join(QUESTION.format(i=i) + " " + ANSWER.format(i=i) for i in range(5))
ECHOED = f"<card>{json.dumps(GOOD)}</card><summary>{TRANSCRIPT}</summary>"


@pytest.mark.parametrize(
    ("name", "response", "why"),
    [
        ("junk", sse_response(oa_text_stream("I'd be happy to help with that!")), "does not hold a <card>"),
        (
            "invalid JSON",
            sse_response(oa_text_stream("<card>{topics: [}</card><summary>x</summary>")),
            "not valid JSON",
        ),
        ("an echo of its input", sse_response(oa_text_stream(ECHOED)), "not shorter"),
        ("a 500", json_response(500, {"error": {"message": "boom"}}), "the model failed"),
        ("a timeout", [Pause(1.0)], "the model failed"),
    ],
)
def test_a_failed_summary_falls_back_to_keywords_and_the_turn_goes_on(
    wire: WireServer, session: Session, name: str, response: list[Any], why: str
) -> None:
    session.settings = session.settings.replace(read_timeout=0.3, max_retries=0)
    fill(wire, session)
    wire.script(response, sse_response(oa_text_stream("Noted anyway.")))
    reply = session.submit_turn(QUESTION.format(i=5))
    assert reply.text == "Noted anyway.", name
    compaction = session.compactions()[-1]
    assert compaction.method == "keyword" and compaction.note is not None and why in compaction.note
    assert "keyword summary" in reply.notes[0]
    folded = [m.content for m in session.messages()[: compaction.upto] if m.role == "user"]
    assert compaction.card.open_questions == (folded[-1],)  # the last question folded away
    assert len(session.messages()) == 12  # the turn is stored, the originals kept


def test_a_failed_turn_after_a_compaction_stores_neither(wire: WireServer, session: Session) -> None:
    session.settings = session.settings.replace(max_retries=0)
    fill(wire, session)
    before = session.messages()
    summary = f"<card>{json.dumps(GOOD)}</card><summary>Three lease clauses were read.</summary>"
    wire.script(sse_response(oa_text_stream(summary)), json_response(400, {"error": {"message": "bad request"}}))
    with pytest.raises(Exception, match="bad request"):
        session.submit_turn(QUESTION.format(i=5))
    assert session.messages() == before and session.compactions() == []
