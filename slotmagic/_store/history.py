"""A slot's history as a chain of stored pieces, read lazily through a ``SegmentReader``.

A slot owns the messages from its fork point on and shares its ancestors' messages before
it, so a history is a chain of ``(segment, lo, hi)`` pieces, root first. Positions in a
history are the stored ``seq`` numbers, so a piece needs no translation.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .._core.compaction import Compaction
from .._core.context import ContextEvent, WorkingContext
from .._core.messages import Message
from .._core.records import TurnRecord
from .._core.slots import Slot

__all__ = ["MARKS", "History", "Mark", "Piece", "SegmentReader", "Tip"]

_ROLE = operator.attrgetter("role")

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
        what :func:`~slotmagic._engine.view.budgeting.cache_totals` counts, read without the rest."""
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
            # tool results. Done when that needs nothing before the loaded part. The roles are
            # read and counted by C code (map, list.count): a warm turn runs this.
            roles = list(map(_ROLE, loaded))
            systems = roles.count("system")
            surplus = len(roles) - systems - count
            cut = max(surplus, 0)
            if systems and surplus > 0:  # skip only non-system messages
                cut = 0
                while surplus > 0:
                    if roles[cut] != "system":
                        surplus -= 1
                    cut += 1
            while 0 < cut < len(roles) and roles[cut] == "tool":
                cut -= 1
            needs_more = surplus < 0 or (roles and roles[cut] == "tool")
            if start == 0 or (loaded and not needs_more):
                return start + cut, loaded[cut:]
            lo = max(0, start - chunk)
            loaded = self.messages(lo, start) + loaded
            start, chunk = lo, chunk * 2
