"""Each store names each column in one place: the lists its statements are made from match the
columns of the live tables, read from a real SQLite file and a real PostgreSQL schema.

A slot row is read by the one list of ``SlotRow``'s columns (``SLOT_COLUMNS``); a session is
copied by the copy's table lists (``rows/dump.py``). A column a migration adds that these do
not name (or one they name that no migration made) fails here, on both stores.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from conftest import POSTGRES
from slotmagic import Message, Session
from slotmagic._store import open_store
from slotmagic._store.rows import COPIED_SESSION_TABLES, COPIED_SLOT_TABLES, RowStore
from slotmagic._store.rows.cache import SLOT_COLUMNS, SlotRow
from slotmagic._store.rows.common import SLOT_SELECT
from slotmagic._store.urls import parse_postgres_url

# Columns of one store only, kept by triggers for its change tracking (postgres_schema.py, v5
# and v6): no slot row or copy holds them.
POSTGRES_ONLY = {"slots": ("changed",), "sessions": ("changed", "noted", "removed")}
# Tables that are not a session's: the store's own (calibration; PostgreSQL's change counter
# and schema version) and SQLite's full-text index over messages, rebuilt from them.
NOT_A_SESSIONS = {"meta", "changes", "slotmagic_schema"}
# What a copy carries of the sessions table itself (``dump_session``, ``load_session``).
SESSION_COLUMNS = ["id", "current_slot", "created_at"]


def fill(target: str) -> None:
    """A session with a slot, a derived slot, an undone turn (a row hidden by undo) and a
    record of every kind a copy carries."""
    with Session.open("cols", db_path=target) as session:
        session.submit_turn("one")
        session.derive_slot("draft")
        session.submit_turn("two", slot="draft")
        session.history.undo("draft")
        session.workflows.define("flow", "a -> b")


def sqlite_columns(path: Path) -> dict[str, list[str]]:
    db = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith(("messages_fts", "sqlite_"))
        ]
        return {table: [row[1] for row in db.execute(f"PRAGMA table_info({table})")] for table in tables}
    finally:
        db.close()


def postgres_columns(url: str) -> dict[str, list[str]]:
    schema = parse_postgres_url(url).schema
    with psycopg.connect(POSTGRES) as db:
        found = db.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
            " ORDER BY table_name, ordinal_position",
            (schema,),
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in found:
        if column not in POSTGRES_ONLY.get(table, ()):
            columns.setdefault(table, []).append(column)
    return columns


def check_columns(live: dict[str, list[str]]) -> None:
    assert live["slots"] == ["id", "session_id", *[c for c in SLOT_COLUMNS.values() if c != "id"]]
    assert live["sessions"] == SESSION_COLUMNS
    copied = {**COPIED_SLOT_TABLES, **COPIED_SESSION_TABLES}
    assert {table: live[table] for table in copied} == {table: list(columns) for table, columns in copied.items()}
    assert set(live) - set(copied) - {"slots", "sessions"} <= NOT_A_SESSIONS


def check_rows(store: RowStore, read: list[dict[str, Any]]) -> None:
    """Every slot row the store reads holds, in each field, the value of that field's column
    (its JSON parsed): read by name here, by the store's one list there."""
    store._forget()
    with store._read() as db:
        cached = store._rows(db, "cols").rows
    assert len(cached) == len(read) == 3  # default, draft, and draft's row hidden by the undo
    for by_name in read:
        row = cached[by_name["id"]]
        for field, column in SLOT_COLUMNS.items():
            value = getattr(row, field)
            stored = by_name[column]
            assert value == stored or (isinstance(stored, str) and value == json.loads(stored)), (field, column)
    assert any(row.undo is not None for row in cached.values())


def test_the_select_list_is_slot_rows_columns_in_order() -> None:
    assert [f"slots.{c}" for c in SLOT_COLUMNS.values()] == SLOT_SELECT.split(", ")
    made = SlotRow(*range(len(SLOT_COLUMNS)))  # a row is made of the list's values, in its order
    assert [getattr(made, field) for field in SLOT_COLUMNS] == list(range(len(SLOT_COLUMNS)))


def test_a_sqlite_file_has_the_columns_the_store_names(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    fill(str(path))
    check_columns(sqlite_columns(path))
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    read = [dict(row) for row in db.execute("SELECT * FROM slots")]
    db.close()
    with open_store(str(path)) as store:
        assert isinstance(store, RowStore)
        check_rows(store, read)


def test_a_postgres_schema_has_the_columns_the_store_names(postgres_url: str) -> None:
    fill(postgres_url)
    check_columns(postgres_columns(postgres_url))
    schema = parse_postgres_url(postgres_url).schema
    with psycopg.connect(POSTGRES, row_factory=psycopg.rows.dict_row) as db:
        read = db.execute(f"SELECT * FROM {schema}.slots").fetchall()
    with open_store(postgres_url) as store:
        assert isinstance(store, RowStore)
        check_rows(store, read)


def test_a_message_row_is_read_by_the_columns_named(tmp_path: Path) -> None:
    """Messages are read by ``MESSAGE_COLUMNS`` into ``messages_from_rows``, whose fields
    beyond these travel in ``extra`` (JSON): a message field needs no column."""
    from slotmagic._store.rows import MESSAGE_COLUMNS

    path = tmp_path / "m.sqlite3"
    with Session.open("m", db_path=path) as session:
        session.append([Message.user("q"), Message.tool("c1", "r", name="f")])
    columns = sqlite_columns(path)["messages"]
    assert set(MESSAGE_COLUMNS.split(", ")) <= set(columns)
    with Session.open("m", db_path=path) as session:
        assert [(m.role, m.tool_call_id) for m in session.messages()] == [("user", None), ("tool", "c1")]
