"""What the session needs from a store, and the values stores hand back.

The session never writes SQL: it talks to the ``Store`` protocol, which the SQLite and
PostgreSQL stores implement. ``Store`` is made of role parts, one per concern, as the stores'
``RowStore`` is (``rows/``): slots, the slots as the tree lists them, turns and histories,
annotations (compactions, working context, pins, workflows), undo and redo, search and gc, and
the values kept beside them (large tool results, meta, cell records). Code that needs one concern can ask
for its part alone. A slot's history is read lazily as a chain of stored pieces
(``history.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar, runtime_checkable

from .._core.cells import CellRecord
from .._core.compaction import Compaction
from .._core.context import ContextEvent, WorkingContext
from .._core.messages import Message
from .._core.records import TurnInfo, TurnRecord
from .._core.slots import Slot, SlotConfig
from .._core.workflow import Workflow
from .._errors import DamagedRecord
from .history import MARKS, History, Mark, Piece, SegmentReader, Tip

T = TypeVar("T")

__all__ = [
    "MARKS",
    "AnnotationStore",
    "CellRecords",
    "CellTurn",
    "GcReport",
    "History",
    "Mark",
    "Piece",
    "SearchHit",
    "SearchStore",
    "SegmentReader",
    "SlotStore",
    "Store",
    "SupportsChanges",
    "Tip",
    "TreeSlot",
    "TreeStore",
    "TurnRecord",
    "TurnStore",
    "UndoStep",
    "UndoStore",
    "ValueStore",
]


@dataclass(frozen=True, slots=True)
class CellTurn:
    """A stored turn that came from a notebook cell, and where it lives now.

    ``owner`` is the live slot whose own segment holds the turn (the slot it ran on, under
    its current name), or None when that slot was deleted. ``home`` is where the turn is
    found now: the owner, else a live slot derived after it that still holds it. ``held``
    says whether the slot the lookup was made for holds it in its history.
    """

    record: TurnRecord
    owner: str | None
    home: str
    held: bool


class TreeSlot(NamedTuple):
    """A live slot as the slot tree shows it (``TreeStore.tree_slots``): its parent (the
    nearest live ancestor), mode and source kind, its history's counts, its fork point,
    whether it is the current slot, and when its row was made (with ``messages``, what says
    its history is the same as before: histories only grow, an undo makes a new row). A
    tuple: a tree of 10,000 slots makes 10,000 of them."""

    id: str
    parent: str | None
    mode: str
    source: str
    messages: int
    tokens: int
    turns: int
    fork_at: int
    current: bool
    created_at: float


@dataclass(frozen=True)
class UndoStep:
    """One ``%slot undo``: slot ``slot`` went back from ``length`` messages to ``at``, undoing
    ``turns`` turns; ``history`` is the history as it was before (what redo returns to, and
    where the undone turns stay readable until gc). ``cell`` is the notebook cell that asked
    (None outside a notebook); ``repeated`` says the step was made earlier by that same cell,
    and nothing moved now."""

    slot: str
    turns: int
    at: int
    length: int
    cell: str | None
    created_at: float
    history: History
    repeated: bool = False

    def undone(self) -> list[TurnRecord]:
        """The turns this step took off the slot."""
        return self.history.turns(self.at)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A message that matched a search: the slot whose history holds it (``undone``: only in
    that slot's undo history), its turn number and position there, its role and a snippet
    with the matches marked ``[…]``."""

    slot: str
    turn: int
    position: int
    role: str
    snippet: str
    undone: bool = False


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``gc`` removed: messages, turns and large tool results no slot, undo history or
    export could reach, and the bytes the file shrank by."""

    messages: int
    turns: int
    namespace: int
    bytes_before: int
    bytes_after: int
    compacted: bool = True  # False: another connection was using the file, so it kept its size

    @property
    def freed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)


class CellRecords(Protocol):
    """The store's part that keeps what notebook cells did (_engine/plan/cells.py)."""

    def cell_record(self, session_id: str, key: str) -> CellRecord | None:
        """What the notebook cell ``key`` did when it first ran (None: never); an unreadable
        record raises :class:`~slotmagic._errors.DamagedRecord`."""
        ...

    def record_cell(self, session_id: str, key: str, record: CellRecord, *, replace: bool = False) -> CellRecord:
        """Keep what a cell did, numbered in the order cells ran; an earlier record stays
        unless ``replace``. Returns the record kept."""
        ...

    def state_marker(self, session_id: str) -> str:
        """A short digest of the session's state: equal markers, same slots and settings."""
        ...


class SlotStore(Protocol):
    """The store's part that keeps sessions and their slots."""

    def ensure_session(self, session_id: str) -> None:
        """Create the session, with its ``default`` slot, unless it exists."""

    def sessions(self) -> list[str]: ...

    def current_slot(self, session_id: str) -> str: ...

    def set_current_slot(self, session_id: str, slot_id: str) -> None: ...

    def slots(self, session_id: str) -> list[Slot]: ...

    def slot(self, session_id: str, slot_id: str | None) -> Slot:
        """The slot (the current one if None), or SlotNotFound."""

    def has_slot(self, session_id: str, slot_id: str) -> bool: ...

    def create_slot(
        self,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        messages: Sequence[Message] = (),
        *,
        exist_ok: bool = False,
    ) -> tuple[Slot, bool]:
        """A new slot, and True; ``messages`` (a static slot's preset) are stored as turn 0.
        With ``exist_ok`` an existing slot of that id is returned with False instead of
        raising SlotExists; the check and the insert are one transaction."""

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
        """A slot sharing the parent's first ``at`` messages (all if None), as create_slot."""

    def update_config(self, session_id: str, slot_id: str, config: SlotConfig) -> Slot: ...

    def rename_slot(self, session_id: str, old_id: str, new_id: str) -> Slot: ...

    def delete_slot(self, session_id: str, slot_id: str) -> None:
        """Remove the slot; the history its derived slots share stays readable for them."""


class TreeStore(Protocol):
    """The store's part that lists the slots as the tree and the sidebar show them."""

    def tree_slots(self, session_id: str, *, questions: bool = False) -> tuple[list[TreeSlot], list[str | None]]:
        """The live slots in the order ``slots`` lists them (depth first), as plain values,
        and with ``questions`` the text of each one's last user message (None: it has none)
        as ``last_messages`` finds it, in the same order (else no texts)."""

    def last_messages(self, session_id: str, slot_ids: Iterable[str], role: str) -> dict[str, Message | None]:
        """The last message of ``role`` in each slot's history (None: it has none)."""


class TurnStore(Protocol):
    """The store's part that keeps turns and reads histories."""

    def history(self, session_id: str, slot_id: str | None) -> History:
        """The slot's history (the current slot's if None), with the slot as read with it."""

    def generation(self) -> int:
        """A number that changes whenever what the store holds may have changed (a write of
        this store's, another connection's noticed): what was computed from the store at one
        generation is still right while it stays the same."""

    def tip(self, session_id: str, slot_id: str) -> Tip: ...

    def cell_turns(self, session_id: str, cell_id: str, slot_id: str) -> list[CellTurn]:
        """Every stored turn of the session that came from this cell and that a live slot
        still holds, oldest first, each saying whether ``slot_id`` holds it (found through an
        index: most cells have none)."""

    def unshared_turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        """The slot's turns that no other live slot's history holds."""

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
        """Store one turn's messages on the slot (the current one if None), all or none.
        With ``base``, only if the slot still holds that history, else SlotMoved; with
        ``writable``, only if the slot is not readonly, else SlotReadonly. Both are checked
        in the transaction that writes."""


class AnnotationStore(Protocol):
    """The store's part that keeps what is said about a history: compactions, working-context
    changes, pins and exclusions, and the session's workflows."""

    def add_compaction(
        self, session_id: str, slot_id: str | None, compaction: Compaction, *, base: Tip | None = None
    ) -> Compaction:
        """Keep a compaction on the slot (with ``base``, only if the slot still holds that
        history); the histories that see it from then on are the slot's and those derived later."""

    def change_context(
        self,
        session_id: str,
        slot_id: str | None,
        change: Callable[[WorkingContext], ContextEvent | None],
    ) -> tuple[WorkingContext, ContextEvent | None]:
        """Apply ``change(the slot's context)`` in one transaction: the event it returns is
        stored on the slot (its turn is the slot's next, its ``at`` the history's length), and
        the context after it is returned with the event as stored. ``None`` stores nothing."""

    def workflows(self, session_id: str) -> list[Workflow]:
        """The session's workflows, in the order they were defined (``active`` set on one);
        those that cannot be read are left out."""

    def damaged_workflows(self, session_id: str) -> list[DamagedRecord]:
        """Why each of the session's workflows that cannot be read cannot be."""

    def active_workflow(self, session_id: str) -> Workflow | None:
        """The active workflow; ``DamagedRecord`` when it cannot be read."""

    def update_workflow(
        self,
        session_id: str,
        name: str,
        change: Callable[[Workflow | None], Workflow | None],
        *,
        activate: bool = False,
    ) -> Workflow | None:
        """Replace the workflow ``name`` (None if there is none) by ``change(it)`` in one
        transaction; ``None`` deletes it. With ``activate`` it becomes the active workflow."""

    def use_workflow(self, session_id: str, name: str | None) -> Workflow | None:
        """Make ``name`` the session's active workflow (None: no workflow is active)."""

    def mark_message(self, session_id: str, slot_id: str | None, position: int, mark: Mark) -> None:
        """Pin, exclude or clear the message at ``position`` of the slot's history, as one
        append-only event on the slot (``History.marks()`` reads them; slots derived later see
        them, as they see compactions). A position outside the history is a ConfigError."""


class UndoStore(Protocol):
    """The store's part that moves a slot back and forth: undo, redo and the steps kept."""

    def undo(self, session_id: str, slot_id: str | None, turns: int, *, cell: str | None = None) -> UndoStep:
        """Move the slot's tip back ``turns`` turns (a static slot's preset is not a turn) in
        one transaction, deleting nothing: the slot's id moves to a new history forked before
        the undone turns, and the old one stays hidden, readable through ``undo_steps`` until
        ``gc(drop_undo=True)``. Slots derived from the old history keep it, and list this slot
        as their parent. With ``cell``, a step this cell already made on the slot is returned
        (``repeated``) instead of undoing again: a notebook cell run again changes nothing.
        More turns than the slot holds is a ConfigError."""

    def redo(self, session_id: str, slot_id: str | None, *, branch: str | None = None) -> UndoStep:
        """Undo the slot's latest undo step, in one transaction: the slot holds exactly the
        history it held before it (its config, pins and working context changed since are
        kept). Refused with a ConfigError when there is nothing to redo or the slot has had
        turns since the undo. With ``branch``, the latest step's history becomes a new slot of
        that id (listed as derived from the slot) and the slot stays as it is: possible even
        after new turns; SlotExists if the id is taken."""

    def undo_steps(self, session_id: str, slot_id: str | None) -> list[UndoStep]:
        """The undo steps whose undone history belongs to the slot, newest first (the first
        is what ``redo`` returns to when the slot has had no turn since)."""


class SearchStore(Protocol):
    """The store's part that searches a session and collects what nothing reaches any more."""

    def search(self, session_id: str, query: str, slot_id: str | None = None, *, limit: int = 20) -> list[SearchHit]:
        """Messages of the session matching every word of ``query`` (full-text, case-folded;
        the words are taken literally, not as a query language), best first, each named by a
        live slot holding it (its owner if live) or, failing that, the slot whose undo history
        holds it. With ``slot_id``, only messages that slot's history holds, named by it."""

    def gc(self, session_id: str, *, drop_undo: bool = False) -> GcReport:
        """Remove what no live slot's history, undo history (unless ``drop_undo``, which
        forgets the session's undo history first) or export can reach any more: stored
        messages, turns, counts and marks of deleted slots past what their derived slots
        share, and large tool results no remaining message refers to; then compact the file.
        Nothing a live slot, an undo step kept or an export can read is removed."""


class ValueStore(Protocol):
    """The store's part that keeps large tool results and small values across sessions."""

    def namespace_put(self, session_id: str, key: str, tool: str, content: str) -> bool:
        """Keep a large tool result under its content key; False if it was there already."""

    def namespace_get(self, session_id: str, key: str) -> str | None:
        """A kept tool result of this session, or None."""

    def namespace_has(self, session_id: str, key: str) -> bool:
        """Whether a tool result is kept under ``key`` (without reading it)."""

    def meta(self, key: str) -> str | None:
        """A small value kept across sessions, or None."""

    def update_meta(self, key: str, update: Callable[[str | None], str]) -> str:
        """Replace a value by ``update(old value)`` in one transaction."""


class Store(
    SlotStore, TreeStore, TurnStore, AnnotationStore, UndoStore, SearchStore, ValueStore, CellRecords, Protocol
):
    """What the session needs from a store: every role part, and the store as a whole."""

    refusal: str | None  # why this store refuses writes (read-only, damaged), or None
    user: str | None  # recorded with each turn this store writes that names nobody itself
    viewing: bool  # a read-only view (view_only): every write refused

    def view_only(self, session_id: str) -> None:
        """Refuse every write from now on, in one line naming ``session_id``: a read-only view
        of a session (another person's). Token counts are then kept in memory only."""

    def atomic(self) -> AbstractContextManager[None]:
        """Make several calls one transaction: if the block raises, none of them happened."""

    def retried(self, call: Callable[[], T]) -> T:
        """``call()``: several calls as one write (an ``atomic()`` block), run again from its
        start, a few times, when the store's connection is lost before it commits (a
        PostgreSQL server restarting); a store whose connection cannot be lost runs it once."""

    def consistent(self) -> AbstractContextManager[None]:
        """A block of this thread's reads that see others' writes as of its first read: what
        other connections wrote is looked for once, not before each read (a turn's start reads
        the current slot, its history, the generation and the active workflow: one look, not
        four). Writes in the block are as ever; other threads' reads are not affected."""

    def close(self) -> None: ...


@runtime_checkable
class SupportsChanges(Protocol):
    """A store that tells when another connection changed it (PostgreSQL through
    LISTEN/NOTIFY, a SQLite file by asking ``PRAGMA data_version`` four times a second), so
    widgets and the sidebar can follow other kernels."""

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (on a background thread) after another connection's write;
        returns a function that stops it."""

    def follow(self, session_id: str | None) -> None:
        """Tell subscribers only of other connections' writes to ``session_id`` (None: any)."""
