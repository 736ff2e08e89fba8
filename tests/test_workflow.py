"""Workflows (seed T4): the edge-list syntax and what it refuses, the path from the root and
the next steps on a branching graph with labels, the block the model is sent, the graph for a
widget, and the session's workflows kept in the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slotmagic import ConfigError, Session, SlotNotFound
from slotmagic._core.workflow import Workflow, parse_edges


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


CLAIM = """\
# preparing a small-claims claim
intake -> evidence
evidence -> letter [if the facts are clear]
evidence -> gather-more [if something is missing]   # photos, receipts
gather-more -> letter
letter -> file [if no answer in 14 days]
"""


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("wf", db_path=db_path) as s:
        yield s


def claim() -> Workflow:
    return Workflow.define("claim", CLAIM)


def test_parsing_keeps_steps_in_the_order_written_with_labels() -> None:
    steps, edges = parse_edges("claim", CLAIM + "archive\n")
    assert steps == ("intake", "evidence", "letter", "gather-more", "file", "archive")
    assert [(e.source, e.target, e.label) for e in edges] == [
        ("intake", "evidence", None),
        ("evidence", "letter", "if the facts are clear"),
        ("evidence", "gather-more", "if something is missing"),
        ("gather-more", "letter", None),
        ("letter", "file", "if no answer in 14 days"),
    ]
    assert parse_edges("w", "a -> b [issue #4]")[1][0].label == "issue #4"  # '#' in a label is text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("a -> b\nb -> b", "workflow 'w', line 2 \"b -> b\": 'b' leads to itself"),
        ("a -> b\nb -> c\nc -> a", "workflow 'w', line 3 \"c -> a\": closes a cycle c -> a -> b -> c"),
        ("a -> b\na -> b [again]", "workflow 'w', line 2 \"a -> b [again]\": repeats the edge a -> b of line 1"),
        ("draft -> file\nDraft -> review", "line 2 \"Draft -> review\": step 'Draft' is named 'draft' on line 1"),
        ("intake research", "line 1 \"intake research\": step name 'intake research' is not one word"),
        ("a -> b -> c", 'line 1 "a -> b -> c": one edge per line'),
        ("a ->", 'line 1 "a ->": a step\'s name is missing'),
        ("a -> b [", 'line 1 "a -> b [": a label is one [bracketed text] at the end of the line'),
        ("a -> b []", 'line 1 "a -> b []": the label is empty'),
        ("a [label]", 'line 1 "a [label]": a label belongs to an edge'),
        ("# nothing\n\n", "workflow 'w' has no steps"),
        ("a -> b [see [x]]", "a label is one [bracketed text]"),
    ],
)
def test_refusals_quote_the_line(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Workflow.define("w", body)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="invalid workflow name 'my claim'"):
        Workflow.define("my claim", "a -> b")


def test_the_first_root_is_current_and_the_block_looks_two_levels_ahead() -> None:
    w = claim()
    assert w.current == "intake" and (w.completed, w.total) == (0, 5)
    assert w.block() == (
        "Workflow claim: 0 of 5 steps done.\n"
        "Path: intake (pending)\n"
        "Current step: intake (pending)\n"
        "Next steps:\n"
        "- evidence\n"
        "  - letter [if the facts are clear]\n"
        "  - gather-more [if something is missing]"
    )


def test_path_and_next_steps_on_a_branching_graph() -> None:
    w = (
        claim()
        .with_status("intake", "done")
        .with_status("evidence", "done")
        .with_status("gather-more", "blocked")
        .with_current("letter")
        .with_status("letter", "in_progress")
        .with_slot("letter", "draft")
    )
    # Two steps lead to letter: the path goes through the one further along (evidence, done).
    assert [(n.id, label) for n, label in w.path()] == [
        ("intake", None),
        ("evidence", None),
        ("letter", "if the facts are clear"),
    ]
    assert w.block() == (
        "Workflow claim: 2 of 5 steps done.\n"
        "Path: intake (done) -> evidence (done) -> [if the facts are clear] letter (in progress)\n"
        "Current step: letter (in progress; explored in slot draft)\n"
        "Next steps:\n"
        "- file [if no answer in 14 days]\n"
        "Blocked: gather-more"
    )
    w = w.with_status("gather-more", "done").with_status("evidence", "in_progress")
    assert [n.id for n, _ in w.path()] == ["intake", "evidence", "gather-more", "letter"]  # now the one done


def test_next_steps_stop_two_levels_ahead_and_show_statuses() -> None:
    w = Workflow.define("w", "a -> b [x]\nb -> c\nc -> d\na -> e").with_status("e", "done")
    assert [(depth, e.target, e.label) for depth, e in w.next_steps()] == [
        (1, "b", "x"),
        (2, "c", None),
        (1, "e", None),
    ]
    assert "Next steps:\n- b [x]\n  - c\n- e (done)" in w.block()


def test_graph_and_summary_shapes() -> None:
    w = claim().with_status("intake", "done").with_current("evidence").with_slot("evidence", "default")
    graph = w.to_graph()
    assert list(graph) == ["name", "current", "nodes", "edges"]
    assert graph["name"] == "claim" and graph["current"] == "evidence"
    assert graph["nodes"][:2] == [
        {"id": "intake", "status": "done", "slot": None},
        {"id": "evidence", "status": "pending", "slot": "default"},
    ]
    assert graph["edges"][1] == {"from": "evidence", "to": "letter", "label": "if the facts are clear"}
    assert {tuple(n) for n in graph["nodes"]} == {("id", "status", "slot")}
    assert {tuple(e) for e in graph["edges"]} == {("from", "to", "label")}
    assert w.summary() == {
        "name": "claim",
        "current": "evidence",
        "completed": 1,
        "total": 5,
        "next": ["letter", "gather-more"],
    }
    assert str(w).splitlines()[:3] == [
        "workflow claim · 1 of 5 done · current: evidence",
        "  intake       done         -> evidence",
        "* evidence     pending      -> letter [if the facts are clear], gather-more [if something is missing]"
        "  slot: default",
    ]


def test_redefining_keeps_the_status_of_steps_that_remain() -> None:
    w = claim().with_status("intake", "done").with_status("letter", "in_progress").with_current("letter")
    edited = w.redefine("intake -> evidence\nevidence -> letter\nletter -> court")
    assert {n.id: n.status for n in edited.nodes} == {
        "intake": "done",
        "evidence": "pending",
        "letter": "in_progress",
        "court": "pending",
    }
    assert edited.current == "letter"
    assert w.redefine("start -> end").current == "start"  # its current step is gone: the first root


def test_unknown_steps_and_statuses(session: Session) -> None:
    session.workflows.define("claim", CLAIM)
    with pytest.raises(ConfigError, match="workflow 'claim' has no step 'leter'; did you mean 'letter'"):
        session.workflows.set_current("leter")
    with pytest.raises(ConfigError, match="a step's status is one of pending, in_progress, done, blocked"):
        session.workflows.set_status("letter", "finished")
    with pytest.raises(SlotNotFound):
        session.workflows.attach_step("letter", "nowhere")


# -- kept per session ---------------------------------------------------------------------------


def test_defining_makes_it_active_and_running_it_again_changes_nothing(session: Session) -> None:
    assert session.workflows.active() is None and session.workflows() == []
    session.workflows.define("claim", CLAIM)
    session.workflows.set_status("intake", "done")
    session.workflows.define("appeal", "notice -> hearing")
    assert [(w.name, w.active) for w in session.workflows()] == [("claim", False), ("appeal", True)]
    again = session.workflows.define("claim", CLAIM)  # a cell run again: active again, statuses kept
    assert again.active and again.node("intake").status == "done"
    assert session.workflows.get().name == "claim" and session.workflows.get("appeal").name == "appeal"


def test_an_edited_body_updates_the_stored_workflow(session: Session) -> None:
    session.workflows.define("claim", CLAIM)
    session.workflows.set_status("evidence", "done")
    session.workflows.define("claim", CLAIM.replace("letter -> file", "letter -> court"))
    stored = session.workflows.get("claim")
    assert [n.id for n in stored.nodes] == ["intake", "evidence", "letter", "gather-more", "court"]
    assert stored.node("evidence").status == "done"


def test_use_delete_and_errors_name_the_workflows(session: Session) -> None:
    with pytest.raises(ConfigError, match="no workflow is active in this session; define one with %%workflow NAME"):
        session.workflows.set_current("intake")
    session.workflows.define("claim", CLAIM)
    session.workflows.define("appeal", "notice -> hearing")
    with pytest.raises(ConfigError, match="no workflow 'claims' in this session; did you mean 'claim'"):
        session.workflows.use("claims")
    assert session.workflows.use("claim") is not None and session.workflows.get().name == "claim"
    assert session.workflows.use(None) is None and session.workflows.active() is None
    with pytest.raises(ConfigError, match=r"choose one with %workflow use NAME \(claim, appeal\)"):
        session.workflows.delete()
    assert session.workflows.delete("appeal").name == "appeal"
    assert [w.name for w in session.workflows()] == ["claim"]


def test_workflows_survive_a_restart(db_path: Path) -> None:
    with Session.open("wf", db_path=db_path) as session:
        session.workflows.define("claim", CLAIM)
        session.workflows.set_status("intake", "done")
        session.workflows.set_current("evidence")
        session.workflows.attach_step("evidence", "default")
    with Session.open("wf", db_path=db_path) as session:
        w = session.workflows.get()
        assert (w.name, w.current, w.node("intake").status, w.node("evidence").slot) == (
            "claim",
            "evidence",
            "done",
            "default",
        )
    with Session.open("other", db_path=db_path) as other:
        assert other.workflows() == []  # per session


def test_another_kernels_workflow_change_is_seen_and_a_turn_reads_none_again(db_path: Path) -> None:
    """The active workflow is kept between turns (a turn changes none) and read again after a
    workflow write, here or by another kernel to the session, never shown stale."""
    with Session.open("wf", db_path=db_path) as mine, Session.open("wf", db_path=db_path) as theirs:
        assert mine.workflows.active() is None
        theirs.workflows.define("claim", CLAIM)
        found = mine.workflows.active()
        assert found is not None and found.name == "claim"
        theirs.workflows.set_status("intake", "done")
        found = mine.workflows.active()
        assert found is not None and found.node("intake").status == "done"
        mine.submit_turn("a turn")  # changes no workflow: the one read before still stands
        found = mine.workflows.active()
        assert found is not None and found.node("intake").status == "done"
        theirs.workflows.use(None)
        assert mine.workflows.active() is None
        mine.workflows.use("claim")
        found = theirs.workflows.active()
        assert found is not None and found.name == "claim"
