"""Store details below the Session: schema versions and migrations, durability settings, and
the store's parts by concern."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from slotmagic import Message, Session, SlotMoved, SQLiteStore, StoreError, ToolCall
from slotmagic._core.cells import CellRecord
from slotmagic._core.records import TurnInfo
from slotmagic._core.slots import SlotConfig
from slotmagic._store import base, rows
from slotmagic._store.history import SegmentReader
from slotmagic._store.migrations import MIGRATIONS, migrate


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def test_new_file_gets_the_newest_schema_in_wal_mode(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    assert user_version(db_path) == len(MIGRATIONS)
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_does_not_migrate_again(db_path: Path) -> None:
    with Session.open("a", db_path=db_path) as session:
        session.submit_turn("kept")
    with Session.open("a", db_path=db_path) as session:
        assert len(session.messages()) == 2


def test_a_file_from_a_newer_slotmagic_is_refused(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StoreError, match="upgrade slotmagic"):
        SQLiteStore(db_path)


def test_migrations_run_forward_in_order_and_only_once(db_path: Path) -> None:
    calls: list[str] = []

    def v1(db: sqlite3.Connection) -> None:
        calls.append("v1")
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")

    def v2(db: sqlite3.Connection) -> None:
        calls.append("v2")
        db.execute("ALTER TABLE notes ADD COLUMN created REAL")

    db = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(db, [v1]) == 1
    db.execute("INSERT INTO notes (body) VALUES ('kept')")
    assert migrate(db, [v1, v2]) == 2
    assert migrate(db, [v1, v2]) == 2
    assert calls == ["v1", "v2"]
    assert db.execute("SELECT body, created FROM notes").fetchall() == [("kept", None)]
    db.close()


def test_a_failing_migration_leaves_the_file_at_the_last_good_version(db_path: Path) -> None:
    def v1(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE t (x)")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE u (y)")
        raise RuntimeError("half way")

    db = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(RuntimeError):
        migrate(db, [v1, broken])
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'u'").fetchone() is None
    db.close()


def test_durability_setting(db_path: Path) -> None:
    store = SQLiteStore(db_path, durability="full")
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()
    store = SQLiteStore(db_path)
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    store.close()
    with pytest.raises(StoreError, match="unknown durability"):
        SQLiteStore(db_path, durability="sometimes")  # type: ignore[arg-type]


def test_two_connections_see_each_others_turns(db_path: Path) -> None:
    with Session.open("shared", db_path=db_path) as first, Session.open("shared", db_path=db_path) as second:
        first.submit_turn("from first")
        second.submit_turn("from second")
        assert [m.content for m in first.messages() if m.role == "user"] == ["from first", "from second"]
        assert first.slot().meta.turns == 2


def test_atomic_groups_calls_into_one_transaction(db_path: Path) -> None:
    from slotmagic import Message, SlotConfig, TurnInfo

    store = SQLiteStore(db_path)
    store.ensure_session("s")
    with pytest.raises(RuntimeError), store.atomic():
        store.derive_slot("s", "fork", "default", SlotConfig())
        store.append_turn("s", "fork", [Message.user("hi").with_tokens(3)], TurnInfo(kind="append"))
        store.set_current_slot("s", "fork")
        raise RuntimeError("the model's reply could not be stored")
    assert [slot.id for slot in store.slots("s")] == ["default"]
    assert store.current_slot("s") == "default"
    with store.atomic():
        store.derive_slot("s", "fork", "default", SlotConfig())
        store.append_turn("s", "fork", [Message.user("hi").with_tokens(3)], TurnInfo(kind="append"))
    assert store.slot("s", "fork").meta.message_count == 1
    store.close()


def test_a_version_1_file_is_upgraded_and_keeps_its_turns(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    migrate(db, MIGRATIONS[:1])
    db.execute("INSERT INTO sessions (id, current_slot, created_at) VALUES ('nb', 1, 0)")
    db.execute(
        "INSERT INTO slots (id, session_id, name, length, tokens, turns, config, created_at)"
        " VALUES (1, 'nb', 'default', 2, 10, 1, '{}', 0)"
    )
    db.execute("INSERT INTO messages VALUES (1, 0, 1, 'user', 'hi', 5, NULL, 0)")
    db.execute("INSERT INTO messages VALUES (1, 1, 1, 'assistant', 'hello', 5, NULL, 0)")
    db.execute("""INSERT INTO turns VALUES (1, 1, 0, 2, '{"kind": "turn", "cell": {"id": "c1", "text": "hi"}}', 0)""")
    db.close()

    store = SQLiteStore(db_path)
    assert user_version(db_path) == len(MIGRATIONS)
    [found] = store.cell_turns("nb", "c1", "default")
    assert (found.owner, found.home, found.held) == ("default", "default", True)
    assert found.record.info.cell is not None and found.record.info.cell.text == "hi"
    assert store.cell_turns("nb", "c2", "default") == []
    assert [m.content for m in store.messages("nb", "default")] == ["hi", "hello"]
    store.close()
    with Session.open("nb", db_path=db_path) as session:
        assert session.submit_turn("hi", cell_id="c1").replayed


def test_cell_lookups_see_turns_kept_for_derived_slots(db_path: Path) -> None:
    with Session.open("nb", db_path=db_path) as session:
        session.create_slot("a")
        session.submit_turn("from a cell", slot="a", cell_id="c1")
        session.derive_slot("b", parent="a")
        session.delete_slot("a", force=True)  # a tombstone now, holding the turn b shares
        [found] = session.store.cell_turns("nb", "c1", "default")
        assert (found.owner, found.home, found.held) == (None, "b", False)
        session.switch_slot("b")
        assert session.submit_turn("from a cell", cell_id="c1").replayed
        session.delete_slot("b", force=True)
        assert session.store.cell_turns("nb", "c1", "default") == []


def test_a_version_8_file_gains_cell_records(db_path: Path) -> None:
    """Version 9 keeps what each notebook cell's magic did (_engine/plan/cells.py), numbered in the
    order cells first ran; a record is kept once unless replaced."""
    db = sqlite3.connect(db_path, isolation_level=None)
    migrate(db, MIGRATIONS[:8])
    db.close()
    store = SQLiteStore(db_path)
    assert user_version(db_path) == len(MIGRATIONS)
    store.ensure_session("nb")
    first = store.record_cell("nb", "a", CellRecord("%slot derive b", "changes", current="b"))
    second = store.record_cell("nb", "b", CellRecord("%slot", "reads"))
    assert (first.seq, second.seq) == (1, 2) and store.cell_record("nb", "a") == first
    assert store.record_cell("nb", "b", CellRecord("%slot list", "reads")) == second  # kept
    assert store.record_cell("nb", "b", CellRecord("%slot list", "reads"), replace=True).seq == 3
    assert store.cell_record("nb", "missing") is None
    marker = store.state_marker("nb")
    store.derive_slot("nb", "b", "default", SlotConfig())
    assert store.state_marker("nb") != marker
    store.close()


def test_a_version_9_file_gains_the_index_of_turns_a_prompt_cache_served(db_path: Path) -> None:
    """Version 10 indexes the turns a prompt cache served, so a slot's first budget reads those
    and not every turn it holds; turns stored before the upgrade are in the index too."""
    from slotmagic._core.records import TurnInfo
    from slotmagic._core.usage import Usage
    from slotmagic._store.rows.segments import CACHED_SQL

    with Session.open("nb", db_path=db_path) as session:
        for i in range(6):
            turn = [Message.user(f"q{i}"), Message.assistant(f"a{i}")]
            usage = Usage(1_000, 10, 300 if i % 3 == 0 else 0)
            session.store.append_turn("nb", "default", turn, TurnInfo(model="openai:gpt-4o", usage=usage))
    with sqlite3.connect(db_path, isolation_level=None) as db:  # back to version 9
        db.execute("DROP INDEX turns_cached")
        db.execute("PRAGMA user_version = 9")
    SQLiteStore(db_path).close()
    assert user_version(db_path) == len(MIGRATIONS) == 10
    query = f"SELECT start FROM turns WHERE slot = 1 AND start >= 0 AND {CACHED_SQL['sqlite']} ORDER BY start"
    with sqlite3.connect(db_path) as db:
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "turns_cached" in plan, plan
        assert [start for (start,) in db.execute(query)] == [0, 6]
    with Session.open("nb", db_path=db_path) as session:
        assert session.budget().cached_tokens == 600


def test_messages_read_back_are_whole_and_small(db_path: Path) -> None:
    """A full slot's history stays in memory: a message read back holds slots, not a dict,
    and every field (the defaults of a message with no extra included) reads as stored."""
    import copy
    import pickle

    with Session.open("nb", db_path=db_path) as session:
        call = ToolCall("c1", "lookup", '{"q": 1}')
        session.append([Message.user("q"), Message.assistant("", tool_calls=[call]), Message.tool("c1", "42")])
    with Session.open("nb", db_path=db_path) as session:
        plain, asking, answer = session.messages()
    assert not hasattr(plain, "__dict__")
    assert (plain.tool_calls, plain.tool_call_id, plain.name, plain.thinking, plain.is_error, plain.images) == (
        (),
        None,
        None,
        (),
        False,
        (),
    )
    assert asking.tool_calls == (call,) and answer.tool_call_id == "c1"
    for message in (plain, asking, answer):
        assert pickle.loads(pickle.dumps(message)) == message == copy.deepcopy(message)
        assert message.with_tokens(7).tokens == 7 and message.with_tokens(7) == message


# Each role part of the Store protocol, and the part of RowStore that implements it.
PARTS: list[tuple[type, type]] = [
    (base.SlotStore, rows.SlotRows),
    (base.TreeStore, rows.TreeRows),
    (base.TurnStore, rows.TurnRows),
    (base.AnnotationStore, rows.AnnotationRows),
    (base.UndoStore, rows.UndoRows),
    (base.SearchStore, rows.SearchRows),
    (base.ValueStore, rows.KeptRows),
    (base.CellRecords, rows.KeptRows),
    (SegmentReader, rows.SegmentRows),
]


def methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}


def test_each_store_method_is_in_one_role_part_and_its_row_part() -> None:
    """A concern is one place: a Store method is declared in one role protocol, and written
    in the RowStore part of the same concern (not in another part, nor in the whole)."""
    declared = [name for protocol, _ in PARTS[:-1] for name in methods(protocol)]
    assert len(declared) == len(set(declared))
    assert methods(base.Store) == {"view_only", "atomic", "retried", "consistent", "close"}  # the store as a whole
    assert methods(base.Store) <= methods(rows.RowsBase)
    for protocol, part in PARTS:
        assert methods(protocol) <= methods(part), (protocol.__name__, methods(protocol) - methods(part))
    assert methods(rows.RowStore) == set()  # RowStore only composes the parts


def test_a_consistent_block_asks_the_file_once_and_a_write_still_sees_others(db_path: Path) -> None:
    """In ``consistent()`` this thread's first read asks whether others wrote (``PRAGMA
    data_version``) and the rest read on from there (a turn's start: one look); another
    thread's reads, reads after the block, and a write inside it still look, so a turn
    written on a history another kernel moved meanwhile is refused, not stored over it."""
    looks: list[str] = []
    with SQLiteStore(db_path) as mine, SQLiteStore(db_path) as theirs:
        mine.ensure_session("c")
        theirs.ensure_session("c")
        theirs.derive_slot("c", "x", "default", theirs.slot("c", "default").config, 0)
        mine._db.set_trace_callback(lambda sql: looks.append(sql) if "data_version" in sql else None)
        with mine.consistent():
            assert [s.id for s in mine.slots("c")] == ["default", "x"]  # the first read looked
            theirs.derive_slot("c", "y", "default", theirs.slot("c", "default").config, 0)
            tip = mine.history("c", "default").tip
            assert [s.id for s in mine.slots("c")] == ["default", "x"]  # as of that look
            assert len(looks) == 1
            elsewhere: list[list[str]] = []
            reader = threading.Thread(target=lambda: elsewhere.append([s.id for s in mine.slots("c")]))
            reader.start()
            reader.join()
            assert elsewhere == [["default", "x", "y"]]  # another thread's read looks
            theirs.append_turn("c", "default", [Message.user("theirs").with_tokens(1)], TurnInfo(kind="append"))
            with pytest.raises(SlotMoved):  # the write looks again, holding the write lock
                mine.append_turn("c", "default", [Message.user("mine").with_tokens(1)], TurnInfo(), base=tip)
        looks.clear()
        assert [m.content for m in mine.history("c", "default").messages()] == ["theirs"]
        assert len(looks) == 1  # after the block, every read looks
