"""The SQLite store: every session, slot and message in one file.

Layout (see ``migrations.py``): a slot is a branch that shares its parent's first ``fork_at``
messages and owns the rows from there on, so deriving writes one row whatever the history's
length, and a turn appends a few rows and updates one. A slot's history is read segment by
segment, root first, each segment a range scan of the primary key.

Durability: WAL journal with ``synchronous=NORMAL``. Every turn is one transaction, so after
a crash of the process (kernel killed, machine out of memory) a slot holds a turn whole or not
at all; a power cut may lose the last turns committed before it, never corrupt the file.
``durability="full"`` makes each commit wait for the disk.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from ..core.messages import Message, ToolCall
from ..core.slots import DEFAULT_SLOT, Slot, SlotConfig, SlotMeta
from ..errors import ProtectedSlot, SlotExists, SlotNotFound, StoreError
from .base import TurnRecord
from .migrations import migrate

Durability = Literal["normal", "full"]
_SLOT_COLUMNS = "id, name, parent, fork_at, length, tokens, turns, config, created_at"


def _messages_from_rows(rows: Iterable[tuple[str, str, int, str | None]]) -> list[Message]:
    """Rebuild messages from trusted rows without re-running validation: loading a long
    history is otherwise dominated by object construction. Fields left unset read the
    class defaults (no tool calls)."""
    out: list[Message] = []
    append = out.append
    new = object.__new__
    for role, content, tokens, extra in rows:
        message = new(Message)
        fields = message.__dict__
        fields["role"] = role
        fields["content"] = content
        fields["tokens"] = tokens
        if extra is not None:
            data = json.loads(extra)
            fields["tool_calls"] = tuple(
                ToolCall(c["id"], c["name"], c["arguments"]) for c in data.get("tool_calls", ())
            )
            fields["tool_call_id"] = data.get("tool_call_id")
            fields["name"] = data.get("name")
        append(message)
    return out


def _extra_json(message: Message) -> str | None:
    extra = message.extra()
    return None if extra is None else json.dumps(extra, ensure_ascii=False)


class SQLiteStore:
    """A store in one SQLite file (or ``":memory:"``). Safe to share between threads."""

    def __init__(
        self, path: str | os.PathLike[str], *, durability: Durability = "normal", timeout: float = 10.0
    ) -> None:
        self.path = str(path)
        if durability not in ("normal", "full"):
            raise StoreError(f"unknown durability {durability!r}; use 'normal' or 'full'")
        self._lock = threading.RLock()
        if self.path != ":memory:":
            try:
                _create_private(Path(self.path))
            except OSError as exc:
                raise StoreError(
                    f"cannot create the state file {self.path} ({exc.strerror or exc}); "
                    "point SLOTMAGIC_DB (or db_path) at a writable place"
                ) from None
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {durability.upper()}")
            migrate(self._db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot use {self.path} as a slotmagic store ({exc}); move the file aside "
                "or point SLOTMAGIC_DB at another path"
            ) from None

    # -- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits or none of it does. Inside ``atomic()``
        it joins the enclosing transaction."""
        with self._lock:
            db = self._db
            if db.in_transaction:
                yield db
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make several store calls one transaction: if the block raises, none of them happened."""
        with self._write():
            yield

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _slot_row(self, db: sqlite3.Connection, session_id: str, slot_id: str) -> tuple[Any, ...]:
        row = db.execute(
            f"SELECT {_SLOT_COLUMNS} FROM slots WHERE session_id = ? AND name = ? AND deleted_at IS NULL",
            (session_id, slot_id),
        ).fetchone()
        if row is None:
            known = [
                r[0]
                for r in db.execute("SELECT name FROM slots WHERE session_id = ? AND deleted_at IS NULL", (session_id,))
            ]
            raise SlotNotFound(slot_id, known)
        return tuple(row)

    def _live_parent_name(self, db: sqlite3.Connection, parent: int | None) -> str | None:
        """The nearest live ancestor: a deleted parent hands its children to its own parent."""
        while parent is not None:
            name, grandparent, deleted = db.execute(
                "SELECT name, parent, deleted_at FROM slots WHERE id = ?", (parent,)
            ).fetchone()
            if deleted is None:
                return str(name)
            parent = grandparent
        return None

    def _to_slot(self, db: sqlite3.Connection, row: tuple[Any, ...], current: int | None) -> Slot:
        key, name, parent, _fork_at, length, tokens, turns, config, created_at = row
        parent_name = self._live_parent_name(db, parent)
        meta = SlotMeta(name, parent_name, length, tokens, created_at, turns)
        return Slot(name, SlotConfig.from_dict(json.loads(config), parent_name), meta, key == current)

    def _current_key(self, db: sqlite3.Connection, session_id: str) -> int | None:
        row = db.execute("SELECT current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else row[0]

    def _segments(self, db: sqlite3.Connection, key: int, end: int | None = None) -> list[tuple[int, int, int]]:
        """(slot row, first position, end position) of each stretch of a history, root first."""
        segments = []
        row = db.execute("SELECT parent, fork_at, length FROM slots WHERE id = ?", (key,)).fetchone()
        parent, lo, hi = row
        if end is not None:
            hi = min(hi, end)
        while True:
            if lo < hi:
                segments.append((key, lo, hi))
            if parent is None:
                break
            hi = min(hi, lo)
            key = parent
            parent, lo = db.execute("SELECT parent, fork_at FROM slots WHERE id = ?", (key,)).fetchone()
        segments.reverse()
        return segments

    # -- sessions --------------------------------------------------------------------------

    def ensure_session(self, session_id: str) -> None:
        with self._lock:
            if self._current_key(self._db, session_id) is not None:
                return
            with self._write() as db:
                if self._current_key(db, session_id) is not None:
                    return  # another process created it while we waited
                now = time.time()
                db.execute("INSERT INTO sessions (id, created_at) VALUES (?, ?)", (session_id, now))
                key = self._insert_slot(db, session_id, DEFAULT_SLOT, SlotConfig(), now)
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))

    def sessions(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM sessions ORDER BY created_at, id")]

    def current_slot(self, session_id: str) -> str:
        with self._lock:
            row = self._db.execute(
                "SELECT s.name FROM sessions JOIN slots s ON s.id = sessions.current_slot WHERE sessions.id = ?",
                (session_id,),
            ).fetchone()
            return DEFAULT_SLOT if row is None else str(row[0])

    def set_current_slot(self, session_id: str, slot_id: str) -> None:
        with self._write() as db:
            key = self._slot_row(db, session_id, slot_id)[0]
            db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))

    # -- slots -----------------------------------------------------------------------------

    def slots(self, session_id: str) -> list[Slot]:
        with self._lock:
            db = self._db
            current = self._current_key(db, session_id)
            rows = db.execute(
                f"SELECT {_SLOT_COLUMNS} FROM slots WHERE session_id = ? AND deleted_at IS NULL "
                "ORDER BY created_at, id",
                (session_id,),
            ).fetchall()
            return [self._to_slot(db, row, current) for row in rows]

    def slot(self, session_id: str, slot_id: str) -> Slot:
        with self._lock:
            db = self._db
            return self._to_slot(db, self._slot_row(db, session_id, slot_id), self._current_key(db, session_id))

    def _insert_slot(
        self,
        db: sqlite3.Connection,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        now: float,
        parent: int | None = None,
        fork_at: int = 0,
        tokens: int = 0,
        turns: int = 0,
    ) -> int:
        try:
            cursor = db.execute(
                "INSERT INTO slots (session_id, name, parent, fork_at, length, tokens, turns, config, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    slot_id,
                    parent,
                    fork_at,
                    fork_at,
                    tokens,
                    turns,
                    json.dumps(config.to_dict(), ensure_ascii=False),
                    now,
                ),
            )
        except sqlite3.IntegrityError:
            raise SlotExists(slot_id) from None
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def create_slot(self, session_id: str, slot_id: str, config: SlotConfig, messages: Sequence[Message] = ()) -> Slot:
        with self._write() as db:
            now = time.time()
            key = self._insert_slot(db, session_id, slot_id, config, now)
            if messages:
                self._append(db, key, 0, 0, 0, 0, messages, {"kind": "preset"}, now)
            return self._to_slot(db, self._slot_row(db, session_id, slot_id), self._current_key(db, session_id))

    def derive_slot(
        self, session_id: str, slot_id: str, parent_id: str, config: SlotConfig, at: int | None = None
    ) -> Slot:
        with self._write() as db:
            parent_key, _, _, _, length, tokens, turns, _, _ = self._slot_row(db, session_id, parent_id)
            if at is not None and at != length:
                if not 0 <= at <= length:
                    raise StoreError(f"cannot fork {parent_id!r} at message {at}: it has {length}")
                tokens, turns = self._prefix_totals(db, parent_key, at)
                length = at
            self._insert_slot(db, session_id, slot_id, config, time.time(), parent_key, length, tokens, turns)
            return self._to_slot(db, self._slot_row(db, session_id, slot_id), self._current_key(db, session_id))

    def _prefix_totals(self, db: sqlite3.Connection, key: int, end: int) -> tuple[int, int]:
        """Tokens and last turn number of the first ``end`` messages of a history."""
        tokens = turns = 0
        for segment, lo, hi in self._segments(db, key, end):
            seg_tokens, seg_turn = db.execute(
                "SELECT COALESCE(SUM(tokens), 0), COALESCE(MAX(turn), 0) FROM messages"
                " WHERE slot = ? AND seq >= ? AND seq < ?",
                (segment, lo, hi),
            ).fetchone()
            tokens += seg_tokens
            turns = max(turns, seg_turn)
        return tokens, turns

    def update_config(self, session_id: str, slot_id: str, config: SlotConfig) -> Slot:
        with self._write() as db:
            key = self._slot_row(db, session_id, slot_id)[0]
            db.execute(
                "UPDATE slots SET config = ? WHERE id = ?", (json.dumps(config.to_dict(), ensure_ascii=False), key)
            )
            return self._to_slot(db, self._slot_row(db, session_id, slot_id), self._current_key(db, session_id))

    def rename_slot(self, session_id: str, old_id: str, new_id: str) -> Slot:
        if old_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be renamed; derive a copy under the new name")
        with self._write() as db:
            key = self._slot_row(db, session_id, old_id)[0]
            try:
                db.execute("UPDATE slots SET name = ? WHERE id = ?", (new_id, key))
            except sqlite3.IntegrityError:
                raise SlotExists(new_id) from None
            return self._to_slot(db, self._slot_row(db, session_id, new_id), self._current_key(db, session_id))

    def delete_slot(self, session_id: str, slot_id: str) -> None:
        if slot_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be deleted (a session always keeps it)")
        with self._write() as db:
            key = self._slot_row(db, session_id, slot_id)[0]
            if self._current_key(db, session_id) == key:
                default = self._slot_row(db, session_id, DEFAULT_SLOT)[0]
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (default, session_id))
            db.execute("UPDATE slots SET deleted_at = ? WHERE id = ?", (time.time(), key))
            # Drop rows no live slot can reach: this slot's, and tombstone ancestors' that
            # were kept only for it. A slot with derived slots stays as a tombstone.
            while key is not None:
                parent, deleted = db.execute("SELECT parent, deleted_at FROM slots WHERE id = ?", (key,)).fetchone()
                has_children = db.execute("SELECT 1 FROM slots WHERE parent = ? LIMIT 1", (key,)).fetchone()
                if deleted is None or has_children:
                    break
                db.execute("DELETE FROM messages WHERE slot = ?", (key,))
                db.execute("DELETE FROM turns WHERE slot = ?", (key,))
                db.execute("DELETE FROM slots WHERE id = ?", (key,))
                key = parent

    # -- messages and turns ----------------------------------------------------------------

    def messages(self, session_id: str, slot_id: str) -> list[Message]:
        with self._lock:
            db = self._db
            out: list[Message] = []
            for segment, lo, hi in self._segments(db, self._slot_row(db, session_id, slot_id)[0]):
                out.extend(
                    _messages_from_rows(
                        db.execute(
                            "SELECT role, content, tokens, extra FROM messages"
                            " WHERE slot = ? AND seq >= ? AND seq < ? ORDER BY seq",
                            (segment, lo, hi),
                        )
                    )
                )
            return out

    def turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        with self._lock:
            db = self._db
            out: list[TurnRecord] = []
            for segment, lo, hi in self._segments(db, self._slot_row(db, session_id, slot_id)[0]):
                out.extend(
                    TurnRecord(number, start, count, json.loads(info), created_at, (segment, number))
                    for number, start, count, info, created_at in db.execute(
                        "SELECT number, start, count, info, created_at FROM turns"
                        " WHERE slot = ? AND start >= ? AND start < ? ORDER BY start",
                        (segment, lo, hi),
                    )
                )
            return out

    def has_cell_turns(self, session_id: str, cell_id: str) -> bool:
        with self._lock:
            return (
                self._db.execute(
                    "SELECT 1 FROM turns JOIN slots ON slots.id = turns.slot"
                    " WHERE json_extract(turns.info, '$.cell.id') = ? AND slots.session_id = ? LIMIT 1",
                    (cell_id, session_id),
                ).fetchone()
                is not None
            )

    def append_turn(
        self, session_id: str, slot_id: str, messages: Sequence[Message], info: dict[str, Any]
    ) -> TurnRecord:
        if not messages:
            raise StoreError("a turn needs at least one message")
        with self._write() as db:
            key, _, _, _, length, tokens, turns, _, _ = self._slot_row(db, session_id, slot_id)
            return self._append(db, key, length, tokens, turns, turns + 1, messages, info, time.time())

    def _append(
        self,
        db: sqlite3.Connection,
        key: int,
        length: int,
        tokens: int,
        turns: int,
        number: int,
        messages: Sequence[Message],
        info: dict[str, Any],
        now: float,
    ) -> TurnRecord:
        db.executemany(
            "INSERT INTO messages (slot, seq, turn, role, content, tokens, extra, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (key, length + i, number, m.role, m.content, m.tokens, _extra_json(m), now)
                for i, m in enumerate(messages)
            ],
        )
        info_json = json.dumps(info, ensure_ascii=False)
        db.execute(
            "INSERT INTO turns (slot, number, start, count, info, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (key, number, length, len(messages), info_json, now),
        )
        db.execute(
            "UPDATE slots SET length = ?, tokens = ?, turns = ? WHERE id = ?",
            (length + len(messages), tokens + sum(m.tokens for m in messages), max(turns, number), key),
        )
        return TurnRecord(number, length, len(messages), info, now, (key, number))


def _create_private(path: Path) -> None:
    """Create the file (and its folder) readable by its owner only: it holds conversations."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with suppress(FileExistsError):  # created by another process meanwhile
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
