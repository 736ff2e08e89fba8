"""The reads a ``History`` makes, served from the segment cache: messages, turns, the first
system message, compactions, working-context changes, pins, token counts.

Stored messages never change, so a cached segment only ever grows: a turn appends to it,
and rows another connection appended are read from where the cache ends.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

from ..._core.compaction import Compaction
from ..._core.context import ContextEvent
from ..._core.messages import Message
from ..._core.records import TurnRecord
from ..._errors import DamagedRecord
from ..history import MARKS, History, Mark, Tip
from ..postgres_schema import CACHED_SQL as POSTGRES_CACHED_SQL
from .cache import TURN_COLUMNS, Segment, SessionRows, SlotRow, turn_record
from .common import MESSAGE_COLUMNS, Dialect, RowsBase

# A turn some of whose input the provider's prompt cache served (the budget's savings line): the
# condition of the turns_cached index to the letter (migrations.py v10, postgres_schema.py v4).
CACHED_SQL: dict[Dialect, str] = {
    "sqlite": "COALESCE(json_extract(info, '$.usage.cached_tokens'), 0) > 0",
    "postgresql": POSTGRES_CACHED_SQL,
}


Annotation = Literal["marks", "compactions", "context"]

_ANNOTATED_AT_ONCE = 64  # segments whose annotations one statement reads, at most


@lru_cache(maxsize=_ANNOTATED_AT_ONCE)
def _annotations_sql(count: int) -> str:
    """The marks (kind 0), compactions (1) and working-context changes (2) of ``count``
    segments, each kind and segment in number order."""
    keys = ", ".join("?" * count)
    return (
        f"SELECT 0, slot, number, position, mark, CAST(NULL AS INTEGER), created_at FROM marks WHERE slot IN ({keys})"
        " UNION ALL SELECT 1, slot, number, at, record, CAST(NULL AS INTEGER), created_at FROM compactions"
        f" WHERE slot IN ({keys})"
        f" UNION ALL SELECT 2, slot, number, at, event, turn, created_at FROM context_events WHERE slot IN ({keys})"
        " ORDER BY 1, 2, 3"
    )


class SegmentRows(RowsBase):
    """A ``SegmentReader`` over the store's cache: what histories read."""

    # -- segments (History reads through these) --------------------------------------------

    def _segment(self, key: int, lo: int) -> Segment:
        self._drop_lost()  # before the segment is taken: not after, to be filled outside the caches
        segment = self._segments.get(key)
        if segment is not None and key in self._unverified:
            # Another connection wrote to its session since it was read: kept only if its slot
            # row is still the one it was read from (not removed, nor removed and its id reused).
            self._unverified.discard(key)
            if self._created_at(key) != segment.created_at:
                del self._segments[key]
                segment = None
        if segment is None:
            segment = Segment(self._created_at(key), lo, [])
            self._segments[key] = segment
        return segment

    def _created_at(self, key: int) -> float:
        """When slot row ``key`` was made (0.0: there is none): as its session's rows were last
        read (every history's rows were, and again after another connection's write to them),
        else asked."""
        created = self._created.get(key)
        if created is None:
            found = self._db.execute("SELECT created_at FROM slots WHERE id = ?", (key,)).fetchone()
            created = found[0] if found else 0.0
        return created

    def _load(self, key: int, lo: int, hi: int) -> list[Message]:
        return self._messages(
            self._db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE slot = ? AND seq >= ? AND seq < ? ORDER BY seq",
                (key, lo, hi),
            )
        )

    def read_messages(self, key: int, lo: int, hi: int) -> list[Message]:
        with self._lock:
            segment = self._segment(key, lo)
            if not segment.messages:
                segment.start = lo
                segment.messages = self._load(key, lo, hi)
            else:
                if lo < segment.start:
                    segment.messages[:0] = self._load(key, lo, segment.start)
                    segment.start = lo
                if hi > segment.end:
                    segment.messages.extend(self._load(key, segment.end, hi))
            return segment.messages[lo - segment.start : hi - segment.start]

    def read_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        with self._lock:
            segment = self._segment(key, lo)
            if hi > segment.turns_until:
                segment.turns.extend(
                    turn_record(key, got)
                    for got in self._db.execute(
                        f"SELECT {', '.join(TURN_COLUMNS)} FROM turns"
                        " WHERE slot = ? AND start >= ? AND start < ? ORDER BY start",
                        (key, segment.turns_until, hi),
                    )
                )
                segment.turns_until = hi
            starts = [t.start for t in segment.turns]
            return segment.turns[bisect.bisect_left(starts, lo) : bisect.bisect_left(starts, hi)]

    def read_cached_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        """``read_turns`` less the turns no prompt cache served: only those are decoded, so a
        budget's savings line costs what caching did, not every turn ever stored."""
        with self._lock:
            segment = self._segment(key, lo)
            if hi > segment.cached_until:
                start = segment.cached_until
                if segment.turns_until >= hi:  # decoded already: no query
                    new = [t for t in segment.turns if start <= t.start < hi]
                    segment.cached.extend(t for t in new if t.info.usage is not None and t.info.usage.cached_tokens)
                else:
                    segment.cached.extend(
                        turn_record(key, got)
                        for got in self._db.execute(
                            f"SELECT {', '.join(TURN_COLUMNS)} FROM turns"
                            " WHERE slot = ? AND start >= ? AND start < ?"
                            f" AND {CACHED_SQL[self._DIALECT]} ORDER BY start",
                            (key, start, hi),
                        )
                    )
                segment.cached_until = hi
            return [t for t in segment.cached if lo <= t.start < hi]

    def read_first_system(self, key: int, lo: int, hi: int) -> tuple[int, Message] | None:
        with self._lock:
            segment = self._segment(key, lo)
            found = segment.first_system
            if found is None and hi > segment.system_until:
                row = self._db.execute(
                    f"SELECT seq, {MESSAGE_COLUMNS} FROM messages"
                    " WHERE slot = ? AND role = 'system' AND seq >= ? AND seq < ? ORDER BY seq LIMIT 1",
                    (key, max(lo, segment.system_until), hi),
                ).fetchone()
                segment.system_until = hi
                if row is not None:
                    found = segment.first_system = (row[0], self._messages([row[1:]])[0])
            return found if found is not None and lo <= found[0] < hi else None

    def read_compactions(self, key: int, hi: int, before: float | None) -> list[Compaction]:
        with self._lock:
            segment = self._segment(key, 0)
            if segment.compactions is None:
                self._read_annotations(key, "compactions")
                assert segment.compactions is not None
            return [c for c in segment.compactions if c.at <= hi and (before is None or c.created_at < before)]

    def read_context(self, key: int, hi: int, before: float | None) -> list[ContextEvent]:
        # Cached per segment as marks are (every view reads them); dropped when anyone writes some.
        with self._lock:
            segment = self._segment(key, 0)
            if segment.context is None:
                self._read_annotations(key, "context")
                assert segment.context is not None
            return [e for e in segment.context if e.at <= hi and (before is None or e.created_at < before)]

    def read_marks(self, key: int, hi: int, before: float | None) -> list[tuple[int, Mark]]:
        # Cached per segment (every view reads them); dropped when another connection writes.
        with self._lock:
            segment = self._segment(key, 0)
            if segment.marks is None:
                self._read_annotations(key, "marks")
                assert segment.marks is not None
            return [(p, m) for p, m, at in segment.marks if p < hi and (before is None or at < before)]

    def _read_annotations(self, key: int, wanted: Annotation) -> None:
        """Read the marks, compactions and working-context changes of segment ``key`` and of
        the other segments of its session that miss some (up to ``_ANNOTATED_AT_ONCE``), in
        one statement: a history reads all three for each row of its chain, and after another
        kernel's turn every segment of that session misses them. Only ``wanted`` of ``key``
        raises when it cannot be read; any other that cannot is left to be read when asked."""
        keys = [key]
        rows = next((r for r in self._sessions.values() if key in r.rows), None)
        if rows is not None:  # the segments read so far, not every row of the session: a few of 10,000
            for other, segment in self._segments.items():
                if (
                    other != key
                    and other in rows.rows
                    and None in (segment.marks, segment.compactions, segment.context)
                ):
                    keys.append(other)
                    if len(keys) == _ANNOTATED_AT_ONCE:
                        break
        found: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
        for kind, slot, number, at, text, turn, created_at in self._db.execute(_annotations_sql(len(keys)), keys * 3):
            found.setdefault((kind, slot), []).append((number, at, text, turn, created_at))
        for slot in keys:
            segment = self._segments[slot]
            if segment.marks is None:
                marks = found.get((0, slot), [])
                segment.marks = [(at, mark, created_at) for _, at, mark, _, created_at in marks if mark in MARKS]
            try:
                if segment.compactions is None:
                    segment.compactions = [
                        Compaction.from_dict(json.loads(record), created_at, (slot, number))
                        for number, _, record, _, created_at in found.get((1, slot), [])
                    ]
            except Exception:
                if (slot, wanted) == (key, "compactions"):
                    raise
            try:
                if segment.context is None:
                    segment.context = [
                        ContextEvent.from_dict(json.loads(event), turn, at, created_at, (slot, number))
                        for number, at, event, turn, created_at in found.get((2, slot), [])
                    ]
            except (ValueError, TypeError, AttributeError) as exc:
                if (slot, wanted) == (key, "context"):
                    why = " ".join(str(exc).split())[:120]
                    raise DamagedRecord(f"a working-context change cannot be read ({why})", str(key)) from None

    def read_counts(self, key: int, lo: int, hi: int, encoding: str) -> list[int | None]:
        with self._lock:
            known = self._segment(key, lo).counts.setdefault(encoding, {})
            if any(p not in known for p in range(lo, hi)):
                known.update(
                    self._db.execute(
                        "SELECT seq, tokens FROM token_counts WHERE slot = ? AND encoding = ? AND seq >= ? AND seq < ?",
                        (key, encoding, lo, hi),
                    ).fetchall()
                )
            return [known.get(p) for p in range(lo, hi)]

    def write_counts(self, key: int, lo: int, counts: Sequence[int], encoding: str) -> None:
        if self.viewing:  # a view writes nothing: the counts it made are kept for this process
            with self._lock:
                self._segment(key, lo).counts.setdefault(encoding, {}).update((lo + i, n) for i, n in enumerate(counts))
            return
        with self._write() as db:
            self._quiet = True
            db.executemany(
                "INSERT INTO token_counts (slot, encoding, seq, tokens) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (slot, encoding, seq) DO UPDATE SET tokens = excluded.tokens",
                [(key, encoding, lo + i, n) for i, n in enumerate(counts)],
            )
            self._segment(key, lo).counts.setdefault(encoding, {}).update((lo + i, n) for i, n in enumerate(counts))

    def _history(self, rows: SessionRows, row: SlotRow) -> History:
        tip, slot = Tip(row.key, row.length, row.turns), self._to_slot(rows, row)
        pieces, chain = self._pieces(rows, row), self._chain(rows, row)
        return History(pieces, self, tip, slot, chain=chain, generation=self._generation)
