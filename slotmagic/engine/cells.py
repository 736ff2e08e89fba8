"""Cells run again: the replay rule for every magic, in one place.

*Running a cell again with unchanged text leaves the session as that cell left it the first
time.* A magic run from a notebook cell is named by a key (its cell, its own text, and which
of the cell's identical lines it is: see ``magics/identity.py``); what it did is kept as a
:class:`~slotmagic.core.cells.CellRecord`. When a cell runs again:

- a command that **changes** the session and has a record replays it: the caller shows the
  recorded outputs, the current slot it left is made current again, nothing else is written
  and no model is called. Edited text is another key: it acts anew.
- a command that **reads** the session shows its recorded outputs (the session *as of its
  cell*) while the cells come in the order they first ran since the kernel started, which is
  what Run All after a restart does; run out of that order, or once a cell acted anew in this
  kernel, it reads the session as it is now.
- ``%%turn`` cells keep their own plan (``plan.py``: replay, or fork an edit); a turn that
  acts anew ends the retrace, as any new effect does.

The retrace position lives here, per kernel (a :class:`CellBook` per open session), never in
the store: replaying writes nothing.
"""

from __future__ import annotations

from contextlib import suppress

from ..core.cells import CellOutput, CellRecord, Kind
from ..errors import SlotNotFound
from ..store.base import Store

__all__ = ["CellBook"]


class CellBook:
    """The cell records of one session, and where this kernel is in retracing them."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._retracing = True  # every cell so far in this kernel replayed, in first-run order
        self._cursor = 0  # the seq of the last record retraced

    @property
    def retracing(self) -> bool:
        return self._retracing

    def replay(self, key: str, kind: Kind) -> CellRecord | None:
        """The record to show instead of running the command (restoring the current slot it
        left, for a command that changes the session), or None to run it."""
        if kind == "runs":
            return None
        record = self._store.cell_record(self._session_id, key)
        if record is None or record.kind != kind:
            if kind == "reads":
                self._retracing = False
            return None
        in_order = self._retracing and record.seq > self._cursor
        if in_order:
            self._cursor = record.seq
        else:
            self._retracing = False
        if kind == "reads" and not in_order:
            return None
        if record.current is not None and self._store.current_slot(self._session_id) != record.current:
            with suppress(SlotNotFound):  # deleted since: the session stays where it is
                self._store.set_current_slot(self._session_id, record.current)
        return record

    def record(self, key: str, command: str, kind: Kind, outputs: list[CellOutput]) -> CellRecord | None:
        """Keep what a command just did (a read keeps its first record: the notebook's run)."""
        if kind == "runs":
            return None
        self._retracing = False
        record = CellRecord(
            command,
            kind,
            tuple(outputs),
            self._store.current_slot(self._session_id),
            self._store.state_marker(self._session_id),
        )
        return self._store.record_cell(self._session_id, key, record, replace=kind == "changes")

    def acted(self) -> None:
        """Something changed the session outside a record (a turn asked the model)."""
        self._retracing = False

    def changed_since(self, record: CellRecord) -> bool:
        """Whether the session differs now from what it was right after ``record``'s cell."""
        return self._store.state_marker(self._session_id) != record.marker
