"""What the session needs from a store, and the values stores hand back.

The session never writes SQL: it talks to the ``Store`` protocol, which the SQLite store
implements (and a PostgreSQL store can). A slot's history is stored as *segments*: a slot
owns the messages from its fork point on and shares its ancestors' messages before it, so a
history is a chain of ``(segment, lo, hi)`` pieces, root first. Positions in a history are
the stored ``seq`` numbers, so a piece needs no translation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..core.cells import CellRecord
from ..core.compaction import Compaction
from ..core.context import ContextEvent, WorkingContext
from ..core.messages import Message
from ..core.records import TurnInfo, TurnRecord
from ..core.slots import Slot, SlotConfig
from ..core.workflow import Workflow
from ..errors import DamagedRecord

__all__ = [
    "CellTurn",
    "GcReport",
    "History",
    "Mark",
    "Piece",
    "SearchHit",
    "SegmentReader",
    "Store",
    "SupportsChanges",
    "Tip",
    "TurnRecord",
    "UndoStep",
]

Mark = Literal["pin", "exclude", "clear"]
MARKS: tuple[Mark, ...] = ("pin", "exclude", "clear")


@dataclass(frozen=True, slots=True)
class Piece:
    """Positions ``lo`` to ``hi - 1`` of a history, stored in segment ``key``. ``branched_at``
    is when the history left this segment for the next piece's (None for the last piece):
    what the segment's slot did after that, such as a compaction, is not in this history."""

    key: int
    lo: int
    hi: int
    branched_at: float | None = None


@dataclass(frozen=True, slots=True)
class Tip:
    """Which history a slot holds: its stored row, its length and its last turn number.

    Rows are append-only, so two equal tips are the same history; a turn is committed only
    on the tip its request was made from.
    """

    key: int
    length: int
    turns: int


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


class SegmentReader(Protocol):
    """How a ``History`` reads its pieces; a store serves these from its cache."""

    def read_messages(self, key: int, lo: int, hi: int) -> list[Message]: ...

    def read_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        """The turns of segment ``key`` that start at positions ``lo`` to ``hi - 1``."""

    def read_cached_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        """``read_turns`` of the turns a provider's prompt cache served part of the input."""

    def read_first_system(self, key: int, lo: int, hi: int) -> tuple[int, Message] | None: ...

    def read_compactions(self, key: int, hi: int, before: float | None) -> list[Compaction]:
        """Compactions of segment ``key`` made at history length <= ``hi`` (and, when
        ``before`` is set, made before that time)."""

    def read_counts(self, key: int, lo: int, hi: int, encoding: str) -> list[int | None]:
        """Stored token counts of positions ``lo`` to ``hi - 1`` in ``encoding`` (None: not yet)."""

    def write_counts(self, key: int, lo: int, counts: Sequence[int], encoding: str) -> None: ...

    def read_context(self, key: int, hi: int, before: float | None) -> list[ContextEvent]:
        """Working-context events of segment ``key`` made at history length <= ``hi`` (and,
        when ``before`` is set, made before that time), oldest first: the rule of compactions."""

    def read_marks(self, key: int, hi: int, before: float | None) -> list[tuple[int, Mark]]:
        """Pin and exclude events ``(position, mark)`` kept on segment ``key`` for positions
        below ``hi`` (and, when ``before`` is set, made before that time), oldest first."""


class _ListReader:
    """A reader over messages in memory (one segment, key 0), for histories not stored."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self._messages = list(messages)

    def read_messages(self, key: int, lo: int, hi: int) -> list[Message]:
        return self._messages[lo:hi]

    def read_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        return []

    def read_cached_turns(self, key: int, lo: int, hi: int) -> list[TurnRecord]:
        return []

    def read_first_system(self, key: int, lo: int, hi: int) -> tuple[int, Message] | None:
        return next(((i, m) for i, m in enumerate(self._messages[lo:hi], lo) if m.role == "system"), None)

    def read_compactions(self, key: int, hi: int, before: float | None) -> list[Compaction]:
        return []

    def read_counts(self, key: int, lo: int, hi: int, encoding: str) -> list[int | None]:
        return [None] * (hi - lo)

    def write_counts(self, key: int, lo: int, counts: Sequence[int], encoding: str) -> None:
        pass

    def read_context(self, key: int, hi: int, before: float | None) -> list[ContextEvent]:
        return []

    def read_marks(self, key: int, hi: int, before: float | None) -> list[tuple[int, Mark]]:
        return []


class History:
    """A slot's stored history at one tip, read lazily: a focused view of a long history
    reads its tail, not the whole of it."""

    @classmethod
    def of(cls, messages: Sequence[Message]) -> History:
        """A history of messages held in memory (no store, no turns)."""
        n = len(messages)
        return cls([Piece(0, 0, n)] if n else [], _ListReader(messages), Tip(0, n, 0))

    def prefix(self, length: int) -> History:
        """The first ``length`` messages of this history (what a fork at ``length`` shares)."""
        pieces = [Piece(p.key, p.lo, min(p.hi, length), p.branched_at) for p in self.pieces if p.lo < length]
        chain = [Piece(p.key, p.lo, min(p.hi, length), p.branched_at) for p in self.chain if p.lo <= length]
        tip = Tip(self.tip.key, min(length, len(self)), self.tip.turns)
        return History(pieces, self._reader, tip, self.slot, chain=chain)

    def __init__(
        self,
        pieces: Sequence[Piece],
        reader: SegmentReader,
        tip: Tip,
        slot: Slot | None = None,
        *,
        chain: Sequence[Piece] | None = None,
        generation: int | None = None,
    ) -> None:
        self.pieces = tuple(pieces)
        self.tip = tip
        self.slot = slot  # the slot as it was when this history was read (None: not a slot's)
        # The store's generation when it was read (None: not read from a store as it stands).
        self.generation = generation
        # Every slot row from the root to this one, as pieces, those holding no message of
        # the history included (a slot derived and not yet written to): what the history
        # sees of state kept per row other than messages (the working context).
        self.chain = self.pieces if chain is None else tuple(chain)
        self._reader = reader

    def __len__(self) -> int:
        return self.tip.length

    def messages(self, lo: int = 0, hi: int | None = None) -> list[Message]:
        """Messages at positions ``lo`` to ``hi - 1`` (all of them by default)."""
        hi = len(self) if hi is None else min(hi, len(self))
        out: list[Message] = []
        for piece in self.pieces:
            a, b = max(lo, piece.lo), min(hi, piece.hi)
            if a < b:
                out.extend(self._reader.read_messages(piece.key, a, b))
        return out

    def turns(self, lo: int = 0) -> list[TurnRecord]:
        """The turns of the history that start at position ``lo`` or later (all by default)."""
        out: list[TurnRecord] = []
        for piece in self.pieces:
            if piece.hi > lo:
                out.extend(self._reader.read_turns(piece.key, max(piece.lo, lo), piece.hi))
        return out

    def cached_turns(self) -> list[TurnRecord]:
        """The turns of the history a provider's prompt cache served part of the input of:
        what :func:`~slotmagic.engine.budgeting.cache_totals` counts, read without the rest."""
        out: list[TurnRecord] = []
        for piece in self.pieces:
            if piece.hi > piece.lo:
                out.extend(self._reader.read_cached_turns(piece.key, piece.lo, piece.hi))
        return out

    def origin(self, position: int) -> tuple[int, int]:
        """Where the message at ``position`` is stored. Two histories hold the same first
        ``n`` messages exactly when their messages at ``n - 1`` have the same origin."""
        for piece in self.pieces:
            if piece.lo <= position < piece.hi:
                return piece.key, position
        raise IndexError(f"position {position} is outside a history of {len(self)} messages")

    def shares_prefix(self, other: History, length: int) -> bool:
        """Whether both histories hold the same stored first ``length`` messages."""
        if length <= 0:
            return True
        if length > len(self) or length > len(other):
            return False
        return self.origin(length - 1) == other.origin(length - 1)

    def compactions(self) -> list[Compaction]:
        """The compactions this history sees, oldest first: its own slot's, and its ancestors'
        made before it branched off them."""
        found: list[Compaction] = []
        for piece in self.pieces:
            seen = self._reader.read_compactions(piece.key, piece.hi, piece.branched_at)
            found.extend(c for c in seen if c.upto <= len(self))
        return sorted(found, key=lambda c: (c.at, c.created_at))

    def compaction(self) -> Compaction | None:
        """The latest compaction this history sees (the one its view applies)."""
        found = self.compactions()
        return found[-1] if found else None

    def context_events(self) -> list[ContextEvent]:
        """The working-context changes this history sees, oldest first: its ancestors' made
        before it branched off them (at or before the fork point), then its own slot's."""
        found: list[ContextEvent] = []
        for piece in self.chain:
            found.extend(self._reader.read_context(piece.key, piece.hi, piece.branched_at))
        return found

    def marks(self) -> dict[int, Mark]:
        """Positions pinned or excluded in this history's view: its ancestors' marks made
        before it branched off them, then its own slot's; the latest for a position wins."""
        found: dict[int, Mark] = {}
        for piece in self.chain:
            for position, mark in self._reader.read_marks(piece.key, piece.hi, piece.branched_at):
                if position < len(self):
                    found[position] = mark
        return {p: m for p, m in found.items() if m != "clear"}

    def context(self) -> WorkingContext:
        """The slot's working context as of this history."""
        return WorkingContext.from_events(self.context_events())

    def token_counts(self, lo: int, hi: int, encoding: str, count: Callable[[Message], int]) -> list[int]:
        """Token counts of positions ``lo`` to ``hi - 1`` in ``encoding``: read where stored,
        else counted now with ``count`` and stored, so each message is counted once."""
        out: list[int] = []
        for piece in self.pieces:
            a, b = max(lo, piece.lo), min(hi, piece.hi)
            if a >= b:
                continue
            stored = self._reader.read_counts(piece.key, a, b, encoding)
            if None in stored:
                messages = self._reader.read_messages(piece.key, a, b)
                counts = [c if c is not None else count(m) for c, m in zip(stored, messages, strict=True)]
                self._reader.write_counts(piece.key, a, counts, encoding)
                out.extend(counts)
            else:
                out.extend(c for c in stored if c is not None)
        return out

    def first_system(self) -> tuple[int, Message] | None:
        """The first system message and its position, without reading the rest."""
        for piece in self.pieces:
            found = self._reader.read_first_system(piece.key, piece.lo, piece.hi)
            if found is not None:
                return found
        return None

    def tail(self, count: int) -> tuple[int, list[Message]]:
        """The shortest end of the history that holds ``count`` non-system messages, widened
        so it does not start on a tool result (its call must come with it); and its start."""
        if count <= 0:
            return len(self), []
        start, chunk = len(self), max(16, 2 * count)
        loaded: list[Message] = []
        while True:
            # Within what is loaded: skip what is beyond the count, then widen back over
            # tool results. Done when that needs nothing before the loaded part.
            surplus = sum(1 for m in loaded if m.role != "system") - count
            cut = 0
            while surplus > 0:
                if loaded[cut].role != "system":
                    surplus -= 1
                cut += 1
            while 0 < cut < len(loaded) and loaded[cut].role == "tool":
                cut -= 1
            needs_more = surplus < 0 or (loaded and loaded[cut].role == "tool")
            if start == 0 or (loaded and not needs_more):
                return start + cut, loaded[cut:]
            lo = max(0, start - chunk)
            loaded = self.messages(lo, start) + loaded
            start, chunk = lo, chunk * 2


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
    """The store's part that keeps what notebook cells did (engine/cells.py)."""

    def cell_record(self, session_id: str, key: str) -> CellRecord | None:
        """What the notebook cell ``key`` did when it first ran (None: never, or unreadable)."""
        ...

    def record_cell(self, session_id: str, key: str, record: CellRecord, *, replace: bool = False) -> CellRecord:
        """Keep what a cell did, numbered in the order cells ran; an earlier record stays
        unless ``replace``. Returns the record kept."""
        ...

    def state_marker(self, session_id: str) -> str:
        """A short digest of the session's state: equal markers, same slots and settings."""
        ...


class Store(CellRecords, Protocol):
    refusal: str | None  # why this store refuses writes (read-only, damaged), or None
    user: str | None  # recorded with each turn this store writes that names nobody itself
    viewing: bool  # a read-only view (view_only): every write refused

    def view_only(self, session_id: str) -> None:
        """Refuse every write from now on, in one line naming ``session_id``: a read-only view
        of a session (another person's). Token counts are then kept in memory only."""

    def ensure_session(self, session_id: str) -> None:
        """Create the session, with its ``default`` slot, unless it exists."""

    def sessions(self) -> list[str]: ...

    def current_slot(self, session_id: str) -> str: ...

    def set_current_slot(self, session_id: str, slot_id: str) -> None: ...

    def slots(self, session_id: str) -> list[Slot]: ...

    def slot(self, session_id: str, slot_id: str | None) -> Slot:
        """The slot (the current one if None), or SlotNotFound."""

    def has_slot(self, session_id: str, slot_id: str) -> bool: ...

    def last_messages(self, session_id: str, slot_ids: Iterable[str], role: str) -> dict[str, Message | None]:
        """The last message of ``role`` in each slot's history (None: it has none)."""

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

    def add_compaction(
        self, session_id: str, slot_id: str | None, compaction: Compaction, *, base: Tip | None = None
    ) -> Compaction:
        """Keep a compaction on the slot (with ``base``, only if the slot still holds that
        history); the histories that see it from then on are the slot's and those derived later."""

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

    def atomic(self) -> AbstractContextManager[None]:
        """Make several calls one transaction: if the block raises, none of them happened."""

    def close(self) -> None: ...

    # -- working context and workflows ---------------------------------------------------------

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

    # -- exploring: pins and exclusions, undo, search, gc ---------------------------------------

    def mark_message(self, session_id: str, slot_id: str | None, position: int, mark: Mark) -> None:
        """Pin, exclude or clear the message at ``position`` of the slot's history, as one
        append-only event on the slot (``History.marks()`` reads them; slots derived later see
        them, as they see compactions). A position outside the history is a ConfigError."""

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
