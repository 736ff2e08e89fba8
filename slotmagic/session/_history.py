"""``session.history``: reading and editing what a session's slots hold, past the turn itself.

    session.history.turns("default")        # the slot's stored turns
    session.history.undo()                  # move the current slot back one turn (redo returns)
    session.history.pin(-1)                 # keep a message in the model's view
    session.history.search("deposit")       # messages of every slot holding every word
    session.history.diff("a", "b"); session.history.export("notes.md", "a")

Undo, marks, merges and search are in ``_explore.py``; diffs, comparisons and exports read
the store (``_diff.py``, ``_compare.py``, ``_export.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .._core.checks import check_flag, check_text, check_whole
from .._core.messages import Message
from .._core.records import TurnRecord
from .._core.slots import validate_slot_id
from .._diff import BranchDiff, diff_slots
from .._engine.run.reply import Reply
from .._engine.run.turn import TurnEngine
from .._explore import Explorer, Merge
from .._export import export_slot
from .._store.base import GcReport, Mark, SearchHit, UndoStep
from ._checks import optional_slot

if TYPE_CHECKING:
    from .._compare import Comparison


class SessionHistory:
    """The histories of one session's slots (``slot`` None: the current slot)."""

    def __init__(self, engine: TurnEngine) -> None:
        self._engine = engine
        self.store = engine.store
        self.session_id = engine.session_id
        self._explorer = Explorer(engine.store, engine.session_id, engine)

    def __repr__(self) -> str:
        return f"<SessionHistory of {self.session_id!r}>"

    # -- reading ---------------------------------------------------------------------------

    def turns(self, slot: str | None = None) -> list[TurnRecord]:
        """The slot's stored turns, oldest first."""
        return self.store.history(self.session_id, optional_slot(slot)).turns()

    def last_message(self, slot: str | None = None, role: str = "user") -> Message | None:
        """The slot's last stored message of ``role``, reading only the end of its history."""
        history = self.store.history(self.session_id, optional_slot(slot))
        hi, chunk = len(history), 8
        while hi > 0:  # backwards a chunk at a time, each message read once
            lo = max(0, hi - chunk)
            found = next((m for m in reversed(history.messages(lo, hi)) if m.role == role), None)
            if found is not None:
                return found
            hi, chunk = lo, chunk * 4
        return None

    def last_messages(self, slots: Iterable[str], role: str = "user") -> dict[str, Message | None]:
        """The last stored message of ``role`` of each of ``slots``, by slot id: what
        :meth:`last_message` gives one slot, read for many at once (a stretch of history they
        share is read once)."""
        ids = [validate_slot_id(slot) for slot in slots]
        return self.store.last_messages(self.session_id, ids, role)

    def unshared_turns(self, slot: str) -> list[TurnRecord]:
        """The turns of the slot that no other slot's history holds (what deleting it loses)."""
        return self.store.unshared_turns(self.session_id, validate_slot_id(slot))

    def stored_reply(self, slot: str, turn: TurnRecord) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed``."""
        return self._engine.stored_reply(validate_slot_id(slot), turn)

    def read_namespace(self, ref: str, offset: int = 0, length: int = 4000) -> str:
        """A page of a large tool result kept aside (what the ``read_namespace`` tool returns)."""
        check_text(ref, "ref")
        return self._engine.namespace.read(ref, check_whole(offset, "offset"), check_whole(length, "length", minimum=1))

    def search(self, text: str, *, slot: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages of every slot (or of ``slot``'s history) holding every word of ``text``."""
        return self._explorer.search(text, optional_slot(slot), limit)

    # -- between slots -----------------------------------------------------------------------

    def diff(self, a: str, b: str) -> BranchDiff:
        """Where two slots' histories part and what each has had since."""
        return diff_slots(self.store, self.session_id, self._slot_id(a), self._slot_id(b))

    def compare(self, *slots: str, since_fork: bool = False) -> Comparison:
        """Several slots side by side: each one's last reply, or with ``since_fork`` every
        turn since the point where they part (``print()`` it, or show it in a notebook)."""
        from .._compare import compare_slots  # here: importing it (and its columns) costs every kernel

        return compare_slots(self.store, self.session_id, [self._slot_id(s) for s in slots], since_fork=since_fork)

    def export(self, path: str | os.PathLike[str], slot: str | None = None) -> Path:
        """Write a slot's whole history to a ``.md`` or ``.json`` file."""
        return export_slot(self.store, self.session_id, path, self._slot_id(slot))

    def merge(
        self, child: str, *, into: str | None = None, as_: str = "summary", instructions: str | None = None
    ) -> Merge:
        """Fold what ``child`` has had since it left ``into`` (its parent by default) into
        ``into`` as one turn: a summary (``as_="summary"``) or its messages (``"messages"``)."""
        into = None if into is None else self._slot_id(into)
        return self._explorer.merge(self._slot_id(child), into, as_, instructions, self._engine.model)

    # -- undo and marks ------------------------------------------------------------------------

    def undo(self, slot: str | None = None, turns: int = 1, *, cell: str | None = None) -> UndoStep:
        """Move the slot's tip back ``turns`` turns; nothing is deleted, ``redo`` returns."""
        return self._explorer.undo(optional_slot(slot), turns, cell)

    def redo(self, slot: str | None = None, *, branch: str | None = None) -> UndoStep:
        """Return the slot to where its latest undo took it from; with ``branch``, make that
        history a new slot instead (the slot stays as it is)."""
        return self._explorer.redo(optional_slot(slot), branch)

    def undo_steps(self, slot: str | None = None) -> list[UndoStep]:
        """The slot's undo steps, newest first, each with the undone turns still readable."""
        return self.store.undo_steps(self.session_id, optional_slot(slot))

    def pin(self, position: int, slot: str | None = None) -> int:
        """Keep the message at ``position`` (negative: from the end) in the model's view
        whatever the focused filter or a compaction leaves out; returns the position."""
        return self._explorer.mark(position, "pin", optional_slot(slot))

    def exclude(self, position: int, slot: str | None = None) -> int:
        """Never send the message at ``position`` to the model (it stays stored)."""
        return self._explorer.mark(position, "exclude", optional_slot(slot))

    def unmark(self, position: int, slot: str | None = None) -> int:
        """Clear a pin or an exclusion."""
        return self._explorer.mark(position, "clear", optional_slot(slot))

    def marks(self, slot: str | None = None) -> dict[int, Mark]:
        """The slot's pinned and excluded positions."""
        return self.store.history(self.session_id, optional_slot(slot)).marks()

    def gc(self, *, drop_undo: bool = False) -> GcReport:
        """Remove what nothing can reach any more and shrink the file (``drop_undo``: forget
        the undo history first)."""
        return self._explorer.gc(check_flag(drop_undo, "drop_undo"))

    def _slot_id(self, slot: str | None) -> str:
        return self.store.current_slot(self.session_id) if slot is None else validate_slot_id(slot)
