"""The working context (seed T5): kept per slot as events, seen by derived slots as of their
fork point, injected turn by turn by the rule (the step always, the rest for K turns after a
change, everything once after a compaction), byte-identical requests when nothing is
injected, and the tools that read and change it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from reflect_server import ReflectServer

from conftest import count_rows
from slotmagic import ConfigError, ContextBudget, FocusedConfig, Message, Session, ToolCall
from slotmagic._core.context import (
    ContextEvent,
    WorkingContext,
    add_goal,
    ask_question,
    record_decision,
    set_goal_status,
    set_step,
)
from slotmagic._engine.view.blocks import next_turn
from slotmagic.tools import ToolRegistry


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


SMALL = ContextBudget(system=400, history=600, tools=0, tool_results=0, reserve=200)
QUESTION = "Question {i}: what does the lease say about the deposit, the notice period and repairs? " + "detail " * 15


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("ctx", db_path=db_path) as s:
        yield s


def kinds(session: Session, slot: str | None = None) -> list[str]:
    return [e.kind for e in session.preview(slot).entries if e.kind in ("context", "workflow")]


def block(session: Session, slot: str | None = None) -> str | None:
    return next((e.message.content for e in session.preview(slot).entries if e.kind == "context"), None)


# -- the plain object ---------------------------------------------------------------------------


def stamped(event: ContextEvent | None, turn: int) -> ContextEvent:
    assert event is not None
    return event.stamped(turn, 0, 0.0, (0, 0))


def test_the_injection_rule_by_kind_and_turn() -> None:
    context = WorkingContext()
    context = context.apply(stamped(add_goal(context, "Recover the deposit"), 1))
    context = context.apply(stamped(record_decision(context, "Court or letter?", "Letter", "cheaper"), 2))
    context = context.apply(stamped(ask_question(context, "Is the lease signed?"), 2))
    assert context.changed == {"goals": 1, "decisions": 2, "questions": 2}
    assert context.injection(2, 3) == (
        "Working context (goals, decisions and open questions kept for this conversation):\n"
        "Goals:\n- g1 Recover the deposit\n"
        "Decisions:\n- d1 Court or letter? -> Letter (because cheaper)\n"
        "Questions:\n- q1 Is the lease signed?"
    )
    assert "Goals:" in (context.injection(3, 3) or "") and "Goals:" not in (context.injection(4, 3) or "")
    assert "Decisions:" in (context.injection(4, 3) or "") and context.injection(5, 3) is None
    assert context.injection(5, 0, everything=True) == context.injection(2, 3)  # all of it, once
    assert context.injection(2, 0) is None  # K = 0: nothing but the step
    context = context.apply(stamped(set_step(context, "gather evidence", None, "photos"), 5))
    assert context.injection(99, 3) == (
        "Working context (goals, decisions and open questions kept for this conversation):\n"
        "Current step: gather evidence (in progress); note: photos"
    )


def test_done_and_resolved_items_show_while_fresh_then_only_what_is_open() -> None:
    context = WorkingContext()
    for turn, make in enumerate(
        [
            lambda c: add_goal(c, "A"),
            lambda c: add_goal(c, "B"),
            lambda c: set_goal_status(c, "g1", "completed"),
        ],
        1,
    ):
        context = context.apply(stamped(make(context), turn))
    assert "- g1 A (completed)\n- g2 B" in (context.injection(3, 3) or "")
    assert context.injection(3, 3, everything=True) == context.injection(3, 3)
    context = context.apply(stamped(add_goal(context, "C"), 6))
    assert "g1" not in (context.injection(6, 3) or "")  # completed three turns ago: only open goals now


def test_changes_already_there_are_none_and_mistakes_are_one_line() -> None:
    context = WorkingContext().apply(stamped(add_goal(WorkingContext(), "Recover the deposit"), 1))
    assert add_goal(context, "  recover THE deposit ") is None  # a re-run cell adds nothing
    assert set_goal_status(context, "g1", "active") is None
    for make, message in [
        (lambda: add_goal(context, "   "), "the goal is empty"),
        (lambda: set_goal_status(context, "g7", "completed"), "no goal 'g7' in the working context; the goals are g1"),
        (lambda: set_step(context, None, "done"), "there is no current step yet"),
        (lambda: set_step(context, "x", "finished"), "a step's status is one of pending, in_progress, done, blocked"),
        (lambda: add_goal(context, "x" * 1001), "keep it under 1,000"),
    ]:
        with pytest.raises(ConfigError, match=message) as raised:
            make()
        assert "\n" not in str(raised.value)


# -- stored per slot, seen by derived slots as of their fork point --------------------------------


def test_turn_numbers_count_changes_between_turns_for_the_next_turn(session: Session) -> None:
    session.context.add_goal("Recover the deposit")  # before any turn: counts for turn 1
    session.submit_turn("hello")
    session.context.ask("Is the lease signed?")  # after turn 1: counts for turn 2
    assert [(e.turn, e.at, e.op) for e in session.context.history()] == [(1, 0, "goal"), (2, 2, "question")]
    assert session.context().goal("g1").changed_at == 1 and session.context().changed["questions"] == 2


def test_a_derived_slot_starts_with_its_parents_context_at_the_fork_point(session: Session) -> None:
    session.context.add_goal("Recover the deposit")
    session.submit_turn("one")
    session.context.decide("Court or letter?", "Letter first")
    session.submit_turn("two")
    session.derive_slot("now")  # after everything so far
    session.context.ask("Is the lease signed?")  # a later change of the parent
    session.derive_slot("early", at=2)  # forked after turn one, derived after that change
    session.context.add_goal("Only in now", slot="now")

    assert [g.text for g in session.context("now").goals] == ["Recover the deposit", "Only in now"]
    assert not session.context("now").questions  # the parent's later change is not there
    assert [g.text for g in session.context("default").goals] == ["Recover the deposit"]  # nor the child's
    early = session.context("early")
    assert [d.decision for d in early.decisions] == ["Letter first"]  # made at the fork point, counted
    assert not early.questions  # made at a later point of the parent's history
    session.context.decide("Court or letter?", "Court", slot="early")  # changes independently
    assert session.context("default").decision("d1").decision == "Letter first"


def test_a_slot_derived_before_any_turn_passes_its_context_on(session: Session) -> None:
    session.derive_slot("b")  # nothing stored yet, in either slot
    session.context.add_goal("Set on b", slot="b")
    session.derive_slot("c", parent="b")
    assert [g.text for g in session.context("c").goals] == ["Set on b"]
    assert not session.context("default").goals
    assert kinds(session, "c") == ["context"]


def test_deleting_a_slot_forgets_its_context_even_when_its_row_id_comes_back(session: Session, db_path: str) -> None:
    session.create_slot("x")
    session.context.add_goal("Mine", slot="x")
    session.delete_slot("x", force=True)
    session.create_slot("y")  # SQLite may hand out the same row id again
    assert session.context("y").empty
    assert count_rows(db_path, "context_events") == 0


def test_the_context_survives_a_restart_and_another_kernels_changes_show(db_path: Path) -> None:
    with Session.open("ctx", db_path=db_path) as one, Session.open("ctx", db_path=db_path) as two:
        one.context.add_goal("Recover the deposit")
        assert [g.id for g in two.context().goals] == ["g1"]  # no stale cache in the other one
        two.context.add_goal("Keep it civil")
        assert "g2 Keep it civil" in (block(one) or "")
    with Session.open("ctx", db_path=db_path) as again:
        assert [g.text for g in again.context().goals] == ["Recover the deposit", "Keep it civil"]


# -- the rule, turn by turn, through the real request -------------------------------------------


def test_injection_turn_by_turn_over_the_engine(session: Session) -> None:
    session.context.add_goal("Recover the deposit")
    assert kinds(session) == ["context"]  # changed now: the first request carries it
    for _ in range(2):
        session.submit_turn("next")
        assert kinds(session) == ["context"]  # turns 2 and 3 still do (K = 3)
    session.submit_turn("next")
    assert kinds(session) == []  # turn 4: three turns later, not any more
    session.context.set_step("draft the letter")
    assert block(session) == (
        "Working context (goals, decisions and open questions kept for this conversation):\n"
        "Current step: draft the letter (in progress)"
    )
    session.context.turns = 10
    assert "g1 Recover the deposit" in (block(session) or "")  # K is read at each request


def test_after_a_compaction_everything_is_injected_once(session: Session) -> None:
    session.configure_slot(budget=SMALL)
    session.context.add_goal("Recover the deposit")
    session.context.decide("Court or letter?", "Letter first", "cheaper")
    for i in range(3):
        session.submit_turn(QUESTION.format(i=i))
    assert kinds(session) == []  # the changes are three turns old
    session.compactions.compact(keep=2)
    text = block(session)
    assert text is not None and "g1 Recover the deposit" in text and "d1 Court or letter?" in text
    session.submit_turn("after the compaction")  # the request that carried it all
    assert kinds(session) == []  # once only


def test_a_compaction_made_by_a_turn_sends_everything_in_that_turns_request(db_path: Path) -> None:
    with ReflectServer() as server, Session.open("ctx", db_path=db_path, settings=server.settings()) as session:
        session.model, session.options.compaction_model = "openai:reflect", "echo"
        session.configure_slot(budget=SMALL)
        session.context.add_goal("Recover the deposit")
        notes: list[list[str]] = []
        for i in range(12):
            notes.append([n for n in session.submit_turn(QUESTION.format(i=i)).notes if n.startswith("compacted")])
        compacting = [i for i, n in enumerate(notes) if n]
        assert compacting and compacting[0] >= 3
        carried = [i for i, body in enumerate(server.bodies) if "g1 Recover the deposit" in json.dumps(body)]
        assert carried == [0, 1, 2, *compacting]  # three turns after the change, then each compacting turn


def test_an_edited_cell_counts_the_turns_of_the_branch_it_forks(session: Session) -> None:
    session.context.add_goal("Recover the deposit")
    for i in range(4):
        session.submit_turn(f"turn {i}", cell_id=f"c{i}")
    assert kinds(session) == []
    history = session.store.history(session.session_id, "default").prefix(2)
    assert next_turn(history) == 2 and history.context().goal("g1").changed_at == 1
    reply = session.submit_turn("turn 1, edited", cell_id="c1")  # forks after turn 0: this is turn 2
    assert reply.forked_from is not None and reply.turn == 2
    assert "system prompt: Working context" in reply.text  # its request carried the goal (turn 1 + K)
    assert session.context(reply.slot).goals  # and the fork keeps it


def test_a_focused_slot_keeps_the_blocks(session: Session) -> None:
    session.submit_turn("hello")
    session.derive_slot("short", strategy=FocusedConfig(keep_system=False, recent_messages=1))
    session.context.set_step("draft", slot="short")
    session.workflows.define("claim", "intake -> draft")
    assert kinds(session, "short") == ["workflow", "context"]


def test_the_blocks_count_in_the_system_share_and_lower_the_threshold(session: Session) -> None:
    session.configure_slot(budget=SMALL)
    before = session.budget()
    session.context.set_step("gather evidence", note="photos from the move-out, the lease, the emails " * 3)
    session.workflows.define("claim", "intake -> evidence\nevidence -> letter [if the facts are clear]")
    after = session.budget()
    preview = session.preview()
    injected = sum(e.tokens for e in preview.entries if e.kind in ("context", "workflow"))
    assert injected > 0
    assert after.report.system.used == before.report.system.used + injected
    # the working context's own tool (read_context) is defined in the request now too: it counts
    tools = after.report.tools.used - before.report.tools.used
    assert tools > 0 and after.threshold == before.threshold - injected - tools


def test_preview_marks_the_blocks(session: Session) -> None:
    session.workflows.define("claim", "intake -> evidence")
    session.context.set_step("intake")
    text = session.preview().to_text()
    assert "[1] system (" in text and "tokens · workflow)" in text
    assert "[2] system (" in text and "tokens · working context)" in text


# -- byte for byte, at the provider --------------------------------------------------------------


def test_the_request_carries_the_blocks_exactly_when_the_rule_says(db_path: Path) -> None:
    with ReflectServer() as server, Session.open("with", db_path=db_path, settings=server.settings()) as session:
        session.model = "openai:reflect"
        session.context.add_goal("Recover the deposit")
        for i in range(5):
            if i == 2:
                session.context.ask("Is the lease signed?")
            session.submit_turn(f"turn {i}")
        systems = [[m["content"] for m in body["messages"] if m["role"] == "system"] for body in server.bodies]
        goals = ["g1 Recover the deposit" in "".join(s) for s in systems]
        questions = ["q1 Is the lease signed?" in "".join(s) for s in systems]
        assert goals == [True, True, True, False, False]
        assert questions == [False, False, True, True, True]
        assert systems[3] == [systems[3][0]] and "Goals:" not in systems[3][0]

        # The same history in a session that never used the feature: the next request is the
        # same bytes once nothing is injected any more.
        with Session.open("without", db_path=db_path, settings=server.settings()) as plain:
            plain.model = "openai:reflect"
            plain.append(session.messages())
            session.submit_turn("turn 5")
            plain.submit_turn("turn 5")
        assert server.raw_bodies[-2] == server.raw_bodies[-1]


def test_without_any_block_requests_are_byte_identical(db_path: Path) -> None:
    with ReflectServer() as server:
        for name in ("a", "b"):
            with Session.open(name, db_path=db_path, settings=server.settings()) as session:
                session.model = "openai:reflect"
                session.system = "Be brief."
                if name == "a":
                    session.workflows.define("claim", "intake -> letter")
                    session.workflows.use(None)  # defined but not active: nothing injected
                    session.context.add_goal("Recover the deposit")
                    session.context.clear()  # changed, but empty: nothing to inject
                for i in range(3):
                    session.submit_turn(f"turn {i}")
        assert server.raw_bodies[:3] == server.raw_bodies[3:]


def test_an_active_workflow_rides_along_on_every_slot(db_path: Path) -> None:
    with ReflectServer() as server, Session.open("wf", db_path=db_path, settings=server.settings()) as session:
        session.model = "openai:reflect"
        session.workflows.define("claim", "intake -> evidence\nevidence -> letter [if the facts are clear]")
        session.workflows.set_status("intake", "done")
        session.workflows.set_current("evidence")
        session.submit_turn("one")
        session.derive_slot("other")
        session.submit_turn("two", slot="other")
        session.workflows.use(None)
        session.submit_turn("three")
        texts = [body["messages"][0]["content"] for body in server.bodies]
        assert texts[0] == texts[1] and texts[0].startswith("Workflow claim: 1 of 3 steps done.")
        assert "Next steps:\n- letter [if the facts are clear]" in texts[0]
        assert all(m["role"] != "system" for m in server.bodies[2]["messages"])


# -- the tools -----------------------------------------------------------------------------------


def test_read_context_returns_the_whole_context(session: Session) -> None:
    session.context.add_goal("Recover the deposit")
    session.context.decide("Court or letter?", "Letter first", "cheaper")
    [read] = session.context.tools()
    assert read.name == "read_context" and read.parameters["properties"] == {}
    result = read.run_sync(ToolCall("c1", "read_context", "{}"))
    assert not result.is_error and result.content == session.context().to_text()
    assert "g1  [active] Recover the deposit (turn 1)" in result.content


def test_update_tools_are_off_by_default_and_mark_what_the_model_changed(session: Session) -> None:
    assert [t.name for t in session.context.tools()] == ["read_context"]
    tools = ToolRegistry(session.context.tools("default", updates=True))
    assert tools.names() == (
        "read_context",
        "add_goal",
        "complete_goal",
        "record_decision",
        "ask_question",
        "resolve_question",
        "set_step",
    )
    calls = [
        ("add_goal", {"text": "Recover the deposit"}, "goal g1: Recover the deposit (active)"),
        ("complete_goal", {"goal_id": "g1"}, "goal g1: Recover the deposit (completed)"),
        ("record_decision", {"question": "Court?", "decision": "No", "reason": "slow"}, "decision d1: Court? -> No"),
        ("ask_question", {"question": "Signed?"}, "question q1: Signed? (open)"),
        ("resolve_question", {"question_id": "q1", "answer": "Yes"}, "question q1 resolved: Yes"),
        ("set_step", {"name": "draft", "status": "blocked"}, "current step: draft (blocked)"),
    ]
    for i, (name, arguments, expected) in enumerate(calls):
        result = tools.run_sync(ToolCall(f"c{i}", name, json.dumps(arguments)))
        assert (result.content, result.is_error) == (expected, False)
    assert {e.by for e in session.context.history()} == {"model"}
    assert session.context().goal("g1").by == "model"
    assert "(by the model)" in session.context.history()[0].describe()


def test_a_tool_call_that_cannot_be_made_is_an_error_result(session: Session) -> None:
    tools = ToolRegistry(session.context.tools(updates=True))
    result = tools.run_sync(ToolCall("c1", "complete_goal", '{"goal_id": "g9"}'))
    assert result.is_error and "no goal 'g9' in the working context" in result.content
    result = tools.run_sync(ToolCall("c2", "set_step", '{"name": "x", "status": "finished"}'))
    assert result.is_error and session.context().empty


def test_tools_bound_to_no_slot_follow_the_current_slot(session: Session) -> None:
    [_read, add, *_] = session.context.tools(updates=True)
    session.create_slot("b")
    session.switch_slot("b")
    add.run_sync(ToolCall("c1", "add_goal", '{"text": "On b"}'))
    assert [g.text for g in session.context("b").goals] == ["On b"]
    assert session.context("default").empty


def test_the_tools_are_made_from_the_store_and_the_session_id_alone(db_path: Path) -> None:
    """No way back to a Session: a store and a session id are all the tools need, and what
    they change is what the session reads."""
    from slotmagic._store import open_store
    from slotmagic.tools._context import context_tools

    with open_store(str(db_path)) as store:
        store.ensure_session("bare")
        tools = ToolRegistry(context_tools(store, "bare", "default", updates=True))
        result = tools.run_sync(ToolCall("c1", "add_goal", '{"text": "Recover the deposit"}'))
        assert (result.content, result.is_error) == ("goal g1: Recover the deposit (active)", False)
    with Session.open("bare", db_path=db_path) as session:
        assert session.context().goal("g1").by == "model"
        assert session._engine.slot_tools == session.context.offered  # what the engine asks for a turn's tools


def test_messages_only_sessions_see_no_context() -> None:
    from slotmagic._store.base import History

    history = History.of([Message.user("hi")])
    assert history.context().empty and next_turn(history) == 1


def test_the_tool_loop_offers_read_context_and_on_request_the_update_tools(tmp_path: Path) -> None:
    with Session.open("ctx-tools", db_path=tmp_path / "tools.sqlite3") as session:
        plain = session.submit_turn("call read_context")  # no context yet: nothing offered
        assert plain.steps == ()
        session.context.add_goal("Get the deposit back")
        reply = session.submit_turn("call read_context")
        assert "Get the deposit back" in reply.steps[0].result
        session.submit_turn('call add_goal {"text": "File a claim"}')
        assert [g.text for g in session.context().goals] == ["Get the deposit back"]  # updates are off
        session.context.updates = True
        session.submit_turn('call add_goal {"text": "File a claim"}')
        goals = session.context().goals
        assert [g.text for g in goals] == ["Get the deposit back", "File a claim"]
        assert session.context.history()[-1].by == "model"
