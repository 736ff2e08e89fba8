"""Creating a slot that exists: the Python API raises; ``exist_ok`` tells a repeat from a clash."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slotmagic import FocusedConfig, Session, SlotConfig, SlotExists
from slotmagic._errors import SlotConflict, SlotNotEmpty, SlotNotFound


@pytest.fixture
def session() -> Iterator[Session]:
    with Session.open("defs", db_path=":memory:") as s:
        yield s


def test_duplicates_still_raise_by_default(session: Session) -> None:
    session.create_slot("a")
    with pytest.raises(SlotExists):
        session.create_slot("a")
    session.derive_slot("b")
    with pytest.raises(SlotExists):
        session.derive_slot("b")


def test_same_definition_returns_the_existing_slot(session: Session) -> None:
    made = session.create_slot("a", SlotConfig.focused_mode(4), exist_ok=True)
    again = session.create_slot("a", SlotConfig.focused_mode(4), exist_ok=True)
    assert again.meta.created_at == made.meta.created_at


def test_rederiving_after_the_parent_moved_on_is_the_same_definition(session: Session) -> None:
    session.derive_slot("b", "default", FocusedConfig(recent_messages=3), exist_ok=True)
    session.submit_turn("more")  # the parent grows; the fork point is not the definition
    assert session.derive_slot("b", "default", FocusedConfig(recent_messages=3), exist_ok=True).id == "b"


@pytest.mark.parametrize(
    ("make", "again", "difference"),
    [
        (
            lambda s: s.create_slot("x"),
            lambda s: s.create_slot("x", SlotConfig.readonly(), exist_ok=True),
            "its mode is 'full', not 'readonly'",
        ),
        (
            lambda s: s.create_slot("x", SlotConfig.focused_mode(4)),
            lambda s: s.create_slot("x", SlotConfig.focused_mode(6), exist_ok=True),
            "it keeps the last 4 messages, not 6",
        ),
        (
            lambda s: s.create_slot("x"),
            lambda s: s.derive_slot("x", exist_ok=True),
            "it is a new slot, not derived (full) from 'default'",
        ),
        (
            lambda s: s.create_slot("x", SlotConfig(system="A")),
            lambda s: s.create_slot("x", SlotConfig(system="B"), exist_ok=True),
            "its system prompt is 'A', not 'B'",
        ),
    ],
)
def test_another_definition_names_the_difference(session: Session, make, again, difference: str) -> None:
    make(session)
    with pytest.raises(SlotConflict) as raised:
        again(session)
    assert difference in str(raised.value)


def test_derived_from_another_parent_is_a_conflict(session: Session) -> None:
    session.create_slot("p")
    session.derive_slot("x", "default")
    with pytest.raises(SlotConflict, match="derived \\(full\\) from 'default', not derived \\(full\\) from 'p'"):
        session.derive_slot("x", "p", exist_ok=True)


def test_delete_without_force_protects_unshared_turns(session: Session) -> None:
    session.submit_turn("shared")
    session.derive_slot("b")
    session.delete_slot("b", force=False)  # only shared history: nothing lost
    session.derive_slot("c")
    session.submit_turn("own", slot="c")
    with pytest.raises(SlotNotEmpty, match="holds 1 turn that no other slot shares"):
        session.delete_slot("c", force=False)
    assert session.delete_slot("c", force=True)
    assert not session.delete_slot("c", missing_ok=True)
    with pytest.raises(SlotNotFound):
        session.delete_slot("c")


def test_diff_reports_the_fork_point_and_each_side(session: Session) -> None:
    session.submit_turn("entry")
    session.derive_slot("a")
    session.derive_slot("b")
    session.submit_turn("only a", slot="a")
    session.submit_turn("only b1", slot="b")
    session.submit_turn("only b2", slot="b")
    diff = session.history.diff("a", "b")
    assert (diff.shared_turns, diff.shared_messages) == (1, 2)
    assert [t.messages[0].content for t in diff.only_a] == ["only a"]
    assert [t.messages[0].content for t in diff.only_b] == ["only b1", "only b2"]
    text = diff.to_text()
    assert text.splitlines()[0] == "'a' and 'b' share 1 turn (2 messages), then part."
    assert "only in 'b': 2 turns" in text and "turn 3      user: only b2" in text


def test_diff_of_unrelated_slots(session: Session) -> None:
    session.submit_turn("entry")
    session.create_slot("fresh")
    diff = session.history.diff("default", "fresh")
    assert diff.shared_turns == 0 and len(diff.only_a) == 1 and diff.only_b == ()
    assert diff.to_text().startswith("'default' and 'fresh' share no history.")


def test_export_writes_the_whole_branch(session: Session, tmp_path: Path) -> None:
    import json

    session.submit_turn("entry")
    session.derive_slot("b")
    session.submit_turn("on b", slot="b")
    record = json.loads(session.history.export(tmp_path / "b.json", "b").read_text())
    assert [m["content"] for m in record["messages"] if m["role"] == "user"] == ["entry", "on b"]
    assert record["parent"] == "default" and len(record["turns"]) == 2
    markdown = session.history.export(tmp_path / "b.md", "b").read_text()
    assert markdown.startswith("# Slot `b`") and "## user\n\non b" in markdown


def test_export_refuses_an_unknown_format(session: Session, tmp_path: Path) -> None:
    from slotmagic import ConfigError

    with pytest.raises(ConfigError, match=r"ending in \.md or \.json"):
        session.history.export(tmp_path / "b.txt")
