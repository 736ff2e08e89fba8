"""Copying whole sessions between stores: every row of a session as a ``SessionDump``, and
storing one (``slotmagic._copy``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..._errors import StoreError
from .cache import SLOT_COLUMNS
from .common import RowsBase

# What a session is, table by table, for copying it between stores (``dump_session``): the
# tables keyed by slot (their first column) and by session id. A new table joins here.
COPIED_SLOT_TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("slot", "seq", "turn", "role", "content", "tokens", "extra", "created_at"),
    "turns": ("slot", "number", "start", "count", "info", "created_at"),
    "compactions": ("slot", "number", "at", "record", "created_at"),
    "token_counts": ("slot", "encoding", "seq", "tokens"),
    "context_events": ("slot", "number", "at", "turn", "event", "created_at"),
    "marks": ("slot", "number", "position", "mark", "created_at"),
}
COPIED_SESSION_TABLES: dict[str, tuple[str, ...]] = {
    "namespace": ("session_id", "key", "tool", "content", "created_at"),
    "workflows": ("session_id", "name", "record", "active", "created_at"),
    "cells": ("session_id", "key", "seq", "record", "created_at"),
}
# The column of each table that may hold any text (NUL included), by its place in the table's list.
_TEXT_COLUMNS = {
    table: {**COPIED_SLOT_TABLES, **COPIED_SESSION_TABLES}[table].index("content")
    for table in ("messages", "namespace")
}
# A slot row's columns, as a dump holds them: SlotRow's (a new one is copied with no line here).
_SLOT_COLUMNS = tuple(SLOT_COLUMNS.values())


@dataclass(frozen=True)
class SessionDump:
    """Every stored row of one session, with slot row ids replaced by their rank (0, 1, ...
    in creation order): the same in any store, so two dumps compare equal exactly when the
    two stores hold the same session."""

    session_id: str
    created_at: float
    current: int | None
    slots: list[tuple[Any, ...]]  # the slots columns SlotRow holds, in its order; id and parent as ranks
    tables: dict[str, list[tuple[Any, ...]]]

    def message_digests(self) -> list[str]:
        """A SHA-256 of every message: its slot's name and rank, position, turn, role,
        content, token count, extra fields and time."""
        import hashlib  # here, as in checksum: only a copy's check digests a session

        names = {row["id"]: row["name"] for row in (dict(zip(_SLOT_COLUMNS, r, strict=True)) for r in self.slots)}
        return [
            hashlib.sha256(
                json.dumps([names[row[0]], *row], ensure_ascii=False).encode("utf-8", "surrogatepass")
            ).hexdigest()
            for row in self.tables["messages"]
        ]

    def checksum(self) -> str:
        """One SHA-256 of everything in the dump."""
        import hashlib

        whole = [self.session_id, self.created_at, self.current, self.slots, sorted(self.tables.items())]
        return hashlib.sha256(json.dumps(whole, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()


class DumpRows(RowsBase):
    """``dump_session`` and ``load_session``."""

    # -- copying whole sessions between stores ---------------------------------------------------

    def dump_session(self, session_id: str) -> SessionDump:
        """Every row of the session (tombstones, turn records, compactions, counts, working
        context, workflows and kept tool results included), read in one transaction."""
        # Under the write lock no other writer changes it half way; a store that refuses writes
        # (a read-only file) is read as it is.
        with self._write() if self.refusal is None else self._read() as db:
            found = db.execute("SELECT created_at, current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if found is None:
                raise StoreError(f"there is no session {session_id!r} to copy")
            rows = db.execute(
                f"SELECT {', '.join(_SLOT_COLUMNS)} FROM slots WHERE session_id = ? ORDER BY id", (session_id,)
            )
            slots = [dict(zip(_SLOT_COLUMNS, r, strict=True)) for r in rows.fetchall()]
            rank = {row["id"]: i for i, row in enumerate(slots)}
            for row in slots:
                row["id"], row["parent"] = rank[row["id"]], None if row["parent"] is None else rank[row["parent"]]
            ranked = [tuple(row.values()) for row in slots]
            tables: dict[str, list[tuple[Any, ...]]] = {}
            for table, columns in COPIED_SLOT_TABLES.items():
                out: list[tuple[Any, ...]] = []
                for key in rank:
                    order = ", ".join(columns[1:3])
                    for r in db.execute(
                        f"SELECT {', '.join(columns)} FROM {table} WHERE slot = ? ORDER BY {order}", (key,)
                    ):
                        out.append(self._row_out(table, (rank[r[0]], *r[1:])))
                tables[table] = out
            for table, columns in COPIED_SESSION_TABLES.items():
                found_rows = db.execute(
                    f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ? ORDER BY {columns[1]}",
                    (session_id,),
                )
                tables[table] = [self._row_out(table, tuple(r)) for r in found_rows]
            current = None if found[1] is None else rank.get(found[1])
            return SessionDump(session_id, found[0], current, ranked, tables)

    def _row_out(self, table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
        column = _TEXT_COLUMNS.get(table)
        if column is None:
            return row
        return (*row[:column], self._text_out(row[column]), *row[column + 1 :])

    def load_session(self, dump: SessionDump) -> None:
        """Store a dumped session, all of it or nothing; a session of that id must not exist."""
        with self._write() as db:
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (dump.session_id,)).fetchone() is not None:
                raise StoreError(f"session {dump.session_id!r} exists already in the destination; nothing was copied")
            db.execute("INSERT INTO sessions (id, created_at) VALUES (?, ?)", (dump.session_id, dump.created_at))
            keys: dict[int, int] = {}
            for values in dump.slots:
                row = dict(zip(_SLOT_COLUMNS, values, strict=True))
                rank = row.pop("id")
                row["parent"] = None if row["parent"] is None else keys[row["parent"]]
                keys[rank] = int(
                    db.execute(
                        f"INSERT INTO slots (session_id, {', '.join(row)}) VALUES (?{', ?' * len(row)}) RETURNING id",
                        (dump.session_id, *row.values()),
                    ).fetchall()[0][0]
                )
            if dump.current is not None:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (keys[dump.current], dump.session_id))
            for table, columns in {**COPIED_SLOT_TABLES, **COPIED_SESSION_TABLES}.items():
                rows = dump.tables.get(table, [])
                if table in COPIED_SLOT_TABLES:
                    rows = [(keys[r[0]], *r[1:]) for r in rows]
                column = _TEXT_COLUMNS.get(table)
                if column is not None:
                    rows = [(*r[:column], self._text_in(r[column]), *r[column + 1 :]) for r in rows]
                if rows:
                    marks = ", ".join("?" * len(columns))
                    db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
            self._sessions.pop(dump.session_id, None)
            self._active_workflows.pop(dump.session_id, None)
