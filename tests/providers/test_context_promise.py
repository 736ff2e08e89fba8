"""Each part of the context promise on its own, through an agent model over the wire: tool results
count toward the threshold and go first, shelved results are readable in every request that shows
them, pages are cut to fit and never shelved again, folded history is within reach through
``recall``, summaries roll, and a compaction can be reviewed, edited and applied as reviewed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotmagic import ContextBudget, Session
from slotmagic._core.compaction import Compaction, SummaryCard, parse_summary
from slotmagic._errors import CompactionNeeded, ConfigError, OverBudget
from slotmagic.tokens import TokenCounter

from .agent_server import REFERENCE, AgentServer

MODEL = "openai:gpt-4o-mini"
WINDOW = 3_000


def lookup(size: int) -> str:
    """Look up a record of about ``size`` bytes.

    Args:
        size: How many bytes.
    """
    return " ".join(f"field{i}=value{i * 7}" for i in range(size // 18 + 1))[:size]


@pytest.fixture
def server() -> Iterator[AgentServer]:
    with AgentServer() as agent:
        yield agent


@pytest.fixture
def session(server: AgentServer, tmp_path: Path) -> Iterator[Session]:
    with Session.open("promise", db_path=tmp_path / "s.sqlite3", model=MODEL, settings=server.settings()) as s:
        s.options.context_windows = {MODEL: WINDOW}
        s.tools.add(lookup, name="fetch")
        yield s


def limit() -> int:
    return WINDOW - ContextBudget.auto(WINDOW).reserve


def counted(server: AgentServer) -> list[int]:
    counter = TokenCounter.for_model(MODEL)
    return [counter.count_request(r.request) for r in server.requests]


def test_results_under_the_namespace_threshold_count_toward_the_window(server: AgentServer, session: Session) -> None:
    """16 results of ~1,900 bytes (each just under the 2,048-byte threshold) once took a request
    to 10.7k tokens of a 3,000-token window."""
    for _ in range(16):
        session.submit_turn("fetch 1900")
    assert max(counted(server)) <= limit()
    preview = session.preview()
    assert preview.report is not None and not preview.report.needs_compaction
    assert any(e.kind == "elided" for e in preview.entries)  # older results went first...
    budget = session.budget()
    assert budget.report.conversation_used <= budget.threshold


def test_older_results_are_shortened_before_history_is_folded_and_stay_readable(
    server: AgentServer, session: Session
) -> None:
    for _ in range(6):
        session.submit_turn("fetch 1900")
    assert session.compactions() == []  # shortening results was enough: nothing was summarized
    view = session.preview()
    elided = [e for e in view.entries if e.kind == "elided"]
    assert elided and all(e.position is not None for e in elided)
    assert "older tool result, shortened" in view.to_text()
    ref = REFERENCE.match(elided[0].message.content)
    assert ref is not None
    original = session.messages()[elided[0].position or 0].content
    page = session.history.read_namespace(ref[0], 0, 50_000)
    assert page.endswith(original)  # kept aside by the turn that sent the shortened form
    assert "read_namespace" in {t.name for t in server.requests[-1].request.tools}


def test_a_result_shelved_in_this_turn_is_readable_in_this_turn(server: AgentServer, session: Session) -> None:
    session.submit_turn("fetch 60000")  # one turn: the call, the reference, two pages read, a reply
    actions = [r.action for r in server.requests]
    assert actions == ["fetch", "read_namespace", "read_namespace", "reply"]
    assert server.problems == []
    pages = [m for m in session.messages() if m.role == "tool" and m.name == "read_namespace"]
    assert len(pages) == 2
    for page in pages:  # pages are read, not kept aside again: no reference to chase
        assert page.content.startswith("[namespace://fetch/") and " characters " in page.content.split("\n")[0]
        assert not page.content.startswith("namespace://")
    assert "more page" in pages[0].content


def test_a_page_is_cut_to_the_room_left_in_the_request(server: AgentServer, session: Session) -> None:
    session.configure_slot(budget=ContextBudget(system=200, history=400, tools=300, tool_results=300, reserve=200))
    session.submit_turn("fetch 60000")
    page = next(m for m in session.messages() if m.name == "read_namespace")
    header = page.content.split("\n")[0]
    shown = int(header.split(" to ")[1].split(" of ")[0].replace(",", ""))
    assert 0 < shown < 4_000  # less than the default page: what fitted
    assert max(counted(server)) <= 1_400 - 200


def test_recall_finds_what_a_compaction_folded(server: AgentServer, session: Session) -> None:
    session.submit_turn("remember the codeword marrakesh-5512")
    session.append([m for i in range(40) for m in _exchange(i)])
    reply = session.submit_turn("recall marrakesh")  # compacts first, then recalls
    assert session.compactions() and session.compactions()[-1].upto > 2
    assert "marrakesh-5512" in reply.text
    recall = [r for r in server.requests if "recall" in {t.name for t in r.request.tools}]
    assert recall and all(r.request.messages[0].role == "system" for r in recall)


def test_recall_is_offered_only_where_history_was_folded(server: AgentServer, session: Session) -> None:
    session.submit_turn("hello")
    assert "recall" not in {t.name for t in server.requests[-1].request.tools}


def test_a_rolling_summary_that_carries_the_previous_one_forward_is_taken() -> None:
    previous = Compaction(
        upto=10, at=12, card=SummaryCard(facts=("deposit 1,200",)), method="model", model="m",
        text="The tenant paid a deposit of 1,200 and the landlord kept it after the lease ended in March.",
        tokens_before=500, tokens_after=60, replaced=10,
    )  # fmt: skip
    folded = "[user] Should I write a letter first?\n[assistant] Yes, a formal demand letter, then small claims." * 3
    text = previous.text + " The user will send a demand letter, then go to small claims."
    reply = f"<card>{json.dumps({'facts': ['deposit 1,200'], 'decisions': ['demand letter']})}</card>"
    card, taken = parse_summary(reply + f"<summary>{text}</summary>", folded, previous)
    assert taken == text and card.decisions[0].decision == "demand letter"
    echoed = f"<summary>{' '.join(folded.split()[:40])}</summary>"
    with pytest.raises(ValueError, match="near-copy"):
        parse_summary(reply + echoed, folded, previous)


def test_summary_requests_fit_the_summarizing_models_window(server: AgentServer, session: Session) -> None:
    session.append([m for i in range(300) for m in _exchange(i)])  # far over a 3,000-token window
    session.submit_turn("hello again")
    summaries = [r for r in server.requests if r.compaction]
    assert len(summaries) > 1  # in parts, each with the summary so far
    counter = TokenCounter.for_model(MODEL)
    assert all(counter.count_request(r.request) <= limit() for r in summaries)
    assert "[earlier summary]" in summaries[-1].request.messages[-1].content
    [compaction] = session.compactions()
    # Every folded message read: as many as 16 requests can summarize now, the rest at the next turn.
    assert compaction.method == "model" and compaction.upto >= 100 and compaction.parts == len(summaries) <= 16
    assert compaction.upto + compaction.later >= 500
    server.requests.clear()
    session.submit_turn("and again")
    assert session.compactions()[-1].covers == (compaction.upto, session.compactions()[-1].upto)


def _exchange(i: int) -> list:  # type: ignore[type-arg]
    from slotmagic import Message

    detail = " ".join(f"term{i}-{j}" for j in range(20))
    return [
        Message.user(f"question {i} about clause {i}: what do these terms mean? {detail}"),
        Message.assistant(f"clause {i} says {i * 3} days, and the terms are the usual ones: {detail}"),
    ]


# -- reviewed compaction ---------------------------------------------------------------------------


def fill(session: Session, turns: int = 8) -> None:
    session.configure_slot(budget=ContextBudget(system=300, history=700, tools=400, tool_results=300, reserve=300))
    for i in range(turns):
        session.append([*_exchange(i)])


def test_preview_keeps_the_summary_and_apply_applies_exactly_it(server: AgentServer, session: Session) -> None:
    fill(session)
    draft = session.compactions.compact(preview=True)
    assert session.compactions() == [] and session.compactions.draft() == draft
    asked = len(server.requests)
    applied = session.compactions.compact(apply=True)
    assert len(server.requests) == asked  # not asked again
    assert (applied.text, applied.card, applied.upto) == (draft.text, draft.card, draft.upto)
    assert session.compactions()[-1].text == draft.text and session.compactions.draft() is None


def test_an_edited_or_own_summary_is_applied_and_marked(server: AgentServer, session: Session) -> None:
    fill(session)
    session.compactions.compact(preview=True)
    edited = session.compactions.compact(apply=True, summary="Eight clauses were read; clause 3 matters most.")
    assert edited.method == "edited" and edited.text.startswith("Eight clauses")
    assert "written by hand" in edited.describe()
    fill(session, 16)
    asked = len(server.requests)
    own = session.compactions.compact(summary="The user and the model went through sixteen clauses.")
    assert own.method == "edited" and len(server.requests) == asked
    assert "sixteen clauses" in session.view()[0].content


def test_a_draft_for_a_slot_that_moved_on_is_refused(session: Session) -> None:
    fill(session)
    session.compactions.compact(preview=True)
    session.append(_exchange(99))
    with pytest.raises(ConfigError, match="no longer fits it") as caught:
        session.compactions.compact(apply=True)
    assert "%slot compact --preview default" in str(caught.value)
    assert session.compactions() == []


def test_apply_without_a_preview_says_how_to_make_one(session: Session) -> None:
    fill(session)
    with pytest.raises(ConfigError, match=r"--preview default"):
        session.compactions.compact(apply=True)


def test_auto_compact_ask_stops_the_turn_with_the_numbers_and_commands(server: AgentServer, session: Session) -> None:
    fill(session)
    session.options.auto_compact = "ask"
    before = session.messages()
    with pytest.raises(CompactionNeeded, match=r"%slot compact --preview default.*nothing was sent") as caught:
        session.submit_turn("one more question")
    assert "\n" not in str(caught.value) and server.requests == [] and session.messages() == before
    session.compactions.compact(preview=True)
    session.compactions.compact(apply=True)
    session.submit_turn("one more question")  # fits now
    session.options.auto_compact = "off"
    fill(session, 20)
    with pytest.raises(OverBudget, match="auto_compact is off"):
        session.submit_turn("and another")


# -- what never stops a turn ---------------------------------------------------------------------


def test_a_damaged_workflow_is_skipped_with_one_warning_and_can_be_deleted(
    session: Session, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session.workflows.define("plan", "a -> b")
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        db.execute("UPDATE workflows SET record = '{broken' WHERE name = 'plan'")
    with caplog.at_level("WARNING", logger="slotmagic"):
        session.submit_turn("first")
        session.submit_turn("second")
    warnings = [r.getMessage() for r in caplog.records if "plan" in r.getMessage()]
    assert len(warnings) == 1 and "%workflow delete plan" in warnings[0]
    assert session.workflows.delete("plan") is None
    assert session.workflows() == [] and session.store.damaged_workflows(session.session_id) == []


def test_working_context_off_for_a_slot_and_for_the_session(server: AgentServer, session: Session) -> None:
    session.context.set_step("collect the facts")
    session.context.add_goal("get the deposit back")
    session.submit_turn("hello")
    assert "collect the facts" in server.requests[-1].request.messages[0].content
    session.configure_slot(working_context=False)
    session.submit_turn("hello again")
    sent = server.requests[-1].request
    assert all("collect the facts" not in m.content for m in sent.messages)
    assert "read_context" not in {t.name for t in sent.tools}
    assert session.context().step is not None  # kept, only not sent
    session.configure_slot(working_context=True)
    session.context.turns = None
    session.submit_turn("and again")
    assert all("collect the facts" not in m.content for m in server.requests[-1].request.messages)
