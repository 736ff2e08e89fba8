"""Turns from notebook cells: replay unchanged cells, fork edited ones (plain Python API)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotmagic import FocusedConfig, ForkRef, Session, SlotReadonly
from slotmagic._engine.plan.cell_turn import fork_name


@pytest.fixture
def session() -> Iterator[Session]:
    with Session.open("cells", db_path=":memory:") as s:
        yield s


def contents(session: Session, slot: str) -> list[str]:
    return [m.content for m in session.messages(slot) if m.role == "user"]


def test_turns_without_cell_id_append(session: Session) -> None:
    session.submit_turn("hello")
    session.submit_turn("hello")
    assert contents(session, "default") == ["hello", "hello"]


def test_unchanged_cell_replays_without_calling_the_model(session: Session) -> None:
    first = session.submit_turn("hello", cell_id="c1")
    session.submit_turn("next", cell_id="c2")
    session._engine.pool.close()  # a model call now would need a new provider object
    again = session.submit_turn("hello", cell_id="c1")
    assert again.replayed and not first.replayed
    assert (again.text, again.turn, again.slot) == (first.text, first.turn, "default")
    assert again.usage == first.usage
    assert session._engine.pool.kept() == {}  # no provider was asked
    assert contents(session, "default") == ["hello", "next"]


def test_edited_cell_forks_a_sibling_before_its_earlier_turn(session: Session) -> None:
    session.submit_turn("intro", cell_id="c0")
    session.submit_turn("question", cell_id="c1")
    session.submit_turn("follow-up", cell_id="c2")
    reply = session.submit_turn("better question", cell_id="c1")
    assert reply.slot == "default.2" and session.current_slot == "default.2"
    assert reply.forked_from == ForkRef("default", 2, "edit")
    assert contents(session, "default") == ["intro", "question", "follow-up"]  # whole
    assert contents(session, "default.2") == ["intro", "better question"]
    assert session.slot("default.2").meta.parent_id == "default"
    # The next cell of the notebook now appends on the new branch.
    session.submit_turn("follow-up", cell_id="c2")
    assert contents(session, "default.2") == ["intro", "better question", "follow-up"]


def test_edited_cell_run_again_replays_its_fork(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    session.submit_turn("edited", cell_id="c1")
    assert session.submit_turn("edited", cell_id="c1").replayed
    session.switch_slot("default")  # back on the original branch, the edit is found again
    again = session.submit_turn("edited", cell_id="c1")
    assert again.replayed and again.slot == "default.2" and session.current_slot == "default.2"
    assert [s.id for s in session.list_slots()] == ["default", "default.2"]


def test_rerun_forks_even_when_unchanged(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    reply = session.submit_turn("question", cell_id="c1", rerun=True)
    assert not reply.replayed and reply.slot == "default.2"
    assert contents(session, "default.2") == ["question"]


def test_changed_options_count_as_an_edit(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    assert session.submit_turn("question", cell_id="c1", system="Be brief.").slot == "default.2"


def test_explicit_slot_forks_without_moving_the_current_slot(session: Session) -> None:
    session.create_slot("side")
    session.submit_turn("q", cell_id="c1", slot="side")
    reply = session.submit_turn("q2", cell_id="c1", slot="side")
    assert reply.slot == "side.2" and session.current_slot == "default"
    replay = session.submit_turn("q2", cell_id="c1", slot="side")
    assert replay.replayed and replay.slot == "side.2" and session.current_slot == "default"


def test_fork_keeps_the_focused_filter(session: Session) -> None:
    session.derive_slot("f", strategy=FocusedConfig(recent_messages=2))
    session.submit_turn("a", cell_id="c1", slot="f")
    session.submit_turn("b", cell_id="c1", slot="f")
    assert session.slot("f.2").config.focused.recent_messages == 2


def test_interrupted_fork_leaves_no_branch(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    stream = session.stream_turn("edited", cell_id="c1")
    for _ in stream:
        break  # the user stopped it: nothing stored, nothing forked
    assert [s.id for s in session.list_slots()] == ["default"]
    assert session.current_slot == "default"


def test_replay_works_on_a_readonly_slot_but_a_fork_does_not(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    session.configure_slot("default", mode="readonly")
    assert session.submit_turn("question", cell_id="c1").replayed
    with pytest.raises(SlotReadonly):
        session.submit_turn("edited", cell_id="c1")


def test_empty_text_is_refused_before_any_lookup(session: Session) -> None:
    from slotmagic import ConfigError

    with pytest.raises(ConfigError, match="empty"):
        session.submit_turn("  \n", cell_id="c1")


@pytest.mark.parametrize(
    ("slot", "taken", "expected"),
    [
        ("default", set(), "default.2"),
        ("default", {"default.2"}, "default.3"),
        ("draft.2", {"draft", "draft.2"}, "draft.3"),
        ("v1.0", set(), "v1.2"),
        ("x" * 64, set(), "x" * 62 + ".2"),
    ],
)
def test_fork_names(slot: str, taken: set[str], expected: str) -> None:
    assert fork_name(slot, taken) == expected


def test_a_cell_replays_on_its_branch_when_another_slot_is_current(session: Session) -> None:
    # Run All after a restart on a notebook left on an unrelated slot.
    first = session.submit_turn("question", cell_id="c1")
    session.submit_turn("follow-up", cell_id="c2")
    session.create_slot("scratch")
    session.switch_slot("scratch")
    again = session.submit_turn("question", cell_id="c1")
    assert again.replayed and again.slot == "default" and again.text == first.text
    assert session.current_slot == "default"
    assert session.submit_turn("follow-up", cell_id="c2").replayed
    assert session.messages("scratch") == []


def test_a_cell_on_another_branch_is_asked_again_with_slot_or_rerun(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    session.create_slot("scratch")
    reply = session.submit_turn("question", cell_id="c1", slot="scratch")
    assert not reply.replayed and contents(session, "scratch") == ["question"]
    session.create_slot("scratch2")
    session.switch_slot("scratch2")
    reply = session.submit_turn("question", cell_id="c1", rerun=True)
    assert not reply.replayed and reply.slot == "scratch2"
    assert contents(session, "default") == ["question"]


def test_an_edited_cell_on_another_branch_forks_from_where_it_ran(session: Session) -> None:
    session.submit_turn("question", cell_id="c1")
    session.create_slot("scratch")
    session.switch_slot("scratch")
    reply = session.submit_turn("question, edited", cell_id="c1")
    assert reply.slot == "default.2" and session.current_slot == "default.2"
    assert contents(session, "default") == ["question"] and session.messages("scratch") == []
