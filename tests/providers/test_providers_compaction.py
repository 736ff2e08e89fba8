"""Compaction through a real provider: the model is asked for the structured summary over the
wire; when it answers junk, invalid JSON, an echo of its input, a 500 or nothing in time, the
keyword summary is used instead and the user's turn still completes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slotmagic import ContextBudget, Message, Session
from slotmagic._core.compaction import COMPACTION_MARKER
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
        ("a timeout", [Pause(5.0)], "the model failed"),
    ],
)
def test_a_failed_summary_falls_back_to_keywords_and_the_turn_goes_on(
    wire: WireServer, session: Session, name: str, response: list[Any], why: str
) -> None:
    # only the timeout's summary waits on the clock; 1 s is far under its 5 s pause
    session.settings = session.settings.replace(read_timeout=1.0 if name == "a timeout" else 30.0, max_retries=0)
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


# -- whatever the summarizer replies ------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
ANY_TEXT = st.lists(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=20) | st.sampled_from(["\ud800", "\udfff"]),
    max_size=4,
).map("".join)  # lone surrogates too
CARD_KEYS = st.sampled_from(["topics", "decisions", "open_questions", "facts", "other"])
SUMMARY_TEXT = st.one_of(
    ANY_TEXT,
    st.builds(
        lambda card, text: f"<card>{card}</card><summary>{text}</summary>",
        st.one_of(
            st.dictionaries(CARD_KEYS, JSON, max_size=5).map(lambda d: json.dumps(d, allow_nan=True)),
            ANY_TEXT,
        ),
        ANY_TEXT,
    ),
)


def event(body: Any) -> str:
    """One SSE event, its JSON escaped to ASCII: a lone surrogate travels as \\ud800."""
    return f"data: {json.dumps(body, allow_nan=True)}\n\n"


def text_events(pieces: list[str]) -> list[str]:
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9}}
    return [*(event(c) for c in chunks), event(done), event(usage), "data: [DONE]\n\n"]


DELTA_KEYS = st.sampled_from(["content", "tool_calls", "role", "refusal", "reasoning_content"])
ODD_EVENTS = st.one_of(
    JSON.map(event),
    st.dictionaries(st.sampled_from(["choices", "usage", "error", "model"]), JSON, max_size=3).map(event),
    st.builds(
        lambda c: event({"choices": [c]}), st.dictionaries(st.sampled_from(["index", "delta", "finish_reason"]), JSON)
    ),
    st.builds(lambda d: event({"choices": [{"index": 0, "delta": d}]}), st.dictionaries(DELTA_KEYS, JSON) | JSON),
    st.builds(
        lambda u: event({"choices": [], "usage": u}),
        st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), JSON) | JSON,
    ),
    ANY_TEXT.map(lambda t: f"data: {t.encode('utf-8', 'replace').decode()}\n\n"),
)
SUMMARIZER_REPLIES = st.one_of(
    st.lists(SUMMARY_TEXT, min_size=1, max_size=3).map(lambda pieces: sse_response(text_events(pieces))),
    st.tuples(st.lists(SUMMARY_TEXT, max_size=2), st.lists(ODD_EVENTS, min_size=1, max_size=3)).map(
        lambda both: sse_response([*text_events(both[0])[:-3], *both[1], "data: [DONE]\n\n"])
    ),
    st.builds(json_response, st.sampled_from([200, 400, 404, 500, 529]), JSON),
    st.builds(lambda m: json_response(500, {"error": {"message": m}}), ANY_TEXT),
)


@pytest.fixture(scope="module")
def shared_wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.close()


def odd(*bodies: Any) -> list[Any]:
    return sse_response([*(event(b) for b in bodies), "data: [DONE]\n\n"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(SUMMARIZER_REPLIES)
# What the issue saw (issue 26): a lone surrogate in the summary, and replies of the wrong shape.
@example(sse_response(text_events(['<card>{"topics": ["\ud800"]}</card><summary>x</summary>'])))
@example(sse_response(text_events(['<card>{"topics": ["a"]}</card><summary>x\udfff</summary>'])))
@example(json_response(500, {"error": {"message": "bad \ud800 thing"}}))
@example(odd({"choices": [{"index": 0, "delta": "str"}]}))
@example(odd({"choices": 5}))
@example(odd({"choices": [{"index": [1], "delta": {"content": "x"}}]}))
@example(odd({"choices": [], "usage": {"prompt_tokens": "abc"}}))
@example(odd({"choices": [], "usage": {"prompt_tokens": float("inf")}}))
@example(odd({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": {}}}]}}]}))
def test_whatever_the_summarizer_replies_the_turn_stands(shared_wire: WireServer, response: list[Any]) -> None:
    """The model asked for the summary answers anything at all (any text, lone surrogates,
    cards of any shape, events of any JSON, an error status): the user's turn is stored,
    with the model's summary or the keyword one, and never fails because of it."""
    wire = shared_wire
    settings_ = ProviderSettings(
        openai_api_key="sk-test", openai_base_url=wire.url + "/v1", read_timeout=2.0, max_retries=0
    )
    with Session.open("fuzz", db_path=":memory:", model="openai:gpt-4o-mini", settings=settings_) as session:
        session.options.compaction_model = "openai:summarizer"
        session.configure_slot(budget=BUDGET)
        for i in range(5):
            session.append([Message.user(QUESTION.format(i=i)), Message.assistant(ANSWER.format(i=i))])
        wire.route('"model":"summarizer"', response)
        wire.script(sse_response(oa_text_stream("Noted anyway.")))
        reply = session.submit_turn(QUESTION.format(i=5))
        assert reply.text == "Noted anyway."
        [compaction] = session.compactions()
        assert compaction.method in ("model", "keyword")
        assert session.messages()[-1].content == "Noted anyway." and reply.notes[0].startswith("compacted ")
    assert wire.pending() == 0
