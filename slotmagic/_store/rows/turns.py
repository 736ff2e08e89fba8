"""Turns and histories: appending a turn (the concurrency rule) and reading a slot's history.

The concurrency rule: ``append_turn(base=...)`` checks, inside the write transaction that
appends, that the slot still holds the history the turn was made from, else ``SlotMoved``.
A turn appends a few rows and updates one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from ..._core.messages import Message
from ..._core.records import TurnInfo, TurnRecord
from ..._core.slots import SlotMode
from ..._errors import SlotMoved, SlotReadonly, StoreError
from ..base import CellTurn
from ..history import History, Tip
from ..postgres_schema import CELL_ID_SQL as POSTGRES_CELL_ID_SQL
from .cache import TURN_COLUMNS, SessionRows, SlotRow, tree_order, turn_record
from .common import Connection, Dialect
from .segments import SegmentRows

# How a turn's cell id is read in SQL (the turns_by_cell index's expression in both dialects).
CELL_ID_SQL: dict[Dialect, str] = {
    "sqlite": "json_extract(turns.info, '$.cell.id')",
    "postgresql": POSTGRES_CELL_ID_SQL,
}


class TurnRows(SegmentRows):
    """Turns and the histories they make."""

    # -- histories and turns ---------------------------------------------------------------

    def generation(self) -> int:
        with self._read():
            return self._generation

    def history(self, session_id: str, slot_id: str | None) -> History:
        with self._read() as db:
            rows = self._rows(db, session_id, every=False)
            return self._history(rows, self._row(rows, slot_id))

    def messages(self, session_id: str, slot_id: str) -> list[Message]:
        return self.history(session_id, slot_id).messages()

    def turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        return self.history(session_id, slot_id).turns()

    def tip(self, session_id: str, slot_id: str) -> Tip:
        with self._read() as db:
            row = self._row(self._rows(db, session_id, every=False), slot_id)
            return Tip(row.key, row.length, row.turns)

    def cell_turns(self, session_id: str, cell_id: str, slot_id: str) -> list[CellTurn]:
        with self._read() as db:
            found = db.execute(
                f"SELECT turns.slot, {', '.join(f'turns.{c}' for c in TURN_COLUMNS)} FROM turns"
                " JOIN slots ON slots.id = turns.slot"
                f" WHERE {CELL_ID_SQL[self._DIALECT]} = ? AND slots.session_id = ?"
                " ORDER BY turns.created_at, turns.slot, number",
                (cell_id, session_id),
            ).fetchall()
            if not found:
                return []
            rows = self._rows(db, session_id, every=False)  # the rows of the turns' slots, not all
            mine = self._pieces(rows, self._row(rows, slot_id))
            out = []
            for key, *got in found:
                record = turn_record(key, got)
                start = record.start
                held = any(p.key == key and p.lo <= start < p.hi for p in mine)
                owner = self._row_of(rows, key)
                assert owner is not None  # joined with its session's slots above
                if not owner.live and not held:  # the slots derived after it may hold it: all of them
                    rows = self._rows(db, session_id)
                home = owner.name if owner.live else slot_id if held else self._any_holder(rows, key, start)
                if home is not None:
                    out.append(CellTurn(record, owner.name if owner.live else None, home, held))
            return out

    def _any_holder(self, rows: SessionRows, key: int, start: int) -> str | None:
        """A live slot whose history holds position ``start`` of segment ``key``: a turn whose
        slot was deleted lives on in the slots derived after it."""
        for row in tree_order(rows):
            if any(p.key == key and p.lo <= start < p.hi for p in self._pieces(rows, row)):
                return row.name
        return None

    def unshared_turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            shared: dict[int, int] = {}  # segment -> how far other live slots' histories reach into it
            for other in rows.rows.values():
                if other.live and other.key != row.key:
                    for piece in self._pieces(rows, other):
                        shared[piece.key] = max(shared.get(piece.key, 0), piece.hi)
            out: list[TurnRecord] = []
            for piece in self._pieces(rows, row):
                out.extend(self.read_turns(piece.key, max(piece.lo, shared.get(piece.key, 0)), piece.hi))
            return out

    def append_turn(
        self,
        session_id: str,
        slot_id: str | None,
        messages: Sequence[Message],
        info: TurnInfo,
        *,
        base: Tip | None = None,
        writable: bool = False,
    ) -> TurnRecord:
        if not messages:
            raise StoreError("a turn needs at least one message")
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            row = self._row(rows, slot_id)
            if writable and row.slot_config(self._live_parent(rows, row)).mode is SlotMode.READONLY:
                raise SlotReadonly(row.name)
            if base is not None and base != Tip(row.key, row.length, row.turns):
                raise SlotMoved(row.name)
            return self._append(db, row, row.turns + 1, messages, info, time.time())

    def _append(
        self,
        db: Connection,
        row: SlotRow,
        number: int,
        messages: Sequence[Message],
        info: TurnInfo,
        now: float,
    ) -> TurnRecord:
        start = row.length
        if info.user is None and self.user is not None:
            info = info.replace(user=self.user)
        self._send(
            db,
            "INSERT INTO messages (slot, seq, turn, role, content, tokens, extra, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (row.key, start + i, number, m.role, self._text_in(m.content), m.tokens, _extra_json(m), now)
                for i, m in enumerate(messages)
            ],
        )
        self._send(
            db,
            "INSERT INTO turns (slot, number, start, count, info, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(row.key, number, start, len(messages), _info_json(info), now)],
        )
        length, tokens, turns = (
            start + len(messages),
            row.tokens + sum(m.tokens for m in messages),
            max(row.turns, number),
        )
        self._send(
            db, "UPDATE slots SET length = ?, tokens = ?, turns = ? WHERE id = ?", [(length, tokens, turns, row.key)]
        )
        row.length, row.tokens, row.turns = length, tokens, turns
        record = TurnRecord(number, start, len(messages), info, now, (row.key, number))
        segment = self._segments.get(row.key)
        if segment is not None:  # keep what is cached whole; a gap would be read again anyway
            if segment.messages and segment.end == start:
                segment.messages.extend(messages)
            if segment.turns_until == start:
                segment.turns.append(record)
                segment.turns_until = length
        return record


# One encoder for every turn: json.dumps with any option builds a new one per call.
_to_json = json.JSONEncoder(ensure_ascii=False).encode


def _extra_json(message: Message) -> str | None:
    extra = message.extra()
    return None if extra is None else _to_json(extra)


def _info_json(info: TurnInfo) -> str:
    return _to_json(info.to_dict())
