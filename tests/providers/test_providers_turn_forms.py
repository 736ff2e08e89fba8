"""The sync and the async form of a turn are one loop: the same scripted model, run through
``stream_turn`` and through ``astream_turn``, gives the same text, tool steps, progress, errors,
requests on the wire and stored rows — a tool round, a replayed cell, a failure after a tool
round, a reply cut short, and a compaction made before the reply (by the model, and by keywords when
the model fails)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from slotmagic import AsyncTurnStream, ContextBudget, Session, TurnStream
from slotmagic._errors import SlotMagicError
from slotmagic.providers import ProviderSettings

from .wire_server import WireServer, json_response, oa_text_stream, oa_tool_stream, sse_response

BUDGET = ContextBudget(system=150, history=240, tools=0, tool_results=0, reserve=50)
QUESTION = "Question {i}: what does clause {i} of the lease say about deposits and repairs?"
ANSWER = "Clause {i} says the landlord must return the deposit within thirty days, itemising any repairs."
CARD = {"topics": ["lease clauses"], "decisions": [], "open_questions": [], "facts": ["30 days"]}


def oa_calls(*wanted: tuple[str, str, str], text: str = "") -> list[Any]:
    return sse_response(oa_tool_stream([(i, name, [args]) for i, name, args in wanted], text=text))


def oa_text(*pieces: str) -> list[Any]:
    return sse_response(oa_text_stream(*pieces))


def script(wire: WireServer) -> None:
    """What the model answers, request after request, for one run of :func:`run`."""
    wire.script(
        # a tool round: text, a call, then the reply
        oa_calls(("c1", "weather", '{"city": "Oslo"}'), text="Let me check."),
        oa_text("It is ", "cold in Oslo."),
        # a failure after a tool round (a tool that raises is only an error result)
        oa_calls(("c2", "weather", '{"city": "Lima"}'), ("c3", "explode", "{}")),
        json_response(400, {"error": {"message": "the request was refused", "type": "invalid_request_error"}}),
        # a reply cut short: no finish, no usage, no [DONE]
        sse_response(oa_text_stream("Half a rep", done=False)[:2]),
        # five turns that fill a tight slot, then a summary and the reply after it
        *(oa_text(ANSWER.format(i=i)) for i in range(5)),
        oa_text(f"<card>{json.dumps(CARD)}</card><summary>Five lease clauses were read.</summary>"),
        oa_text("Noted."),
        # the same on another slot, the summary failing: keywords, thrown back into the summary's steps
        *(oa_text(ANSWER.format(i=i)) for i in range(5)),
        json_response(500, {"error": {"message": "the summarizer is down", "type": "server_error"}}),
        oa_text("Noted anyway."),
    )


def drive(form: str, session: Session, text: str, **options: Any) -> list[Any]:
    """Everything a caller sees of one turn, in order."""
    seen: list[Any] = []

    def watch(stream: TurnStream | AsyncTurnStream) -> None:
        stream.on_step = lambda step: seen.append(("step", step.describe(), step.is_error))
        stream.on_progress = lambda part, parts: seen.append(("progress", part, parts))
        seen.append(("start", stream.slot, stream.model, stream.replayed, stream.compacting))

    async def consume(stream: AsyncTurnStream) -> None:
        async for chunk in stream:
            seen.append(("text", chunk))

    stream: TurnStream | AsyncTurnStream
    try:
        if form == "sync":
            stream = session.stream_turn(text, **options)
            watch(stream)
            seen.extend(("text", chunk) for chunk in stream)
        else:
            stream = session.astream_turn(text, **options)
            watch(stream)
            asyncio.run(consume(stream))
    except SlotMagicError as exc:
        return [*seen, ("failed", type(exc).__name__, str(exc))]
    reply = stream.reply
    assert reply is not None
    steps = [(s.name, s.arguments, s.result, s.is_error) for s in reply.steps]
    seen.append(("reply", reply.text, reply.slot, reply.turn, reply.model, reply.replayed, reply.notes))
    seen.append(("usage", reply.usage, reply.finish_reason, reply.cost, reply.saved, steps))
    return seen


def stored(session: Session) -> dict[str, Any]:
    """Every slot's rows: messages, turns and compactions (without their time)."""
    rows: dict[str, Any] = {}
    for slot in session.list_slots():
        messages = [
            (m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error, m.tokens) for m in session.messages(slot.id)
        ]
        turns = [(t.number, t.start, t.count, t.info) for t in session.history.turns(slot.id)]
        compactions = [c.replace(created_at=0.0) for c in session.compactions(slot.id)]
        rows[slot.id] = (messages, turns, compactions, slot.meta.turns)
    rows["current"] = session.current_slot
    return rows


def run(form: str, wire: WireServer, settings: ProviderSettings) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """The scripted session through one form: what was seen, what was stored, what was sent."""
    sent_before = len(wire.requests)
    script(wire)
    seen: list[Any] = []
    with Session.open(f"forms-{form}", db_path=":memory:", model="openai:gpt-4o-mini", settings=settings) as s:

        def weather(city: str) -> str:
            """Today's weather in a city."""
            return {"Oslo": "-3 C, snow", "Lima": "19 C, clouds"}[city]

        def explode() -> str:
            """Always fails."""
            raise RuntimeError("the sensor is offline")

        s.tools.add(weather)
        s.tools.add(explode)
        seen.append(drive(form, s, "Weather in Oslo?", cell_id="cell-1"))
        seen.append(drive(form, s, "Weather in Oslo?", cell_id="cell-1"))  # unchanged: replayed
        seen.append(drive(form, s, "Lima, and the sensor?"))
        seen.append(drive(form, s, "Say something long."))
        for slot in ("tight", "failing"):
            s.create_slot(slot)
            s.configure_slot(slot, budget=BUDGET, tools=())
            for i in range(6):
                seen.append(drive(form, s, QUESTION.format(i=i), slot=slot))
        rows = stored(s)
    assert wire.pending() == 0, "each form asks the model the same number of times"
    return seen, rows, [r.json() for r in wire.requests[sent_before:]]


@pytest.fixture
def forms(wire: WireServer, settings: ProviderSettings) -> Iterator[dict[str, Any]]:
    settings = settings.replace(max_retries=0)
    yield {form: run(form, wire, settings) for form in ("sync", "async")}


def test_the_sync_and_async_forms_see_store_and_send_the_same(forms: dict[str, Any]) -> None:
    seen, rows, sent = forms["sync"]
    assert forms["async"] == (seen, rows, sent)
    tool_round, replay, failed, cut, *_, compacted = seen[:10]
    fallback = seen[-1]
    # the scenario did what it says, so the comparison covers each path
    assert ("text", "\n\n") in tool_round and tool_round[-2][1] == "It is cold in Oslo."
    assert replay[0][3] is True and replay[-2][5] is True  # replayed, no model call
    assert [e[0] for e in failed].count("step") == 2 and failed[-1][:2] == ("failed", "ProviderHTTPError")
    assert ("text", "Half a rep") in cut and cut[-1][:2] == ("failed", "StreamInterrupted")
    assert compacted[0][4] is not None and compacted[-2][1] == "Noted." and compacted[-2][6][0].startswith("compacted ")
    assert [t[0] for t in rows["default"][1]] == [1] and rows["tight"][2][-1].method == "model"
    assert fallback[-2][1] == "Noted anyway." and rows["failing"][2][-1].method == "keyword"
