"""Exploring branches (issue 15): merge back, undo and redo, pin and exclude, search, gc and
reviewed compaction, through the Python API and the ``%slot`` magics. The Python API tests
run on both stores (``store_target`` in ``conftest.py``): a SQLite file, a PostgreSQL schema."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from conftest import count_rows
from slotmagic import ConfigError, FocusedConfig, Message, Session, SlotExists, ToolCall


def run(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    ip.run_cell(line)
    return str(capsys.readouterr().out)


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    magic = next(c for c in ip.configurables if isinstance(c, SlotMagic))
    return magic.session()  # type: ignore[no-any-return]


def usage_error(ip: Any, line: str) -> str:
    with pytest.raises(UsageError) as raised:
        ip.run_cell(line)
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.fixture
def db_path(store_target: str) -> str:
    return store_target


def on_postgres(target: str | Path) -> bool:
    return str(target).startswith("postgresql://")


@pytest.fixture
def s(db_path: Path) -> Iterator[Session]:
    with Session.open("explore", db_path=db_path) as opened:
        yield opened


def users(session: Session, slot: str | None = None) -> list[str]:
    return [m.content for m in session.messages(slot) if m.role == "user"]


def rows(db_path: Path, table: str) -> int:
    return count_rows(db_path, table)


def dispute(session: Session) -> None:
    """A short conversation, then a branch that explores a letter."""
    session.submit_turn("I need help with a rental deposit dispute.")
    session.submit_turn("The landlord kept all $1,200 for 'cleaning'.")
    session.derive_slot("letter")
    session.submit_turn("Draft a demand letter citing the deposit statute.", slot="letter")
    session.submit_turn("Make it firmer and give a 14 day deadline.", slot="letter")


# -- merge --------------------------------------------------------------------------------------


def test_merge_then_diff_shows_the_merged_summary_in_the_parent_only(s: Session) -> None:
    dispute(s)
    before = s.messages("letter")
    merge = s.history.merge("letter")
    assert (merge.child, merge.into, merge.as_, merge.turns, merge.repeated) == (
        "letter",
        "default",
        "summary",
        2,
        False,
    )
    [summary] = s.messages("default")[-1:]
    assert summary.role == "user" and summary.content.startswith("Merged from branch 'letter' (2 turns")
    assert "Key points:" in summary.content and "Make it firmer" in summary.content
    record = s.history.turns("default")[-1]
    assert record.info.kind == "merge" and record.info.extra["merged_from"] == "letter"  # where it came from
    diff = s.history.diff("default", "letter")
    assert [t.turn.number for t in diff.only_a] == [3]
    assert [m.content for t in diff.only_a for m in t.messages] == [summary.content]
    assert all(not m.content.startswith("Merged") for t in diff.only_b for m in t.messages)
    assert s.messages("letter") == before  # the child stays


def test_merge_as_messages_copies_the_branch_turns_into_the_parent(s: Session) -> None:
    dispute(s)
    merge = s.history.merge("letter", into="default", as_="messages")
    assert merge.record.count == 4
    assert users(s, "default")[-2:] == users(s, "letter")[-2:]
    assert s.history.turns("default")[-1].info.extra["as"] == "messages"


def test_a_merge_run_again_does_not_merge_twice(s: Session) -> None:
    dispute(s)
    s.history.merge("letter")
    again = s.history.merge("letter")
    assert again.repeated and len(s.history.turns("default")) == 3
    s.submit_turn("One more point.", slot="letter")
    assert not s.history.merge("letter").repeated  # the branch went on: its new state merges


def test_merge_mistakes_are_one_line(s: Session) -> None:
    dispute(s)
    with pytest.raises(ConfigError, match="no parent to merge into"):
        s.history.merge("default")
    s.derive_slot("empty", parent="default")
    with pytest.raises(ConfigError, match="nothing to merge"):
        s.history.merge("empty")
    with pytest.raises(ConfigError, match="use one of: summary, messages"):
        s.history.merge("letter", as_="everything")


def test_merge_through_the_magic(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    dispute(session(ip))
    out = run(ip, "%slot merge letter --instructions 'keep the deadline'", capsys)
    assert out.startswith("merged 2 turns of 'letter' into 'default' as one summary, turn 3")
    assert "only in 'default': 1 turn" in run(ip, "%slot diff default letter", capsys)
    assert "already merged" in run(ip, "%slot merge letter", capsys)
    assert "choose from 'summary', 'messages'" in usage_error(ip, "%slot merge letter --as all")
    assert "did you mean" in usage_error(ip, "%slot merge lettr")


# -- undo and redo ------------------------------------------------------------------------------


def state(session: Session, slot: str = "default") -> tuple[Any, ...]:
    meta = session.slot(slot).meta
    turns = [(t.number, t.start, t.count) for t in session.history.turns(slot)]
    return (session.messages(slot), turns, meta.message_count, meta.turns, meta.total_tokens, session.view(slot))


def test_undo_and_redo_round_trip_exactly_and_delete_nothing(s: Session, db_path: Path) -> None:
    for text in ("one", "two", "three", "four"):
        s.submit_turn(text)
    s.history.pin(0)
    full, stored = state(s), rows(db_path, "messages")
    step = s.history.undo()
    assert (step.turns, step.at, step.length) == (1, 6, 8) and [t.number for t in step.undone()] == [4]
    one_back = state(s)
    assert users(s) == ["one", "two", "three"] and s.slot().meta.turns == 3
    s.history.undo(turns=2)
    assert users(s) == ["one"] and s.history.marks() == {0: "pin"}  # the pin was before the undone turns
    assert rows(db_path, "messages") == stored  # nothing deleted
    s.history.redo()
    assert state(s) == one_back
    s.history.redo()
    assert state(s) == full and s.history.marks() == {0: "pin"}
    assert [sl.id for sl in s.list_slots()] == ["default"] and s.current_slot == "default"
    with pytest.raises(ConfigError, match="nothing to redo"):
        s.history.redo()


def test_after_undo_a_new_turn_continues_and_redo_is_refused(s: Session) -> None:
    for text in ("one", "two", "three"):
        s.submit_turn(text)
    s.history.undo()
    reply = s.submit_turn("three, asked better")
    assert reply.turn == 3 and users(s) == ["one", "two", "three, asked better"]
    with pytest.raises(ConfigError, match="has had turns since the undo"):
        s.history.redo()
    undone = [(h.slot, h.turn, h.role) for h in s.history.search("three") if h.undone]
    assert sorted(undone) == [("default", 3, "assistant"), ("default", 3, "user")]  # still readable
    step = s.history.redo(branch="three")  # the undone turns as a branch of their own
    assert [t.number for t in step.undone()] == [3] and s.current_slot == "default"
    assert users(s, "three") == ["one", "two", "three"] and s.slot("three").meta.parent_id == "default"
    assert {h.slot for h in s.history.search("three") if h.role == "user"} == {"default", "three"}
    assert not any(h.undone for h in s.history.search("three"))
    with pytest.raises(SlotExists):
        s.history.redo(branch="three")


def test_undo_keeps_slots_derived_from_the_undone_history(s: Session) -> None:
    for text in ("one", "two"):
        s.submit_turn(text)
    s.derive_slot("side")
    s.history.undo()
    assert users(s, "side") == ["one", "two"] and s.slot("side").meta.parent_id == "default"
    assert [sl.id for sl in s.list_slots()] == ["default", "side"]
    s.submit_turn("three", slot="side")
    assert users(s, "side") == ["one", "two", "three"]


def test_undo_mistakes_are_one_line(s: Session) -> None:
    s.submit_turn("one")
    with pytest.raises(ConfigError, match="it has only 1 turns to undo"):
        s.history.undo(turns=2)
    with pytest.raises(ConfigError, match="turns to undo must be a whole number >= 1"):
        s.history.undo(turns=0)
    assert users(s) == ["one"]


def test_replay_after_undo_reproduces_the_first_run_without_a_model_call(s: Session) -> None:
    """A notebook: three turn cells, an undo cell, a fourth turn. Run All again replays every
    turn cell from the store (the undone one too), the undo cell does not undo twice, and the
    session ends where the first run ended."""
    s.submit_turn("one", cell_id="c1")
    s.submit_turn("two", cell_id="c2")
    third = s.submit_turn("three", cell_id="c3")
    s.history.undo(cell="u1")
    s.submit_turn("three, asked better", cell_id="c4")
    first_run = state(s)
    s._engine.pool.close()  # a model call now would need a new provider object
    assert all(s.submit_turn(t, cell_id=c).replayed for c, t in (("c1", "one"), ("c2", "two")))
    again = s.submit_turn("three", cell_id="c3")
    assert again.replayed and again.text == third.text and "undone" in again.notes[0]
    assert s.history.undo(cell="u1").repeated  # the same cell: nothing moves
    assert s.submit_turn("three, asked better", cell_id="c4").replayed
    assert state(s) == first_run and s._engine.pool.kept() == {}
    # An undone cell edited is a new turn on the slot, not a replay.
    assert not s.submit_turn("three, edited", cell_id="c3").replayed


def test_undo_and_redo_through_the_magic(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for n, text in enumerate(("one", "two", "three")):
        ip.run_cell(f"%%turn\n{text}", cell_id=f"t{n}")
    assert run(ip, "%slot undo --list", capsys) == "slot default: no undo steps\n"
    out = run(ip, "%slot undo 2", capsys)
    assert out.startswith("slot default: undid 2 turns (turns 2, 3); it holds 2 messages")
    assert run(ip, "%slot undo --list", capsys) == (
        "slot default: 1 undo step, latest first\n"
        "  1. turns 2, 3 taken off, leaving 2 messages · %slot redo brings it back\n"
    )
    assert run(ip, "%slot redo", capsys).startswith("slot default: redid 2 turns (turns 2, 3); it holds 6 messages")
    assert "it has only 3 turns" in usage_error(ip, "%slot undo 5")
    run(ip, "%slot undo", capsys)
    assert run(ip, "%slot undo --list", capsys) == (
        "slot default: 1 undo step, latest first\n"
        "  1. turn 3 taken off, leaving 4 messages · %slot redo brings it back\n"
    )
    ip.run_cell("%%turn\nthree, again")
    assert "--as NAME" in usage_error(ip, "%slot redo")
    out = run(ip, "%slot redo --as first-three", capsys)
    assert out == "slot 'first-three' holds the turns undone on 'default' (turns 3); current slot stays\n"
    capsys.readouterr()
    ip.run_cell("%slot undo", cell_id="undo-cell")
    ip.run_cell("%slot undo", cell_id="undo-cell")  # the cell run again: it replays what it printed
    first, again = capsys.readouterr().out.splitlines()
    assert first == again and first.startswith("slot default: undid 1 turn")
    assert session(ip).slot().meta.turns == 2
    ip.run_cell("%slot undo\n%slot undo", cell_id="two-undos")  # two lines of one cell: two undos
    assert session(ip).slot().meta.turns == 0


# -- pin and exclude ----------------------------------------------------------------------------


def test_a_pinned_message_survives_compaction_and_the_focused_filter(s: Session) -> None:
    s.submit_turn("My deposit was exactly $1,200, paid on 1 March.")
    for n in range(5):
        s.submit_turn(f"Another question number {n} about the lease.")
    assert s.history.pin(0) == 0
    compaction = s.compactions.compact(keep=2)
    assert compaction.upto == 10
    view = s.preview()
    pinned = [e for e in view.entries if e.kind == "history" and e.position == 0]
    assert pinned and pinned[0].message.content.startswith("My deposit was exactly $1,200")
    assert all(not (o.lo <= 0 < o.hi) for o in view.omitted)
    assert "· pinned" in view.to_text() and "· summary of a compaction" in view.to_text()
    s.history.unmark(0)
    assert all(e.position != 0 for e in s.preview().entries)  # folded again, as without the pin
    s.configure_slot(mode="focused", focused=FocusedConfig(recent_messages=2))
    s.history.pin(2)
    assert [e.position for e in s.preview().entries if e.kind == "history"] == [2, 10, 11]


def test_an_excluded_message_is_not_in_the_view_and_stays_stored(s: Session) -> None:
    s.append([Message.user("Ignore this: my card number is 4111 1111 1111 1111."), Message.assistant("Noted.")])
    s.submit_turn("What evidence do I need?")
    s.history.exclude(-4)
    view = s.preview()
    assert all("4111" not in m.content for m in view.messages)
    assert [(o.lo, o.hi, o.reason) for o in view.omitted] == [(0, 1, "excluded")]
    assert "excluded: the model never sees it" in view.to_text()
    assert "4111" in s.messages()[0].content  # stored as it was
    s.derive_slot("later")
    assert all("4111" not in m.content for m in s.view("later"))  # derived slots inherit it


def test_an_excluded_message_does_not_count_against_a_focused_slot(s: Session) -> None:
    for n in range(4):
        s.append([Message.user(f"question {n}"), Message.assistant(f"answer {n}")])
    s.configure_slot(mode="focused", focused=FocusedConfig(recent_messages=3))
    assert [e.position for e in s.preview().entries] == [5, 6, 7]
    s.history.exclude(6)
    view = s.preview()
    assert [e.position for e in view.entries] == [4, 5, 7]  # still three messages
    assert sorted((o.lo, o.hi, o.reason) for o in view.omitted) == [(0, 4, "filtered"), (6, 7, "excluded")]


def test_marks_refuse_tool_messages_and_bad_positions(s: Session) -> None:
    call = ToolCall("call_1", "lease_clause", '{"number": 3}')
    s.append([Message.user("clause 3?"), Message.assistant("", [call]), Message.tool("call_1", "Clause 3: …")])
    for position in (1, 2):
        with pytest.raises(ConfigError, match=f"message {position + 1} is part of a tool exchange"):
            s.history.exclude(position)
    s.append([Message.user("hi"), Message.assistant("hello")])
    s.history.exclude(-2)
    with pytest.raises(ConfigError, match="has no message 9: it holds 5"):
        s.history.pin(8)
    with pytest.raises(ConfigError, match="must be a whole number"):
        s.history.pin("1")  # type: ignore[arg-type]
    assert s.history.marks() == {3: "exclude"}


def test_pin_and_exclude_through_the_magic(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nMy secret is swordfish.")
    ip.run_cell("%%turn\nWhat next?")
    assert run(ip, "%slot exclude 1", capsys).startswith("slot default: excluded message 1")
    assert run(ip, "%slot pin -1", capsys).startswith("slot default: pinned message 4")
    preview = run(ip, "%slot preview", capsys)
    assert "excluded: the model never sees it" in preview and "    My secret is swordfish." not in preview.splitlines()
    heads = [line for line in run(ip, "%slot show", capsys).splitlines() if line.startswith("[")]
    assert heads[0].startswith("[1] user (") and heads[0].endswith(" · excluded: the model never sees it)")
    assert heads[3].startswith("[4] assistant (") and heads[3].endswith(" · pinned)")
    assert "·" not in heads[1] + heads[2]  # unmarked messages say nothing more
    assert run(ip, "%slot include 1", capsys).startswith("slot default: cleared the mark of message 1")
    assert "numbered from 1" in usage_error(ip, "%slot pin 0")
    assert "not a message number" in usage_error(ip, "%slot exclude first")
    assert "has no message 9" in usage_error(ip, "%slot pin 9")


# -- search -------------------------------------------------------------------------------------


def test_search_uses_fts5_and_names_slot_and_turn(s: Session, db_path: Path) -> None:
    dispute(s)
    hits = s.history.search("deposit statute")
    assert [(h.slot, h.turn, h.role) for h in hits][:1] == [("letter", 3, "user")]
    assert "[deposit] [statute]" in hits[0].snippet
    assert [h.slot for h in s.history.search("cleaning")] == ["default", "default"]  # held by both; owner named
    assert [h.slot for h in s.history.search("cleaning", slot="letter")] == ["letter", "letter"]
    assert s.history.search('AND OR NOT "( *') == []  # the words are taken literally, never as syntax
    if not on_postgres(db_path):
        with sqlite3.connect(db_path) as db:
            assert db.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()[0].count("fts5")
        db.close()
    with pytest.raises(ConfigError, match="nothing to search for"):
        s.history.search("   ")


def test_a_search_of_many_words_or_a_nul_is_an_answer_or_one_line(s: Session) -> None:
    """A pasted page as a search made SQLite refuse the query raw ("Expression tree is too
    large", from 999 words) and PostgreSQL take minutes; a NUL raised raw on both stores."""
    dispute(s)
    words = " ".join(f"w{i}" for i in range(49))
    s.append([Message.user(f"the deposit {words}")])
    assert [h.role for h in s.history.search(f"Deposit {words} deposit DEPOSIT")] == ["user"]  # 52 words, 50 different
    for n in (999, 3_000, 40_000):
        with pytest.raises(ConfigError, match=f"a search takes at most 50 different words, not {n:,}") as raised:
            s.history.search(" ".join(f"w{i}" for i in range(n)))
        assert "\n" not in str(raised.value)
    assert len(s.history.search(" ".join(["deposit"] * 40_000))) > 0  # the same word 40,000 times: one word
    assert [h.role for h in s.history.search("deposit\x00w7")] == ["user"]  # a NUL separates words
    assert s.history.search("\x00nothing\x00like\x00this") == []


def test_search_through_the_magic(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    dispute(session(ip))
    out = run(ip, "%slot search demand letter", capsys)
    assert out.splitlines()[0].startswith("slot letter · turn 3 · message 5 (user): Draft a [demand] [letter]")
    assert run(ip, "%slot search nothing-like-this", capsys) == "no message holds 'nothing-like-this'\n"
    assert "did you mean" in usage_error(ip, "%slot search deposit --slot leter")


# -- gc -----------------------------------------------------------------------------------------


def test_gc_after_deleting_branches_frees_space_and_keeps_what_is_reachable(s: Session, db_path: Path) -> None:
    s.submit_turn("start")
    s.derive_slot("draft")
    s.switch_slot("draft")
    for n in range(3):
        s.append([Message.user(f"draft {n} " + "x" * 40_000), Message.assistant("ok")])
    s.derive_slot("kept")  # shares draft's first turns
    for n in range(3):
        s.append([Message.user(f"later {n} " + "y" * 40_000), Message.assistant("ok")])
    s.derive_slot("gone", parent="default")
    s.append([Message.user("z" * 60_000)], slot="gone")
    kept = s.messages("kept")
    s.switch_slot("default")
    s.delete_slot("draft", force=True)  # a tombstone: 'kept' still shares its first rows
    s.delete_slot("gone", force=True)
    report = s.history.gc()
    assert report.messages == 6 and report.turns == 3  # draft's later turns, which nothing reaches
    assert s.messages("kept") == kept and users(s) == ["start"]
    assert count_rows(db_path, "messages", "WHERE content LIKE 'later%'") == 0
    if not on_postgres(db_path):  # PostgreSQL's plain VACUUM keeps most freed pages for reuse
        assert report.freed > 100_000 and report.bytes_after < report.bytes_before
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.close()
    assert [h.slot for h in s.history.search("draft")] == ["kept"] * 3  # the index was rebuilt after VACUUM
    s.append([Message.user("still works")], slot="kept")
    assert s.history.gc().messages == 0  # nothing more to remove


def test_gc_keeps_the_undo_history_until_told_to_drop_it(s: Session) -> None:
    s.derive_slot("side")
    s.submit_turn("side turn", slot="side")
    s.history.undo("side")
    s.delete_slot("side")  # its undo history goes with it, at once
    assert s.history.search("side") == [] and s.history.gc().messages == 0
    for text in ("one", "two", "three"):
        s.submit_turn(text)
    s.history.undo()
    assert s.history.gc().messages == 0  # undone turns are reachable: redo still works
    s.history.redo()
    s.history.undo()
    report = s.history.gc(drop_undo=True)
    assert report.messages == 2 and s.history.undo_steps() == []
    with pytest.raises(ConfigError, match="nothing to redo"):
        s.history.redo()
    assert users(s) == ["one", "two"]


def test_gc_removes_large_tool_results_only_deleted_branches_referred_to(s: Session) -> None:
    def exchange(slot: str, text: str) -> None:
        call = ToolCall(f"call_{slot}", "fetch", "{}")
        result = s._engine.namespace.shelve(Message.tool(call.id, text * 3000, name="fetch"))
        assert result.content.startswith("namespace://fetch/")
        s.append([Message.user("fetch it"), Message.assistant("", [call]), result], slot=slot)

    s.derive_slot("kept")
    s.derive_slot("gone")
    exchange("kept", "lease ")
    exchange("gone", "invoice ")
    s.delete_slot("gone", force=True)
    assert s.history.gc().namespace == 1
    assert s.messages("kept", expand=True)[-1].content == "lease " * 3000  # an export still reads it


def test_gc_through_the_magic(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(ip, "%slot gc", capsys)
    assert out.startswith("gc: removed 0 messages in 0 turns and 0 large tool results; freed ")
    assert "unrecognized arguments" in usage_error(ip, "%slot gc --everything")


# -- reviewed compaction --------------------------------------------------------------------------


def test_compact_preview_shows_the_summary_and_changes_nothing(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(4):
        ip.run_cell(f"%%turn\nQuestion {n} about the deposit.")
    out = run(ip, "%slot compact --keep 2 --preview --instructions 'keep every number'", capsys)
    assert out.startswith("preview: slot default would fold messages 1-6 into this summary")
    assert "nothing changed" in out and session(ip).compactions() == []
    out = run(ip, "%slot compact --keep 2", capsys)
    assert out.startswith("slot default: compacted 6 messages → 1 summary")
    assert len(session(ip).compactions()) == 1
    assert "folded into the summary" in run(ip, "%slot preview", capsys)


def test_a_usage_error_from_the_explore_commands_loses_nothing(ip: Any) -> None:
    ip.run_cell("%%turn\nhello")
    before = session(ip).messages()
    for line in ("%slot undo 3", "%slot redo", "%slot pin 7", "%slot merge default", "%slot search ''"):
        with pytest.raises(UsageError):
            ip.run_cell(line)
    assert session(ip).messages() == before


# -- the schema upgrade ---------------------------------------------------------------------------


def test_a_store_of_the_previous_schema_upgrades_and_every_feature_works_on_it(tmp_path: Path) -> None:
    """A file as the released schema (version 6) wrote it: a slot and a branch with turns."""
    from slotmagic._store.migrations import MIGRATIONS, migrate

    path = tmp_path / "state.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    assert migrate(db, MIGRATIONS[:6]) == 6
    db.execute("INSERT INTO sessions (id, current_slot, created_at) VALUES ('nb', 1, 1)")
    db.execute(
        "INSERT INTO slots (id, session_id, name, parent, fork_at, length, tokens, turns, config, created_at)"
        " VALUES (1, 'nb', 'default', NULL, 0, 4, 20, 2, '{}', 1), (2, 'nb', 'side', 1, 2, 4, 20, 2, '{}', 2)"
    )
    texts = [(1, 0, 1, "user", "deposit question"), (1, 1, 1, "assistant", "answer one")]
    texts += [(1, 2, 2, "user", "second question"), (1, 3, 2, "assistant", "answer two")]
    texts += [(2, 2, 2, "user", "side question about the statute"), (2, 3, 2, "assistant", "side answer")]
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, 5, NULL, 1)", texts)
    turns = [(1, 1, 0), (1, 2, 2), (2, 2, 2)]
    db.executemany("""INSERT INTO turns VALUES (?, ?, ?, 2, '{"kind": "turn"}', 1)""", turns)
    db.close()
    with Session.open("nb", db_path=path) as s:
        [hit] = s.history.search("statute")
        assert (hit.slot, hit.turn, hit.position) == ("side", 2, 2)  # the index holds the old rows
        s.history.undo(slot="side")
        assert users(s, "side") == ["deposit question"]
        s.history.redo(slot="side")
        s.history.pin(0, slot="side")
        s.submit_turn("after the upgrade", slot="side")
        assert users(s, "side")[-1] == "after the upgrade" and s.history.marks("side") == {0: "pin"}
        s.history.merge("side")
        assert s.history.turns()[-1].info.kind == "merge"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")  # raises if out of step
    db.close()
    assert (tmp_path / "state.sqlite3.v6.bak").exists()


def test_a_pin_made_by_another_kernel_is_seen_at_the_next_view(db_path: Path) -> None:
    with Session.open("two", db_path=db_path) as a, Session.open("two", db_path=db_path) as b:
        a.submit_turn("the key fact")
        a.submit_turn("more")
        assert b.history.marks() == {} and len(b.preview().entries) == 4  # b has read (and cached) it
        a.history.exclude(0)
        assert b.history.marks() == {0: "exclude"} and len(b.preview().entries) == 3
        b.history.unmark(0)
        assert a.history.marks() == {}


def test_the_search_index_catches_up_at_search_and_stays_in_step_through_gc(tmp_path: Path) -> None:
    """A turn does not index its messages; the next search does. Deleting messages (gc) keeps
    the index in step even when SQLite gives a removed top rowid to the next message."""
    path = tmp_path / "fts.sqlite3"

    def in_step() -> int:
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            return int(db.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0])

    with Session.open("nb", db_path=path) as s:
        s.append([Message.user("the deposit was 900"), Message.assistant("noted")])
        assert in_step() == 0  # nothing indexed by the turn itself
        assert [h.position for h in s.history.search("deposit")] == [0]
        assert in_step() == 2
        s.derive_slot("side")
        s.append([Message.user("side: the statute of limitations"), Message.assistant("three years")], slot="side")
        assert [h.slot for h in s.history.search("statute")] == ["side"]
        s.delete_slot("side", force=True)
        s.history.gc()
        s.append([Message.user("a new question about the statute"), Message.assistant("ok")])
        assert [(h.slot, h.position) for h in s.history.search("statute")] == [("default", 2)]
        assert [h.position for h in s.history.search("deposit")] == [0]
    in_step()


def statements_of(store: Any) -> list[str]:
    """Every SQL statement the store's connection runs from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def test_a_frequent_word_makes_snippets_only_for_the_hits_kept(tmp_path: Path) -> None:
    with Session.open("nb", db_path=tmp_path / "many.sqlite3") as s:
        s.append([Message.user(f"deposit question {i}") for i in range(60)])
        s.history.search("deposit")  # indexes them
        seen = statements_of(s.store)
        hits = s.history.search("deposit", limit=5)
        assert len(hits) == 5 and all("[deposit]" in h.snippet for h in hits)
        [made] = [sql for sql in seen if "snippet(" in sql]
        assert made.count(",", made.index("IN (")) == 4  # snippets for the 5 hits kept, not 60
        assert [h.position for h in hits] == [h.position for h in s.history.search("deposit", limit=60)][:5]


def test_gc_with_nothing_to_free_leaves_the_search_index_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.open("nb", db_path=tmp_path / "gc.sqlite3") as s:
        s.append([Message.user("the deposit was 900"), Message.assistant("noted")])
        assert [h.position for h in s.history.search("deposit")] == [0]
        seen = statements_of(s.store)
        report = s.history.gc()
        assert report.messages == 0 and any("VACUUM" in sql for sql in seen)
        assert not any("'rebuild'" in sql for sql in seen)  # VACUUM kept every rowid: no rebuild
        assert [h.position for h in s.history.search("deposit")] == [0]

        # Were a VACUUM to renumber the messages, the index would be built again.
        numbering = iter([[1, 2], [7, 8]])
        monkeypatch.setattr(type(s.store), "_rowids", lambda self: next(numbering))
        seen.clear()
        s.history.gc()
        assert any("'rebuild'" in sql for sql in seen)
        assert [h.position for h in s.history.search("deposit")] == [0]


def test_a_store_that_refuses_writes_finds_messages_no_search_has_indexed(tmp_path: Path) -> None:
    """A read-only store cannot index: what no search indexed is matched word by word (the
    read-only file test in test_files.py searches such a store from an unprivileged process)."""
    with Session.open("nb", db_path=tmp_path / "ro.sqlite3") as s:
        s.append([Message.user("what about the 100% deposit_fee?"), Message.assistant("noted")])
        s.store.refusal = "the state file is read-only"  # as a read-only file sets it at open
        assert [h.position for h in s.history.search("deposit_fee")] == [0]
        assert (
            s.history.search("100%") and not s.history.search("deposit-fee") and not s.history.search("10_%")
        )  # wildcards escaped


def test_a_compaction_made_by_another_kernel_is_seen_at_the_next_view(db_path: Path) -> None:
    with Session.open("two", db_path=db_path) as a, Session.open("two", db_path=db_path) as b:
        for n in range(4):
            a.append([Message.user(f"question {n} about the deposit"), Message.assistant("An answer.")])
        assert b.compactions() == [] and len(b.preview().entries) == 8  # b has read (and cached) it
        a.compactions.compact(keep=2)
        assert len(b.compactions()) == 1
        assert b.preview().entries[0].kind == "compaction" and len(b.preview().entries) == 3


def test_an_excluded_message_reaches_no_summary_and_no_merge(s: Session) -> None:
    s.append([Message.user("my card is 4111 1111 1111 1111"), Message.assistant("Noted.")])
    for n in range(3):
        s.append([Message.user(f"question {n} about the deposit"), Message.assistant("An answer.")])
    s.history.exclude(0)
    compaction = s.compactions.compact(keep=2)
    assert compaction.upto == 6 and "4111" not in compaction.message().content
    assert "question 0" in compaction.message().content  # the summary is of the rest
    s.derive_slot("side")
    s.append([Message.user("side: my PIN is 9876"), Message.assistant("Noted.")], slot="side")
    s.append([Message.user("side: the statute says 21 days"), Message.assistant("Yes.")], slot="side")
    s.history.exclude(-4, slot="side")
    s.history.merge("side")
    s.history.merge("side", as_="messages")
    merged = [m.content for t in s.history.diff("default", "side").only_a for m in t.messages]
    assert len(merged) == 1 + 3 and not any("9876" in text for text in merged)  # summary, then 3 of 4
    assert any("21 days" in text for text in merged)


def test_compact_preview_from_python_stores_nothing(s: Session) -> None:
    for n in range(4):
        s.submit_turn(f"Question {n} about the deposit.")
    preview = s.compactions.compact(keep=2, preview=True, instructions="keep every number")
    assert (preview.upto, preview.replaced, preview.instructions) == (6, 6, "keep every number")
    assert s.compactions() == [] and all(e.kind != "compaction" for e in s.preview().entries)
    stored = s.compactions.compact(keep=2, instructions="keep every number")
    assert (stored.upto, stored.text) == (preview.upto, preview.text)  # what was shown is what is made
    with pytest.raises(ConfigError, match="preview must be True or False"):
        s.compactions.compact(keep=2, preview="yes")  # type: ignore[arg-type]


def test_prompt_cache_is_a_setting(ip: Any) -> None:
    assert session(ip).options.prompt_cache is True  # on by default
    ip.run_cell("%config SlotMagic.prompt_cache = False")
    assert session(ip).options.prompt_cache is False


def test_gc_while_another_connection_reads_removes_and_says_the_file_kept_its_size(tmp_path: Path) -> None:
    """SQLite's own case (PostgreSQL has no file to compact): a reader keeps VACUUM from it."""
    db_path = tmp_path / "explore.sqlite3"
    with Session.open("explore", db_path=db_path) as s:
        _gc_beside_a_reader(s, db_path)


def _gc_beside_a_reader(s: Session, db_path: Path) -> None:
    s.derive_slot("a")
    s.append([Message.user("a" * 50_000)], slot="a")
    s.derive_slot("b", parent="a")
    s.append([Message.user("more " * 10_000)], slot="a")
    s.delete_slot("a", force=True)
    reader = sqlite3.connect(db_path, timeout=0.1)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM messages").fetchone()  # holds a read transaction open
    s.store._db.execute("PRAGMA busy_timeout = 100")  # not the 10 s a kernel waits
    try:
        report = s.history.gc()
    finally:
        reader.close()
    assert report.messages == 1 and not report.compacted
    assert s.history.gc().compacted and len(s.messages("b")) == 1
