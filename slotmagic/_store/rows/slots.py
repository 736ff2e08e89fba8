"""Sessions, slots and the slot tree: creating, deriving, renaming and deleting slots.

A slot is a branch that shares its parent's first ``fork_at`` messages and owns the rows
from there on, so deriving writes one row whatever the history's length.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import ClassVar

from ..._core.messages import Message
from ..._core.records import TurnInfo
from ..._core.slots import DEFAULT_SLOT, Slot, SlotConfig
from ..._errors import ConfigError, ProtectedSlot, SlotExists
from ..history import Piece
from .cache import SessionRows, SlotRow, tree_order
from .common import Connection
from .turns import TurnRows

# Every table that holds rows of a slot (keyed by ``slot``), children before parents.
SLOT_TABLES = ("messages", "turns", "compactions", "token_counts", "context_events")


class SlotRows(TurnRows):
    """Sessions and their slots (a slot made with messages stores them as its first turn)."""

    # The error a unique index raises (a slot name taken by another connection meanwhile).
    _UNIQUE_VIOLATION: ClassVar[tuple[type[Exception], ...]] = ()

    # -- sessions --------------------------------------------------------------------------

    def ensure_session(self, session_id: str) -> None:
        with self._read() as db:
            if session_id in self._sessions:
                return
            # one row, not the session's slot rows: opening a session of 5,000 slots reads them
            # when something first needs them, not here
            found = db.execute("SELECT current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if found is not None and found[0] is not None:
                return
        with self._write() as db:
            if self._rows(db, session_id).current is not None:
                return  # another process created it while we waited
            now = time.time()
            db.execute("INSERT INTO sessions (id, created_at) VALUES (?, ?)", (session_id, now))
            key = self._insert_slot(db, session_id, DEFAULT_SLOT, SlotConfig(), now)
            db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
            self._sessions.pop(session_id, None)  # read again, whole

    def sessions(self) -> list[str]:
        with self._read() as db:
            return [r[0] for r in db.execute("SELECT id FROM sessions ORDER BY created_at, id")]

    def current_slot(self, session_id: str) -> str:
        with self._read() as db:
            rows = self._rows(db, session_id, every=False)
            row = rows.rows.get(rows.current) if rows.current is not None else None
            return DEFAULT_SLOT if row is None else row.name

    def set_current_slot(self, session_id: str, slot_id: str) -> None:
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            key = self._row(rows, slot_id).key
            if rows.current != key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
                rows.current = key

    # -- slots -----------------------------------------------------------------------------

    def slots(self, session_id: str) -> list[Slot]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            return [self._to_slot(rows, row) for row in tree_order(rows)]

    def slot(self, session_id: str, slot_id: str | None) -> Slot:
        with self._read() as db:
            rows = self._rows(db, session_id, every=False)
            return self._to_slot(rows, self._row(rows, slot_id))

    def has_slot(self, session_id: str, slot_id: str) -> bool:
        with self._read() as db:
            return self._live(self._rows(db, session_id, every=False), slot_id) is not None

    def _insert_slot(
        self,
        db: Connection,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        now: float,
        parent: int | None = None,
        fork_at: int = 0,
        tokens: int = 0,
        turns: int = 0,
    ) -> int:
        config_dict = config.to_dict()
        try:
            key = int(
                db.execute(
                    "INSERT INTO slots (session_id, name, parent, fork_at, length, tokens, turns, config, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (session_id, slot_id, parent, fork_at, fork_at, tokens, turns, json.dumps(config_dict), now),
                ).fetchall()[0][0]
            )
        except self._UNIQUE_VIOLATION:
            raise SlotExists(slot_id) from None
        rows = self._sessions.get(session_id)
        if rows is not None:
            rows.rows[key] = SlotRow(
                key=key, name=slot_id, parent=parent, fork_at=fork_at, length=fork_at, tokens=tokens, turns=turns,
                stored_config=config_dict, created_at=now, deleted_at=None,
            )  # fmt: skip
            rows.by_name[slot_id] = key
        self._created[key] = now
        self._segments.pop(key, None)  # an id SQLite handed out again
        return key

    def create_slot(
        self,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        messages: Sequence[Message] = (),
        *,
        exist_ok: bool = False,
    ) -> tuple[Slot, bool]:
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            if self._live(rows, slot_id) is not None:
                if exist_ok:
                    return self._to_slot(rows, self._row(rows, slot_id)), False
                raise SlotExists(slot_id)
            now = time.time()
            key = self._insert_slot(db, session_id, slot_id, config, now)
            row = rows.rows[key]
            if messages:
                self._append(db, row, 0, messages, TurnInfo(kind="preset"), now)
            return self._to_slot(rows, row), True

    def derive_slot(
        self,
        session_id: str,
        slot_id: str,
        parent_id: str,
        config: SlotConfig,
        at: int | None = None,
        *,
        exist_ok: bool = False,
    ) -> tuple[Slot, bool]:
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            if self._live(rows, slot_id) is not None:
                if exist_ok:
                    return self._to_slot(rows, self._row(rows, slot_id)), False
                raise SlotExists(slot_id)
            parent = self._row(rows, parent_id)
            length, tokens, turns = parent.length, parent.tokens, parent.turns
            if at is not None and at != length:
                self._check_fork_point(rows, parent, at)
                tokens, turns = self._prefix_totals(db, self._pieces(rows, parent, at))
                length = at
            key = self._insert_slot(db, session_id, slot_id, config, time.time(), parent.key, length, tokens, turns)
            return self._to_slot(rows, rows.rows[key]), True

    def _check_fork_point(self, rows: SessionRows, parent: SlotRow, at: int) -> None:
        """A fork point is a whole turn boundary of the parent's history."""
        if not 0 <= at <= parent.length:
            raise ConfigError(
                f"cannot fork {parent.name!r} at message {at}: it holds {parent.length} messages "
                f"(use 0 to {parent.length})"
            )
        # A boundary is where a piece or a turn starts; only the piece holding `at` can say.
        piece = next(p for p in self._pieces(rows, parent) if p.lo <= at < p.hi)
        if (
            at == piece.lo
            or self._db.execute("SELECT 1 FROM turns WHERE slot = ? AND start = ?", (piece.key, at)).fetchone()
        ):
            return
        before, after = self._db.execute(
            "SELECT MAX(CASE WHEN start < ? THEN start END), MIN(CASE WHEN start > ? THEN start END)"
            " FROM turns WHERE slot = ? AND start >= ? AND start < ?",
            (at, at, piece.key, piece.lo, piece.hi),
        ).fetchone()
        lower = piece.lo if before is None else before
        upper = piece.hi if after is None else after
        raise ConfigError(
            f"cannot fork {parent.name!r} at message {at}: that is inside a turn; "
            f"fork at a turn boundary such as {lower} or {upper}"
        )

    def _prefix_totals(self, db: Connection, pieces: Sequence[Piece]) -> tuple[int, int]:
        """Tokens and last turn number of the messages the pieces hold."""
        tokens = turns = 0
        for piece in pieces:
            piece_tokens, piece_turn = db.execute(
                "SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT), COALESCE(MAX(turn), 0) FROM messages"
                " WHERE slot = ? AND seq >= ? AND seq < ?",
                (piece.key, piece.lo, piece.hi),
            ).fetchone()
            tokens += piece_tokens
            turns = max(turns, piece_turn)
        return tokens, turns

    def update_config(self, session_id: str, slot_id: str, config: SlotConfig) -> Slot:
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            row = self._row(rows, slot_id)
            config_dict = config.to_dict()
            db.execute("UPDATE slots SET config = ? WHERE id = ?", (json.dumps(config_dict), row.key))
            row.config, row.parsed = config_dict, None
            return self._to_slot(rows, row)

    def rename_slot(self, session_id: str, old_id: str, new_id: str) -> Slot:
        if old_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be renamed; derive a copy under the new name")
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            row = self._row(rows, old_id)
            if new_id != old_id and self._live(rows, new_id) is not None:
                raise SlotExists(new_id)
            db.execute("UPDATE slots SET name = ? WHERE id = ?", (new_id, row.key))
            del rows.by_name[old_id]
            row.name = new_id
            rows.by_name[new_id] = row.key
            return self._to_slot(rows, row)

    def delete_slot(self, session_id: str, slot_id: str) -> None:
        if slot_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be deleted (a session always keeps it)")
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if rows.current == row.key:
                default = self._row(rows, DEFAULT_SLOT).key
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (default, session_id))
                rows.current = default
            now = time.time()
            db.execute("UPDATE slots SET deleted_at = ? WHERE id = ?", (now, row.key))
            row.deleted_at = now
            del rows.by_name[slot_id]
            # Drop rows no live slot can reach: this slot's, and tombstone ancestors' that
            # were kept only for it. A slot with derived slots stays as a tombstone.
            current: SlotRow | None = row
            while current is not None and not current.live:
                if any(r.parent == current.key for r in rows.rows.values()):
                    break
                for table in SLOT_TABLES:
                    db.execute(f"DELETE FROM {table} WHERE slot = ?", (current.key,))
                db.execute("DELETE FROM slots WHERE id = ?", (current.key,))
                del rows.rows[current.key]
                self._segments.pop(current.key, None)
                current = None if current.parent is None else rows.rows[current.parent]
