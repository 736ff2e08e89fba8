"""Undo and redo: a slot's id moves to a new row forked before the undone turns, and the old
row stays hidden (``undo`` set on it, see migrations v7) until redo brings it back or gc
forgets it. Nothing is deleted by an undo.
"""

from __future__ import annotations

import json
import time

from ..._core.slots import SlotConfig
from ..._errors import ConfigError
from ..base import UndoStep
from .cache import SLOT_COLUMNS, SessionRows, SlotRow, replacement
from .common import Connection
from .slots import SlotRows

# Whether any row of the session was hidden by an undo (an undo step may be anyone's).
_ANY_UNDONE = "SELECT 1 FROM slots WHERE session_id = ? AND undo IS NOT NULL LIMIT 1"
# The row that takes a slot's name on an undo is given these, and keeps every other column of the
# row it hides (a column added later too), but its id, deleted_at and undo: it is a live row of its own.
_UNDO_SETS = ("session_id", "name", "parent", "fork_at", "length", "tokens", "turns", "config", "created_at")
_UNDO_KEEPS = [c for c in SLOT_COLUMNS.values() if c not in (*_UNDO_SETS, "id", "deleted_at", "undo")]
_UNDO_ROW = (
    f"INSERT INTO slots ({', '.join([*_UNDO_SETS, *_UNDO_KEEPS])})"
    f" SELECT {', '.join(['?'] * len(_UNDO_SETS) + _UNDO_KEEPS)} FROM slots WHERE id = ? RETURNING id"
)


class UndoRows(SlotRows):
    """``%slot undo`` and ``%slot redo``, and the steps kept for them."""

    def _undo_step(self, rows: SessionRows, hidden: SlotRow, slot: str, repeated: bool = False) -> UndoStep:
        assert hidden.undo is not None and hidden.deleted_at is not None
        undo = hidden.undo
        return UndoStep(
            slot,
            int(undo["turns"]),
            int(undo["at"]),
            hidden.length,
            undo.get("cell"),
            hidden.deleted_at,
            self._history(rows, hidden),
            repeated,
        )

    def undo(self, session_id: str, slot_id: str | None, turns: int, *, cell: str | None = None) -> UndoStep:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if cell is not None:
                for hidden in rows.rows.values():
                    if hidden.undo is not None and hidden.undo.get("cell") == cell and replacement(rows, hidden) is row:
                        return self._undo_step(rows, hidden, row.name, repeated=True)
            records = [t for t in self._history(rows, row).turns() if t.info.kind != "preset"]
            if not 1 <= turns <= len(records):
                have = f"only {len(records)}" if records else "no"
                raise ConfigError(f"cannot undo {turns} turns of slot {row.name!r}: it has {have} turns to undo")
            at = records[-turns].start
            tokens, last = self._prefix_totals(db, self._pieces(rows, row, at))
            now = time.time()
            # Hide the old row first: a slot's name is unique among live rows.
            db.execute("UPDATE slots SET deleted_at = ? WHERE id = ?", (now, row.key))
            made = (session_id, row.name, row.key, at, at, tokens, last, json.dumps(row.config), now, row.key)
            key = int(db.execute(_UNDO_ROW, made).fetchall()[0][0])
            undo = {"by": key, "turns": turns, "at": at, "cell": cell}
            db.execute("UPDATE slots SET undo = ? WHERE id = ?", (json.dumps(undo), row.key))
            if rows.current == row.key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
            self._sessions.pop(session_id, None)
            rows = self._rows(db, session_id)
            return self._undo_step(rows, rows.rows[row.key], row.name)

    def redo(self, session_id: str, slot_id: str | None, *, branch: str | None = None) -> UndoStep:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if branch is not None:
                return self._branch_undone(db, session_id, rows, row, branch)
            hidden = next((h for h in rows.rows.values() if h.undo is not None and h.undo.get("by") == row.key), None)
            if hidden is None:
                raise ConfigError(f"nothing to redo in slot {row.name!r}: it has no undo step to return from")
            if row.length != row.fork_at:
                raise ConfigError(
                    f"cannot redo in slot {row.name!r}: it has had turns since the undo; "
                    "%slot redo --as NAME makes the undone turns a branch of their own"
                )
            step = self._undo_step(rows, hidden, row.name)
            # What the slot gathered since the undo (pins, working context, compactions) stays.
            for table in ("marks", "context_events", "compactions"):
                offset = db.execute(f"SELECT COALESCE(MAX(number), 0) FROM {table} WHERE slot = ?", (hidden.key,))
                db.execute(
                    f"UPDATE {table} SET slot = ?, number = number + ? WHERE slot = ?",
                    (hidden.key, offset.fetchone()[0], row.key),
                )
            db.execute("UPDATE slots SET parent = ? WHERE parent = ?", (hidden.key, row.key))
            db.execute("DELETE FROM token_counts WHERE slot = ?", (row.key,))
            db.execute("DELETE FROM slots WHERE id = ?", (row.key,))
            db.execute(
                "UPDATE slots SET deleted_at = NULL, undo = NULL, name = ?, config = ? WHERE id = ?",
                (row.name, json.dumps(row.config), hidden.key),
            )
            if rows.current == row.key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (hidden.key, session_id))
            self._sessions.pop(session_id, None)
            self._segments.pop(row.key, None)
            segment = self._segments.get(hidden.key)
            if segment is not None:
                segment.compactions = segment.marks = segment.context = None  # some were just moved here
            return step

    def _branch_undone(self, db: Connection, session_id: str, rows: SessionRows, row: SlotRow, branch: str) -> UndoStep:
        steps = [h for h in rows.rows.values() if h.undo is not None and replacement(rows, h) is row]
        if not steps:
            raise ConfigError(f"slot {row.name!r} has no undone turns to make a branch of")
        hidden = max(steps, key=lambda h: h.deleted_at or 0.0)
        step = self._undo_step(rows, hidden, row.name)
        # A slot on the hidden row's whole history; the hidden row stays, as a tombstone does.
        self._insert_slot(
            db,
            session_id,
            branch,
            SlotConfig.from_dict(hidden.config, row.name),
            time.time(),
            hidden.key,
            hidden.length,
            hidden.tokens,
            hidden.turns,
        )
        return step

    def undo_steps(self, session_id: str, slot_id: str | None) -> list[UndoStep]:
        with self._read() as db:
            rows = self._rows(db, session_id, every=False)
            row = self._row(rows, slot_id)
            if rows.partial_of is not None:  # a cell's first run asks: one look, not every slot row
                if db.execute(_ANY_UNDONE, (session_id,)).fetchone() is None:
                    return []
                rows = self._rows(db, session_id)
                row = self._row(rows, slot_id)
            steps = [
                self._undo_step(rows, hidden, row.name)
                for hidden in rows.rows.values()
                if hidden.undo is not None and replacement(rows, hidden) is row
            ]
            return sorted(steps, key=lambda s: s.created_at, reverse=True)
