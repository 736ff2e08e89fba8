"""Turns that come from notebook cells: what to do when a cell runs again.

Re-running a cell is how notebook users edit a prompt, and Run All after a restart is how they
reopen work. So a turn remembers the cell it came from (its id and text), and when that cell
runs again against a slot whose history holds its earlier turn:

- same text: *replay* the stored reply, no model call;
- edited text (or ``rerun``): *fork* a sibling branch just before the earlier turn and run the
  new turn there; the earlier branch stays whole, like "edit message" in chat apps.

An edited cell that was already forked once finds its fork again (a sibling with the same
history before the turn and the same text) and replays from there instead of forking anew.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .core.messages import Message
from .store import TurnRecord

if TYPE_CHECKING:
    from .session import Session

_FORK_SUFFIX = re.compile(r"\.\d+$")
_MAX_ID = 64


@dataclass(frozen=True)
class CellSource:
    """The cell a turn comes from: its id, its message and the request options it set itself
    (options taken from settings are not part of the cell's text)."""

    cell_id: str
    text: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_info(self) -> dict[str, Any]:
        return {"id": self.cell_id, "text": self.text, "options": dict(self.options)}

    def same_cell(self, info: Mapping[str, Any]) -> bool:
        cell = info.get("cell")
        return isinstance(cell, Mapping) and cell.get("id") == self.cell_id

    def same_text(self, info: Mapping[str, Any]) -> bool:
        cell = info.get("cell") or {}
        return bool(cell.get("text") == self.text and dict(cell.get("options") or {}) == dict(self.options))


@dataclass(frozen=True)
class CellPlan:
    """What a cell's turn will do. ``slot`` is where the turn is appended (``append``), where
    the stored reply lives (``replay``) or the branch being forked (``fork``); ``turn`` is the
    earlier turn from the same cell."""

    action: Literal["append", "replay", "fork"]
    slot: str
    turn: TurnRecord | None = None


def _last_from_cell(turns: Sequence[TurnRecord], cell: CellSource) -> TurnRecord | None:
    return next((t for t in reversed(turns) if cell.same_cell(t.info)), None)


def _earlier_fork(
    session: Session, slot_id: str, earlier: TurnRecord, cell: CellSource
) -> tuple[str, TurnRecord] | None:
    """A sibling that already holds this cell's current text after the same history."""
    before = session.messages(slot_id)[: earlier.start]
    for slot in reversed(session.list_slots()):  # newest first
        if slot.id == slot_id:
            continue
        for turn in session.turns(slot.id):
            if (
                turn.start == earlier.start
                and cell.same_cell(turn.info)
                and cell.same_text(turn.info)
                and session.messages(slot.id)[: turn.start] == before
            ):
                return slot.id, turn
    return None


def _shared_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _home(session: Session, cell: CellSource, current: str) -> tuple[str, TurnRecord] | None:
    """Another slot holding an earlier turn from the cell, unless the current slot rewrote the
    history before that turn (it is a fork made by editing an earlier cell: the notebook's
    later cells then belong to the new branch). Preferred: a slot where the turn has the cell's
    current text, then the slot with the fewest messages (nearest to where the cell ran)."""
    history = session.messages(current)
    found = []
    for slot in session.list_slots():
        if slot.id != current:
            turn = _last_from_cell(session.turns(slot.id), cell)
            if turn is not None and _shared_prefix(history, session.messages(slot.id)) >= min(turn.start, len(history)):
                found.append((not cell.same_text(turn.info), slot.meta.message_count, slot.id, turn))
    if not found:
        return None
    _, _, slot_id, turn = min(found, key=lambda f: f[:3])
    return slot_id, turn


def plan_cell_turn(
    session: Session, slot_id: str, cell: CellSource, *, rerun: bool = False, anywhere: bool = False
) -> CellPlan:
    """Decide between append, replay and fork for a turn from ``cell`` on ``slot_id``.

    With ``anywhere`` (the turn goes to whatever slot is current), a cell whose earlier turn
    is not in that slot is looked for in the session's other slots, so Run All after a restart
    replays each cell where it ran even when the notebook was left on an unrelated slot.
    A cell always belongs to the branch it ran on.
    """
    if not session.store.has_cell_turns(session.session_id, cell.cell_id):
        return CellPlan("append", slot_id)  # a cell's first run: the common case, one indexed lookup
    earlier = _last_from_cell(session.turns(slot_id), cell)
    if earlier is None and anywhere:
        home = _home(session, cell, slot_id)
        if home is not None:
            slot_id, earlier = home
    if earlier is None:
        return CellPlan("append", slot_id)
    if not rerun:
        if cell.same_text(earlier.info):
            return CellPlan("replay", slot_id, earlier)
        found = _earlier_fork(session, slot_id, earlier, cell)
        if found is not None:
            return CellPlan("replay", found[0], found[1])
    return CellPlan("fork", slot_id, earlier)


def fork_name(slot_id: str, taken: set[str] | frozenset[str]) -> str:
    """The first free ``<base>.N`` (N >= 2), where a fork of ``draft.2`` is ``draft.3``, not
    ``draft.2.2``: edits of the same branch stay one family of siblings."""
    base = _FORK_SUFFIX.sub("", slot_id) or slot_id
    number = 2
    while True:
        suffix = f".{number}"
        name = base[: _MAX_ID - len(suffix)] + suffix
        if name not in taken:
            return name
        number += 1
