"""Turns that come from notebook cells: what to do when a cell runs again.

Re-running a cell is how notebook users edit a prompt, and Run All after a restart is how they
reopen work. The rule: *running a cell again with unchanged text leaves the session as that
cell left it the first time* — the same reply, from the store, and the same current slot as
right after it first ran. So a turn remembers its cell (id, text, options), and when the cell
runs again:

- same text: *replay* the stored reply, no model call, on the slot the turn ran on (the slot
  whose own stored rows hold it — not a branch derived later that shares it);
- edited text (or ``rerun``): *fork* a sibling branch just before the earlier turn and run the
  new turn there; the earlier branch stays whole, like "edit message" in chat apps. An edit
  that was already forked once is found again and replayed.

A cell whose earlier turn is not in the current slot's history is looked for elsewhere, unless
the current slot rewrote the history before that turn (it is a fork made by editing an
earlier cell: the notebook's later cells then belong to the new branch).

A cell whose turn was taken off its slot by ``%slot undo`` replays that stored reply without
moving the slot (the undo stands, so Run All ends where the first run ended, the undo cell
included); an edited one is a new turn on the slot.

Everything here reads the store and plain values; nothing calls back into the session.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Literal

from ..._core.records import CellRef, TurnRecord
from ..._errors import ConfigError, SlotNotFound
from ..._store.base import CellTurn, History, Store

_FORK_SUFFIX = re.compile(r"\.\d+$")
_MAX_ID = 64
_FAR_FORK = 8  # a position-only cell's edit that would leave out at least this many messages is refused


@dataclass(frozen=True)
class CellPlan:
    """What a cell's turn will do.

    ``slot`` is where the turn is appended (``append``), where the stored reply lives
    (``replay``) or the branch being forked (``fork``); ``turn`` is the cell's earlier turn.
    """

    action: Literal["append", "replay", "fork"]
    slot: str
    turn: TurnRecord | None = None
    source: History | None = None  # where a replayed turn is read, when the slot no longer holds it (undone)


def _same_text(found: CellTurn, cell: CellRef) -> bool:
    return found.record.info.cell is not None and found.record.info.cell.same_text(cell)


def plan_cell_turn(
    store: Store,
    session_id: str,
    slot: str,
    cell: CellRef,
    *,
    rerun: bool = False,
    anywhere: bool = False,
    keep: Callable[[CellTurn], bool] | None = None,
) -> CellPlan:
    """Decide between append, replay and fork for a turn from ``cell`` on ``slot``.

    With ``anywhere`` (the turn goes to whatever slot is current), the cell's turn is replayed
    where it ran even when another slot is current, so Run All after a restart reproduces the
    notebook whatever slot it was left on. ``keep`` narrows the cell's turns considered (a
    fan-out column looks only at its own slot's line).
    """
    turns = store.cell_turns(session_id, cell.id, slot)
    if keep is not None:
        turns = [t for t in turns if keep(t)]
    if not turns:
        # A cell's first run (the common case, one indexed lookup), or one whose turn was undone.
        undone = None if rerun else _undone_turn(store, session_id, slot, cell)
        return undone or CellPlan("append", slot)
    history = store.history(session_id, slot)
    held = [t for t in turns if t.held]
    if held:
        earlier = max(held, key=lambda t: t.record.start)
        home = earlier.home if anywhere else slot
    elif anywhere:
        found = _found_elsewhere(store, session_id, history, turns, cell)
        if found is None:
            return CellPlan("append", slot)
        earlier, home = found, found.home
    else:
        return CellPlan("append", slot)
    if not rerun:
        if _same_text(earlier, cell):
            return CellPlan("replay", home, earlier.record)
        edit = _earlier_edit(store, session_id, history, turns, earlier, cell)
        if edit is not None:
            return CellPlan("replay", slot if edit.held and not anywhere else edit.home, edit.record)
    return CellPlan("fork", home, earlier.record)


def turn_stored(store: Store, session_id: str, slot: str, cell_id: str) -> bool:
    """Whether the store still holds a turn of the cell that a plan can find (on a live
    branch, or in a slot's undo history): a turn removed since (its branch deleted, its undo
    history dropped by gc) is not."""
    try:
        if store.cell_turns(session_id, cell_id, slot):
            return True
        steps = store.undo_steps(session_id, slot)
    except SlotNotFound:  # the slot it was sent to is gone
        return False
    return any(
        record.info.cell is not None and record.info.cell.id == cell_id for step in steps for record in step.undone()
    )


def _undone_turn(store: Store, session_id: str, slot: str, cell: CellRef) -> CellPlan | None:
    """The cell's turn in the slot's undo history, newest first: replayed from there when the
    text is unchanged; None (a new turn) otherwise."""
    for step in store.undo_steps(session_id, slot):
        for record in reversed(step.undone()):
            ref = record.info.cell
            if ref is not None and ref.id == cell.id:
                return CellPlan("replay", slot, record, step.history) if ref.same_text(cell) else None
    return None


def _found_elsewhere(
    store: Store, session_id: str, history: History, turns: list[CellTurn], cell: CellRef
) -> CellTurn | None:
    """The cell's turn in another slot whose history before it is the current slot's (as far
    as the current slot goes). Preferred: the cell's current text, then the latest run."""
    eligible = []
    for found in turns:
        other = store.history(session_id, found.home)
        if history.shares_prefix(other, min(found.record.start, len(history))):
            eligible.append(found)
    if not eligible:
        return None
    same = [t for t in eligible if _same_text(t, cell)]
    return (same or eligible)[-1]


def _earlier_edit(
    store: Store, session_id: str, history: History, turns: list[CellTurn], earlier: CellTurn, cell: CellRef
) -> CellTurn | None:
    """A sibling that already holds this cell's current text after the same history."""
    start = earlier.record.start
    for found in reversed(turns):  # newest first
        if found is earlier or found.record.start != start or not _same_text(found, cell):
            continue
        if history.shares_prefix(store.history(session_id, found.home), start):
            return found
    return None


def fork_name(slot: str, taken: Container[str]) -> str:
    """The first free ``<base>.N`` (N >= 2), where a fork of ``draft.2`` is ``draft.3``, not
    ``draft.2.2``: edits of the same branch stay one family of siblings."""
    base = _FORK_SUFFIX.sub("", slot) or slot
    number = 2
    while True:
        suffix = f".{number}"
        name = base[: _MAX_ID - len(suffix)] + suffix
        if name not in taken:
            return name
        number += 1


def refuse_far_fork(length: int, slot: str, earlier: TurnRecord) -> None:
    """A cell known only by its position (no cell id) whose text differs from the turn at
    that position may be another notebook's cell, not an edit: forking there would drop
    most of the ``length`` messages the notebook ran on, so it is refused with what to do."""
    if earlier.start * 2 < length and length - earlier.start >= _FAR_FORK:
        raise ConfigError(
            f"this %%turn differs from the turn its place in the notebook had (turn {earlier.number}, "
            f"after {earlier.start} messages), and treating it as an edit would fork from there, leaving "
            f"out {length - earlier.start} of the {length} messages of slot {slot!r}; nothing was sent. "
            'If this is another notebook, name it (%config SlotMagic.notebook = "NAME" or SLOTMAGIC_NOTEBOOK); '
            "to send it as a new turn give the cell an id (%%turn --id NAME); --rerun forks anyway"
        )
