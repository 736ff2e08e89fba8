"""The slots as the tree and the sidebar show them: plain values, and each slot's last message.

``slots()`` makes a ``Slot`` (a config, a meta, a checked id) of each row; a tree of 10,000
slots needs a few values of each row, read straight from the cached slot rows (one statement
when they are not read yet), and each slot's last question: where each row's own last one is,
with it, comes from one more statement for the whole session. A slot with no question of its
own since its fork has its parent's (read once for all the branches that share it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..._core.messages import Message
from ..base import TreeSlot
from .cache import SessionRows, SlotRow, live_ancestor, tree_order
from .common import Connection
from .segments import SegmentRows


class TreeRows(SegmentRows):
    """The slots as the tree shows them, and the last message of a role in many slots."""

    def tree_slots(self, session_id: str, *, questions: bool = False) -> tuple[list[TreeSlot], list[str | None]]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            order = tree_order(rows)
            current, by_key, new = rows.current, rows.rows, tuple.__new__
            kinds: dict[str, tuple[str, str]] = {}  # config text -> (mode, source kind)
            out = []
            for row in order:
                parent = None if row.parent is None else by_key[row.parent]
                if parent is not None and parent.deleted_at is not None:  # deleted or undone
                    parent = live_ancestor(rows, row)
                parent_name = None if parent is None else parent.name
                # most rows hold one of a few config texts: each text's mode and source kind made once
                stored = row.stored_config
                kind = kinds.get(stored) if isinstance(stored, str) else None
                if kind is None:
                    config = row.slot_config(parent_name)
                    kind = (config.mode.value, config.source.kind)
                    if isinstance(stored, str):
                        kinds[stored] = kind
                # made as a tuple is (TreeSlot(...) is a Python call, 3x the time)
                out.append(
                    new(
                        TreeSlot, (row.name, parent_name, kind[0], kind[1], row.length, row.tokens, row.turns,
                        row.fork_at, row.key == current, row.created_at),
                    )
                )  # fmt: skip
            if not questions:
                return out, []
            return out, self._last_of(db, session_id, rows, order, "user", texts=True)

    def last_messages(self, session_id: str, slot_ids: Iterable[str], role: str) -> dict[str, Message | None]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            by_name, by_key = rows.by_name, rows.rows
            # by name at once (a tree asks for 10,000), else through _row, which says what is unknown
            asked = {
                slot_id: by_key[by_name[slot_id]] if slot_id in by_name else self._row(rows, slot_id)
                for slot_id in slot_ids
            }
            return dict(zip(asked, self._last_of(db, session_id, rows, list(asked.values()), role), strict=True))

    def _last_of(
        self, db: Connection, session_id: str, rows: SessionRows, asked: list[SlotRow], role: str, texts: bool = False
    ) -> list[Any]:
        """The last message of ``role`` in the history of each row of ``asked`` (with ``texts``,
        its content alone: no message is made, and a tree asks for 10,000): the row's own last
        one (``_own_last``), else the one before its fork point in its parent's, and so on up;
        a stretch of history several rows share is looked at once."""
        if not asked:
            return []
        tops = self._own_last(db, session_id, rows, asked, role, texts)
        known: dict[tuple[int, int], Any] = {}  # (row key, hi) -> the answer there

        def walk(row: SlotRow | None, hi: int) -> Any:
            """The last one below ``hi`` in the row's messages, else in its ancestors'."""
            walked: list[tuple[int, int]] = []
            answer = None
            while row is not None and hi > 0:
                step = (row.key, hi)
                if step in known:
                    answer = known[step]
                    break
                walked.append(step)
                top = tops.get(row.key)
                if top is not None and top[0] < hi:
                    answer = top[1]
                    break
                if top is not None and hi > row.fork_at:  # its last one is past ``hi``: walk back
                    below = self._last_below(row, hi, role)
                    if below is not None:
                        answer = below.content if texts else below
                        break
                hi = min(hi, row.fork_at)
                row = None if row.parent is None else rows.rows[row.parent]
            for step in walked:
                known[step] = answer
            return answer

        out: list[Any] = []
        for row in asked:
            top = tops.get(row.key)
            if top is not None and top[0] < row.length:  # most rows: their own last one
                out.append(top[1])
            elif top is None and row.parent is not None:  # none of its own: its parent's before the fork
                step = (row.parent, min(row.length, row.fork_at))  # its siblings' too, most often
                out.append(known[step] if step in known else walk(rows.rows[row.parent], step[1]))
            else:
                out.append(walk(row, row.length))
        return out

    def _own_last(
        self, db: Connection, session_id: str, rows: SessionRows, asked: list[SlotRow], role: str, texts: bool
    ) -> dict[int, tuple[int, Any]]:
        """Row key -> (position, message, or its content with ``texts``): the last message of
        ``role`` among each row's own, for the rows of ``asked`` and their ancestors, in one
        statement (each found backwards along the primary key, stopping at the first). A few
        slots' rows are named; past 400 (the statement's bound values stay few), every row of
        the session is read."""
        keys: set[int] = set()
        for row in asked if len(asked) <= 400 else ():
            up: SlotRow | None = row
            while up is not None and up.key not in keys:
                keys.add(up.key)
                up = None if up.parent is None else rows.rows[up.parent]
        named = 0 < len(keys) <= 400
        found = db.execute(
            "SELECT s.id, m.seq, m.role, m.content, m.tokens, m.extra FROM slots s JOIN messages m"
            " ON m.slot = s.id AND m.seq ="
            " (SELECT l.seq FROM messages l WHERE l.slot = s.id AND l.role = ? ORDER BY l.seq DESC LIMIT 1)"
            + (f" WHERE s.id IN ({', '.join('?' for _ in keys)})" if named else " WHERE s.session_id = ?")
            + " AND s.length > s.fork_at",  # a row with no message of its own has none of them
            [role, *keys] if named else [role, session_id],
        ).fetchall()
        text_out = self._text_out
        messages = [text_out(got[3]) for got in found] if texts else self._messages([got[2:] for got in found])
        return {got[0]: (got[1], message) for got, message in zip(found, messages, strict=True)}

    def _last_below(self, row: SlotRow, hi: int, role: str) -> Message | None:
        """The last message of ``role`` among the row's own messages below ``hi``, read back
        from ``hi`` a chunk at a time (a branch forked before its parent's last question)."""
        lo, end, chunk = row.fork_at, hi, 8
        while end > lo:
            start = max(lo, end - chunk)
            message = next((m for m in reversed(self.read_messages(row.key, start, end)) if m.role == role), None)
            if message is not None:
                return message
            end, chunk = start, chunk * 4
        return None
