"""Cells run again: the replay rule for every magic, in one place.

*Running a cell again with unchanged text leaves the session as that cell left it the first
time.* A magic run from a notebook cell is named by a key (its cell, its own text, and which
of the cell's identical lines it is: see ``_magics/identity.py``); what it did is kept as a
:class:`~slotmagic._core.cells.CellRecord`, with the key of the magic that ran just before it.
When a cell runs again:

- a command that **changes** the session and has a record replays it: the caller shows the
  recorded outputs, the current slot it left is made current again, nothing else is written
  and no model is called. Edited text is another key: it acts anew.
- a command that **reads** the session shows its recorded outputs (the session *as of its
  cell*) while the run *retraces* the recorded one: since the notebook's first magic cell,
  every magic ran after the one it ran after when recorded, and none acted anew. Otherwise
  it reads the session as it is now, and that output becomes its record.
- a ``%%turn`` cell keeps its own plan (``cell_turn.py``: replay, or fork an edit); the book
  notes whether it replayed (the retrace goes on) or asked the model (it stops), and keeps
  what it showed: a turn whose branch was deleted since (later in the notebook) is shown as
  it was, not asked again.

Where this kernel is in the retrace lives here (a :class:`CellBook` per open session), not
in the store: a replay writes nothing but the current slot it restores.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace

from ..._core.cells import START, CellOutput, CellRecord, Kind
from ..._errors import DamagedRecord, SlotNotFound
from ..._store.base import Store
from .cell_turn import turn_stored

__all__ = ["CellBook"]


@dataclass(frozen=True)
class ShownTurn:
    """How a ``%%turn`` cell read when it was recorded (see :meth:`CellBook.as_shown`)."""

    before: tuple[str, ...] = ()  # lines it printed before its reply
    notes: tuple[str, ...] = ()  # the notes under its reply
    slot: str | None = None  # the slot its footer named


NOT_SHOWN = ShownTurn()  # a cell never recorded


class CellBook:
    """The cell records of one session, and where this kernel is in retracing them."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._last = START  # the key of the last magic run in this kernel
        self._retracing = True  # every magic since the retrace began replayed, in the recorded order
        self._damaged: list[str] = []  # one line per record skipped since the last look
        self._said: set[str] = set()  # the keys whose record was said to be skipped (once each)

    @property
    def position(self) -> tuple[str, bool]:
        """Where this kernel is in the retrace: the key of the last magic run, and whether every
        magic since the retrace began replayed in order (see :meth:`resume`)."""
        return self._last, self._retracing

    def resume(self, position: tuple[str, bool]) -> None:
        """Go on from ``position``: the session reopened in the same kernel (``%config
        SlotMagic.session_id`` away and back), whose book must not start over as if the
        notebook's first magic cell were next."""
        self._last, self._retracing = position

    def damaged(self) -> list[str]:
        """The lines saying which records were skipped as unreadable since the last call (the
        caller shows them: their cells acted anew)."""
        found, self._damaged = self._damaged, []
        return found

    def _read(self, key: str, check: Callable[[CellRecord], object] | None = None) -> CellRecord | None:
        """The record of ``key``, None when there is none or it fails validation (``check``
        raises :class:`DamagedRecord`): such a record is skipped, with a line to show (once
        per key: a turn's cell reads its record more than once)."""
        try:
            record = self._store.cell_record(self._session_id, key)
            if record is not None and check is not None:
                check(record)
        except DamagedRecord as exc:
            if key not in self._said:
                self._said.add(key)
                self._damaged.append(f"slotmagic: skipped this cell's stored record ({exc}): the cell runs anew")
            return None
        return record

    @property
    def retracing(self) -> bool:
        return self._retracing

    def _follows(self, record: CellRecord) -> bool:
        """Whether ``record`` continues the retrace (its cell ran right after the last one run
        here), or starts one (the notebook's first magic cell, run again)."""
        return record.after == START or (self._retracing and record.after == self._last)

    def replay(self, key: str, kind: Kind, check: Callable[[CellRecord], object] | None = None) -> CellRecord | None:
        """The record to show instead of running the command (restoring the current slot it
        left, for a command that changes the session), or None to run it. ``check`` validates
        what the record would show (raising :class:`DamagedRecord`): a record it refuses is
        skipped, and the command runs."""
        if kind in ("runs", "turn") or self._store.viewing:  # a view shows the session now
            return None
        record = self._read(key, check)
        if record is None or record.kind != kind:
            return None
        follows = self._follows(record)
        if kind == "reads" and not follows:
            return None
        self._retracing, self._last = follows, key
        # A change restores the current slot it left; a read never changes the current slot.
        if (
            kind == "changes"
            and record.current is not None
            and self._store.current_slot(self._session_id) != record.current
        ):
            with suppress(SlotNotFound):  # deleted since: the session stays where it is
                self._store.set_current_slot(self._session_id, record.current)
        return record

    def record(self, key: str, command: str, kind: Kind, outputs: list[CellOutput]) -> CellRecord | None:
        """Keep what a command just did (a read that ran live replaces its record: its output
        as of this run)."""
        if kind == "runs" or self._store.viewing:  # a view writes nothing
            return None
        record = CellRecord(
            command,
            kind,
            tuple(outputs),
            self._store.current_slot(self._session_id),
            self._store.state_marker(self._session_id),
            self._last,
        )
        self._retracing, self._last = False, key
        return self._store.record_cell(self._session_id, key, record, replace=True)

    def turn(
        self, key: str, replayed: bool, outputs: list[CellOutput], slot: str | None, notes: tuple[str, ...] = ()
    ) -> None:
        """A ``%%turn`` cell ran (``key`` names the cell and its text; ``slot`` is where its
        reply is): replayed, the retrace goes on if it ran where it ran before; asking the
        model stops it."""
        if self._store.viewing:
            return
        record = self._read(key)
        if replayed and record is not None:
            self._retracing, self._last = self._follows(record), key
            return
        kept = CellRecord("%%turn", "turn", tuple(outputs), slot, "", self._last, notes)
        if not replayed:
            self._retracing = False
            kept = replace(kept, marker=self._store.state_marker(self._session_id))
        # A replay recorded by an older slotmagic is noted now, and the retrace goes on.
        self._store.record_cell(self._session_id, key, kept, replace=True)
        self._last = key

    def gone_turn(
        self, key: str, cell_id: str, slot: str, check: Callable[[CellRecord], object] | None = None
    ) -> CellRecord | None:
        """The record of a ``%%turn`` cell (``key``: the cell and its text) whose turn the
        store no longer holds (its branch deleted later in the notebook, its undo history
        dropped by gc): it is shown as it was instead of asking the model again."""
        record = self._read(key, check)
        if record is None or record.kind != "turn":
            return None
        if turn_stored(self._store, self._session_id, slot, cell_id):
            return None  # the turn's own plan replays it (or forks an edit)
        self._retracing, self._last = self._follows(record), key
        return record

    def as_shown(self, key: str) -> ShownTurn:
        """How a ``%%turn`` cell read when it was recorded: what it printed before its reply (a
        compaction's line), the notes under its reply, and the slot its footer named. A replay
        shows them again, so the cell reads as it did (the slot renamed since, say)."""
        record = self._read(key)
        if record is None or record.kind != "turn":
            return NOT_SHOWN
        before = []
        for output in record.outputs:
            if output.kind != "stream":
                break
            before.append(output.text)
        return ShownTurn(tuple(before), record.notes, record.current)

    def changed_since(self, record: CellRecord) -> bool:
        """Whether the session differs now from what it was right after ``record``'s cell."""
        return self._store.state_marker(self._session_id) != record.marker
