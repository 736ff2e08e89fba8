"""What both stores share: slot rows, segments, pieces and histories, and the concurrency rule.

``SQLiteStore`` and ``PostgresStore`` keep the same tables (see ``migrations.py`` and
``postgres_schema.py``) and differ only in how they connect, open a write transaction and
learn that another connection wrote. Everything else is here, written once, in SQL both
dialects accept (``?`` placeholders, which the PostgreSQL connection translates).

Layout: a slot is a branch that shares its parent's first ``fork_at`` messages and owns the
rows from there on, so deriving writes one row whatever the history's length, and a turn
appends a few rows and updates one.

Reads are served from memory: the slot rows of each session, and the parts of each segment
already read. Stored messages never change, so a cached segment only ever grows: a turn
appends to it, and rows another connection appended are read from where the cache ends. A
store asks, at each call, whether another connection wrote anything (cheaply: SQLite's
``PRAGMA data_version``, PostgreSQL's change counter); only then are slot rows read again
(``_others_wrote``).

The concurrency rule: ``append_turn(base=...)`` checks, inside the write transaction that
appends, that the slot still holds the history the turn was made from, else ``SlotMoved``.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Protocol, Self

from ..core.cells import CellRecord
from ..core.compaction import Compaction
from ..core.context import ContextEvent, WorkingContext
from ..core.messages import ROLES, Message, fields_from_extra
from ..core.records import TurnInfo, TurnRecord
from ..core.slots import DEFAULT_SLOT, Slot, SlotConfig, SlotMeta, SlotMode
from ..core.users import current_user
from ..core.workflow import Workflow, check_workflow_name, no_workflow
from ..errors import (
    ConfigError,
    DamagedRecord,
    ProtectedSlot,
    SlotExists,
    SlotMoved,
    SlotNotFound,
    SlotReadonly,
    StoreError,
)
from .base import MARKS, CellTurn, GcReport, History, Mark, Piece, SearchHit, Tip, UndoStep

logger = logging.getLogger("slotmagic")

ROW_COLUMNS = "id, name, parent, fork_at, length, tokens, turns, config, created_at, deleted_at, undo"
MESSAGE_COLUMNS = "role, content, tokens, extra"
# Every table that holds rows of a slot (keyed by ``slot``), children before parents.
SLOT_TABLES = ("messages", "turns", "compactions", "token_counts", "context_events")
# What a session is, table by table, for copying it between stores (``dump_session``): the
# tables keyed by slot (their first column) and by session id. A new table joins here.
COPIED_SLOT_TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("slot", "seq", "turn", "role", "content", "tokens", "extra", "created_at"),
    "turns": ("slot", "number", "start", "count", "info", "created_at"),
    "compactions": ("slot", "number", "at", "record", "created_at"),
    "token_counts": ("slot", "encoding", "seq", "tokens"),
    "context_events": ("slot", "number", "at", "turn", "event", "created_at"),
    "marks": ("slot", "number", "position", "mark", "created_at"),
}
COPIED_SESSION_TABLES: dict[str, tuple[str, ...]] = {
    "namespace": ("session_id", "key", "tool", "content", "created_at"),
    "workflows": ("session_id", "name", "record", "active", "created_at"),
    "cells": ("session_id", "key", "seq", "record", "created_at"),
}
_TEXT_COLUMNS = {"messages": 4, "namespace": 3}  # columns that may hold any text (NUL included)


@dataclass(frozen=True)
class SessionDump:
    """Every stored row of one session, with slot row ids replaced by their rank (0, 1, ...
    in creation order): the same in any store, so two dumps compare equal exactly when the
    two stores hold the same session."""

    session_id: str
    created_at: float
    current: int | None
    slots: list[tuple[Any, ...]]  # ROW_COLUMNS, id and parent as ranks
    tables: dict[str, list[tuple[Any, ...]]]

    def message_digests(self) -> list[str]:
        """A SHA-256 of every message: its slot's name and rank, position, turn, role,
        content, token count, extra fields and time."""
        names = {row[0]: row[1] for row in self.slots}
        return [
            hashlib.sha256(
                json.dumps([names[row[0]], *row], ensure_ascii=False).encode("utf-8", "surrogatepass")
            ).hexdigest()
            for row in self.tables["messages"]
        ]

    def checksum(self) -> str:
        """One SHA-256 of everything in the dump."""
        whole = [self.session_id, self.created_at, self.current, self.slots, sorted(self.tables.items())]
        return hashlib.sha256(json.dumps(whole, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()


class Cursor(Protocol):
    """What the shared code uses of a DB-API cursor (sqlite3's and psycopg's alike)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the shared code uses of a connection: statements with ``?`` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


# One string per role for every message read: a row's role is otherwise a string of its own.
_ROLE_STRINGS: dict[str, str] = {role: role for role in ROLES}


def _messages_from_rows(rows: Iterable[tuple[str, str, int, str | None]]) -> list[Message]:
    """Rebuild messages from trusted rows without re-running validation: loading a long
    history is otherwise dominated by object construction. Kept small, since a full slot's
    history stays in memory: a message has slots, not a dict; every message of a role shares
    its role string, and equal token counts one int."""
    out: list[Message] = []
    append = out.append
    new = object.__new__
    put = object.__setattr__
    roles = _ROLE_STRINGS
    numbers: dict[int, int] = {}
    for role, content, tokens, extra in rows:
        message = new(Message)
        put(message, "role", roles.get(role, role))
        put(message, "content", content)
        put(message, "tokens", numbers.setdefault(tokens, tokens))
        if extra is None:  # the defaults (NO_EXTRA), set one by one: this runs for every message read
            put(message, "tool_calls", ())
            put(message, "tool_call_id", None)
            put(message, "name", None)
            put(message, "thinking", ())
            put(message, "is_error", False)
            put(message, "images", ())
        else:
            for name, value in fields_from_extra(json.loads(extra)).items():
                put(message, name, value)
        append(message)
    return out


def _extra_json(message: Message) -> str | None:
    extra = message.extra()
    return None if extra is None else json.dumps(extra, ensure_ascii=False)


def _info_json(info: TurnInfo) -> str:
    return json.dumps(info.to_dict(), ensure_ascii=False)


@dataclass(slots=True)
class _Row:
    """One row of the slots table, as cached."""

    key: int
    name: str
    parent: int | None
    fork_at: int
    length: int
    tokens: int
    turns: int
    stored_config: dict[str, Any] | str  # the JSON text as read, parsed when first asked
    created_at: float
    deleted_at: float | None
    undo: dict[str, Any] | None = None  # set on a row hidden by %slot undo (see migrations v7)
    parsed: tuple[str | None, SlotConfig] | None = None  # (parent name, config), parsed once
    shown: tuple[tuple[Any, ...], Slot] | None = None  # the Slot last made of it, and from what

    @property
    def live(self) -> bool:
        return self.deleted_at is None

    @property
    def config(self) -> dict[str, Any]:
        # parsed on demand: opening a session of 5,000 slots reads one or two of them
        if isinstance(self.stored_config, str):
            self.stored_config = json.loads(self.stored_config)
        assert isinstance(self.stored_config, dict)
        return self.stored_config

    @config.setter
    def config(self, value: dict[str, Any]) -> None:
        self.stored_config = value

    def slot_config(self, parent_name: str | None) -> SlotConfig:
        if self.parsed is None or self.parsed[0] != parent_name:
            stored = self.stored_config
            # most rows hold the same few texts: parse each text once per parent (SlotConfig is frozen)
            made = (
                _config_of(stored, parent_name)
                if isinstance(stored, str)
                else SlotConfig.from_dict(stored, parent_name)
            )
            self.parsed = (parent_name, made)
        return self.parsed[1]


@lru_cache(maxsize=4_096)
def _config_of(text: str, parent_name: str | None) -> SlotConfig:
    return SlotConfig.from_dict(json.loads(text), parent_name)


@dataclass(slots=True)
class _SessionRows:
    """Every slot row of one session (tombstones included), the live ones by name, and the
    current slot."""

    rows: dict[int, _Row]
    current: int | None
    by_name: dict[str, int] = field(default_factory=dict)
    order: tuple[list[tuple[Any, ...]], list[_Row]] | None = None  # _tree_order's, and what it was made of

    def __post_init__(self) -> None:
        self.by_name = {row.name: key for key, row in self.rows.items() if row.live}


@dataclass(slots=True)
class _Segment:
    """The part of one slot's own rows read so far: positions ``start`` to ``start + len``."""

    created_at: float
    start: int
    messages: list[Message]
    turns_until: int = 0  # turns starting before this position are in ``turns``
    turns: list[TurnRecord] = field(default_factory=list)
    cached_until: int = 0  # turns served partly from a prompt cache, before this position, are in ``cached``
    cached: list[TurnRecord] = field(default_factory=list)
    system_until: int = 0  # the first system message was looked for before this position
    first_system: tuple[int, Message] | None = None
    compactions: list[Compaction] | None = None  # all of the segment's, once read
    counts: dict[str, dict[int, int]] = field(default_factory=dict)  # encoding -> position -> tokens
    marks: list[tuple[int, Mark, float]] | None = None  # (position, mark, created_at), once read
    context: list[ContextEvent] | None = None  # all of the row's working-context changes, once read

    @property
    def end(self) -> int:
        return self.start + len(self.messages)


class RowStore:
    """The store logic over slot rows and segments, for a subclass that connects.

    A subclass sets ``self._db`` and implements ``_read`` (the connection, caches brought up
    to date), ``_transaction`` (one write transaction, joined inside ``atomic()``; ``_write``
    runs it), ``close`` and ``__init__``. Safe to share between threads: every call holds
    ``self._lock``.
    """

    # How a turn's cell id is read in SQL (indexed in both dialects).
    _CELL_ID_SQL: ClassVar[str] = "json_extract(turns.info, '$.cell.id')"
    # The error a unique index raises (a slot name taken by another connection meanwhile).
    _UNIQUE_VIOLATION: ClassVar[tuple[type[Exception], ...]] = ()
    # Whether a message's content holds a kept tool result's key (gc keeps those results).
    _CONTAINS_KEY_SQL: ClassVar[str] = "instr(m.content, namespace.key) > 0"
    # a turn some of whose input the provider's prompt cache served (the budget's savings line)
    _CACHED_SQL: ClassVar[str] = "COALESCE(json_extract(info, '$.usage.cached_tokens'), 0) > 0"

    _db: Connection
    refusal: str | None

    def _init_caches(self) -> None:
        self.user = current_user()
        self.viewing = False
        self.following: str | None = None  # the session subscribers show (see follow)
        self._touched: set[str] | None = None  # the sessions the write in progress read or changed
        self._quiet = False  # the write in progress changes only what no view shows (counts, meta)
        self._lock = threading.RLock()
        self._sessions: dict[str, _SessionRows] = {}
        self._segments: dict[int, _Segment] = {}
        self._created: dict[int, float] = {}  # slot row -> created_at, for segments of rows read
        self._generation = 0  # see generation(): bumped by every write and every change noticed
        self._others_seen = 0  # writes of other connections noticed so far (see SQLiteStore.subscribe)
        self._subscribers: list[Callable[[], None]] = []  # told of other connections' writes
        # session -> (generation, the active workflow, or why it cannot be read)
        self._active_workflows: dict[str, tuple[int, Workflow | DamagedRecord | None]] = {}

    def _read(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction (refused when the store refuses writes). The generation moves
        on before and after it, whether it commits or not: nothing computed from the store
        during a write is kept as current."""
        with self._lock:
            if self.refusal is not None:
                raise StoreError(self.refusal)
            self._generation += 1
            try:
                with self._transaction() as db:
                    yield db
            finally:
                self._generation += 1

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _text_in(self, text: str) -> str:
        """A message's or tool result's text as the database stores it."""
        return text

    def _text_out(self, text: str) -> str:
        """Stored text as it was given (the inverse of ``_text_in``)."""
        return text

    def _messages(self, rows: Iterable[tuple[str, str, int, str | None]]) -> list[Message]:
        return _messages_from_rows(rows)

    # -- copying whole sessions between stores ---------------------------------------------------

    def dump_session(self, session_id: str) -> SessionDump:
        """Every row of the session (tombstones, turn records, compactions, counts, working
        context, workflows and kept tool results included), read in one transaction."""
        # Under the write lock no other writer changes it half way; a store that refuses writes
        # (a read-only file) is read as it is.
        with self._write() if self.refusal is None else self._read() as db:
            found = db.execute("SELECT created_at, current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if found is None:
                raise StoreError(f"there is no session {session_id!r} to copy")
            rows = db.execute(f"SELECT {ROW_COLUMNS} FROM slots WHERE session_id = ? ORDER BY id", (session_id,))
            slots = [tuple(r) for r in rows.fetchall()]
            rank = {row[0]: i for i, row in enumerate(slots)}
            ranked = [(rank[r[0]], r[1], None if r[2] is None else rank[r[2]], *r[3:]) for r in slots]
            tables: dict[str, list[tuple[Any, ...]]] = {}
            for table, columns in COPIED_SLOT_TABLES.items():
                out: list[tuple[Any, ...]] = []
                for key in rank:
                    order = ", ".join(columns[1:3])
                    for r in db.execute(
                        f"SELECT {', '.join(columns)} FROM {table} WHERE slot = ? ORDER BY {order}", (key,)
                    ):
                        out.append(self._row_out(table, (rank[r[0]], *r[1:])))
                tables[table] = out
            for table, columns in COPIED_SESSION_TABLES.items():
                found_rows = db.execute(
                    f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ? ORDER BY {columns[1]}",
                    (session_id,),
                )
                tables[table] = [self._row_out(table, tuple(r)) for r in found_rows]
            current = None if found[1] is None else rank.get(found[1])
            return SessionDump(session_id, found[0], current, ranked, tables)

    def _row_out(self, table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
        column = _TEXT_COLUMNS.get(table)
        if column is None:
            return row
        return (*row[:column], self._text_out(row[column]), *row[column + 1 :])

    def load_session(self, dump: SessionDump) -> None:
        """Store a dumped session, all of it or nothing; a session of that id must not exist."""
        with self._write() as db:
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (dump.session_id,)).fetchone() is not None:
                raise StoreError(f"session {dump.session_id!r} exists already in the destination; nothing was copied")
            db.execute("INSERT INTO sessions (id, created_at) VALUES (?, ?)", (dump.session_id, dump.created_at))
            keys: dict[int, int] = {}
            for rank, name, parent, *rest in dump.slots:
                keys[rank] = int(
                    db.execute(
                        "INSERT INTO slots (session_id, name, parent, fork_at, length, tokens, turns, config,"
                        " created_at, deleted_at, undo) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                        (dump.session_id, name, None if parent is None else keys[parent], *rest),
                    ).fetchall()[0][0]
                )
            if dump.current is not None:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (keys[dump.current], dump.session_id))
            for table, columns in {**COPIED_SLOT_TABLES, **COPIED_SESSION_TABLES}.items():
                rows = dump.tables.get(table, [])
                if table in COPIED_SLOT_TABLES:
                    rows = [(keys[r[0]], *r[1:]) for r in rows]
                column = _TEXT_COLUMNS.get(table)
                if column is not None:
                    rows = [(*r[:column], self._text_in(r[column]), *r[column + 1 :]) for r in rows]
                if rows:
                    marks = ", ".join("?" * len(columns))
                    db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
            self._sessions.pop(dump.session_id, None)

    def _others_wrote(self) -> None:
        """Another connection committed: slot rows are read again when next needed; segments
        stay valid (rows never change), unless their slot row was removed, or removed and its
        id reused by a new slot."""
        self._generation += 1
        self._others_seen += 1
        self._sessions.clear()
        self._created.clear()
        for segment in self._segments.values():
            # Another connection may have pinned, excluded or compacted: those are read again.
            segment.marks = segment.compactions = segment.context = None
        if self._segments:
            keys = list(self._segments)
            alive = dict(
                self._db.execute(
                    f"SELECT id, created_at FROM slots WHERE id IN ({','.join('?' * len(keys))})", keys
                ).fetchall()
            )
            for key in keys:
                if alive.get(key) != self._segments[key].created_at:
                    del self._segments[key]

    def _add_subscriber(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Keep ``callback`` among those ``_tell_subscribers`` calls; returns what removes it."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock, suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def _tell_subscribers(self) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback()
            except Exception:  # a subscriber's failure is its own business
                logger.debug("a store change subscriber failed", exc_info=True)

    def _forget(self) -> None:
        self._generation += 1
        self._sessions.clear()
        self._segments.clear()
        self._created.clear()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make several store calls one transaction: if the block raises, none of them happened."""
        with self._write():
            yield

    # -- cached rows -----------------------------------------------------------------------

    def _rows(self, db: Connection, session_id: str) -> _SessionRows:
        if self._touched is not None:
            self._touched.add(session_id)
        cached = self._sessions.get(session_id)
        if cached is not None:
            return cached
        found = db.execute("SELECT current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
        rows = {}
        for key, name, parent, fork_at, length, tokens, turns, config, created_at, deleted_at, undo in db.execute(
            f"SELECT {ROW_COLUMNS} FROM slots WHERE session_id = ?", (session_id,)
        ):
            rows[key] = _Row(
                key,
                name,
                parent,
                fork_at,
                length,
                tokens,
                turns,
                config,
                created_at,
                deleted_at,
                None if undo is None else json.loads(undo),
            )
            self._created[key] = created_at
        loaded = _SessionRows(rows, None if found is None else found[0])
        if found is not None:  # an unknown session is not cached: it may be created any time
            self._sessions[session_id] = loaded
        return loaded

    def _row(self, rows: _SessionRows, slot_id: str | None) -> _Row:
        """The live row of the slot (of the current slot if None)."""
        if slot_id is None:
            if rows.current is None:
                raise StoreError("the session has no current slot: open it with Session.open first")
            return rows.rows[rows.current]
        key = rows.by_name.get(slot_id)
        if key is None:
            raise SlotNotFound(slot_id, rows.by_name)
        return rows.rows[key]

    def _live_parent(self, rows: _SessionRows, row: _Row) -> str | None:
        """The nearest live ancestor: a deleted parent hands its children to its own parent."""
        found = _live_ancestor(rows, row)
        return None if found is None else found.name

    def _to_slot(self, rows: _SessionRows, row: _Row) -> Slot:
        parent_name = self._live_parent(rows, row)
        config = row.slot_config(parent_name)
        # the same Slot while nothing it shows changed: listing 5,000 slots after a turn makes one
        state = (row.name, parent_name, row.length, row.tokens, row.turns, row.fork_at, config, row.key == rows.current)
        if row.shown is not None and row.shown[0] == state:
            return row.shown[1]
        meta = SlotMeta(row.name, parent_name, row.length, row.tokens, row.created_at, row.turns, row.fork_at)
        slot = Slot(row.name, config, meta, row.key == rows.current)
        row.shown = (state, slot)
        return slot

    def _pieces(self, rows: _SessionRows, row: _Row, end: int | None = None) -> list[Piece]:
        """The pieces of a slot's history (its first ``end`` messages), root first."""
        pieces = []
        hi = row.length if end is None else min(row.length, end)
        current: _Row | None = row
        branched: float | None = None  # when the history left `current` for its child
        while current is not None:
            if current.fork_at < hi:
                pieces.append(Piece(current.key, current.fork_at, hi, branched))
            hi = min(hi, current.fork_at)
            branched = current.created_at
            current = None if current.parent is None else rows.rows[current.parent]
        pieces.reverse()
        return pieces

    def _history(self, rows: _SessionRows, row: _Row) -> History:
        tip, slot = Tip(row.key, row.length, row.turns), self._to_slot(rows, row)
        pieces, chain = self._pieces(rows, row), self._chain(rows, row)
        return History(pieces, self, tip, slot, chain=chain, generation=self._generation)

    def _chain(self, rows: _SessionRows, row: _Row) -> list[Piece]:
        """Every row of a slot's history, root first, as ``_pieces`` walks them but keeping
        the rows that hold no message of it (``lo == hi``): their working context counts."""
        chain = []
        hi = row.length
        current: _Row | None = row
        branched: float | None = None
        while current is not None:
            lo = min(current.fork_at, hi)
            chain.append(Piece(current.key, lo, hi, branched))
            hi = lo
            branched = current.created_at
            current = None if current.parent is None else rows.rows[current.parent]
        chain.reverse()
        return chain

    # -- segments (History reads through these) --------------------------------------------

    def _segment(self, key: int, lo: int) -> _Segment:
        segment = self._segments.get(key)
        if segment is None:
            created = self._created.get(key)
            if created is None:
                found = self._db.execute("SELECT created_at FROM slots WHERE id = ?", (key,)).fetchone()
                created = found[0] if found else 0.0
            segment = _Segment(created, lo, [])
            self._segments[key] = segment
        return segment

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
                    TurnRecord(number, start, count, TurnInfo.from_dict(json.loads(info)), created_at, (key, number))
                    for number, start, count, info, created_at in self._db.execute(
                        "SELECT number, start, count, info, created_at FROM turns"
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
                        TurnRecord(number, at, count, TurnInfo.from_dict(json.loads(info)), created_at, (key, number))
                        for number, at, count, info, created_at in self._db.execute(
                            "SELECT number, start, count, info, created_at FROM turns"
                            f" WHERE slot = ? AND start >= ? AND start < ? AND {self._CACHED_SQL} ORDER BY start",
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
                segment.compactions = [
                    Compaction.from_dict(json.loads(record), created_at, (key, number))
                    for number, record, created_at in self._db.execute(
                        "SELECT number, record, created_at FROM compactions WHERE slot = ? ORDER BY number", (key,)
                    )
                ]
            return [c for c in segment.compactions if c.at <= hi and (before is None or c.created_at < before)]

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

    def follow(self, session_id: str | None) -> None:
        """Tell subscribers only of other connections' writes to ``session_id`` (None: to any
        session). The PostgreSQL store's notifications name the sessions a write changed; a
        SQLite file's polling cannot tell, and tells of every write."""
        self.following = session_id

    def view_only(self, session_id: str) -> None:
        with self._lock:
            self.viewing = True
            self.refusal = (
                f"session {session_id!r} is open read-only (a view): nothing is stored; "
                "open it without read-only to write"
            )

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

    # -- large tool results (the namespace store) -----------------------------------------

    def namespace_put(self, session_id: str, key: str, tool: str, content: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO namespace (session_id, key, tool, content, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (session_id, key, tool, self._text_in(content), time.time()),
            )
            return cursor.rowcount > 0

    def namespace_get(self, session_id: str, key: str) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT content FROM namespace WHERE session_id = ? AND key = ?", (session_id, key))
            found = row.fetchone()
            return None if found is None else self._messages([("tool", found[0], 0, None)])[0].content

    def namespace_has(self, session_id: str, key: str) -> bool:
        with self._read() as db:
            row = db.execute("SELECT 1 FROM namespace WHERE session_id = ? AND key = ?", (session_id, key))
            return row.fetchone() is not None

    # -- small values kept across sessions ------------------------------------------------

    def meta(self, key: str) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

    def update_meta(self, key: str, update: Callable[[str | None], str]) -> str:
        """Replace a value by ``update(old value)``, in one transaction (two kernels updating
        it at once each see the other's update)."""
        with self._write() as db:
            self._quiet = True
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            value = update(None if row is None else str(row[0]))
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
            return value

    # -- cell records (engine/cells.py) -------------------------------------------------------

    def cell_record(self, session_id: str, key: str) -> CellRecord | None:
        """What the cell named ``key`` did when it first ran; None if it never ran, or if its
        record cannot be read (the cell then acts anew)."""
        with self._read() as db:
            found = db.execute(
                "SELECT seq, record FROM cells WHERE session_id = ? AND key = ?", (session_id, key)
            ).fetchone()
        if found is None:
            return None
        try:
            return CellRecord.from_dict(json.loads(found[1]), int(found[0]))
        except (ValueError, TypeError, AttributeError, DamagedRecord):
            return None

    def record_cell(self, session_id: str, key: str, record: CellRecord, *, replace: bool = False) -> CellRecord:
        """Keep ``record`` for the cell ``key``, numbered after every cell recorded so far;
        a record already there stays unless ``replace``. Returns the record kept."""
        with self._write() as db:
            found = db.execute(
                "SELECT seq, record FROM cells WHERE session_id = ? AND key = ?", (session_id, key)
            ).fetchone()
            if found is not None and not replace:
                with suppress(ValueError, TypeError, AttributeError, DamagedRecord):
                    return CellRecord.from_dict(json.loads(found[1]), int(found[0]))
            seq = int(
                db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM cells WHERE session_id = ?", (session_id,)
                ).fetchone()[0]
            )
            text = json.dumps(record.to_dict(), ensure_ascii=False)
            db.execute(
                "INSERT INTO cells (session_id, key, seq, record, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (session_id, key) DO UPDATE SET seq = excluded.seq, record = excluded.record,"
                " created_at = excluded.created_at",
                (session_id, key, seq, text, time.time()),
            )
            return record.with_seq(seq)

    def state_marker(self, session_id: str) -> str:
        """A digest of the session's state (slots, current slot, compactions, working-context
        changes, pins and workflows; not the messages' text, which only grows with a slot's
        length): equal markers, same state."""
        with self._read() as db:
            rows = self._rows(db, session_id)
            names = {row.key: row.name for row in rows.rows.values()}
            slots = sorted(
                json.dumps(
                    [
                        row.name,
                        names.get(row.parent) if row.parent is not None else None,
                        row.fork_at,
                        row.length,
                        row.turns,
                        row.config,
                        row.deleted_at is not None,
                        row.undo,
                        row.key == rows.current,
                    ],
                    sort_keys=True,
                    default=str,
                )
                for row in rows.rows.values()
            )
            counts = []
            for table in ("compactions", "context_events", "marks"):
                found = db.execute(
                    f"SELECT slot, COUNT(*) FROM {table} WHERE slot IN (SELECT id FROM slots WHERE session_id = ?)"
                    " GROUP BY slot",
                    (session_id,),
                )
                counts.append(sorted((names.get(k, ""), int(n)) for k, n in found))
            flows = [
                tuple(r)
                for r in db.execute(
                    "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY name", (session_id,)
                )
            ]
        whole = json.dumps([slots, counts, flows], ensure_ascii=False, sort_keys=True, default=str)
        return hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    # -- sessions --------------------------------------------------------------------------

    def ensure_session(self, session_id: str) -> None:
        with self._read() as db:
            if session_id in self._sessions:
                return
            # one row, not the session's slot rows: opening a session of 5,000 slots reads them
            # when something first needs them, not here
            found = db.execute("SELECT current_slot FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if found is not None and found[0] is not None:
                return
        with self._write() as db:
            if self._rows(db, session_id).current is not None:
                return  # another process created it while we waited
            now = time.time()
            db.execute("INSERT INTO sessions (id, created_at) VALUES (?, ?)", (session_id, now))
            key = self._insert_slot(db, session_id, DEFAULT_SLOT, SlotConfig(), now)
            db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
            self._sessions.pop(session_id, None)  # read again, whole

    def sessions(self) -> list[str]:
        with self._read() as db:
            return [r[0] for r in db.execute("SELECT id FROM sessions ORDER BY created_at, id")]

    def current_slot(self, session_id: str) -> str:
        with self._read() as db:
            rows = self._rows(db, session_id)
            row = rows.rows.get(rows.current) if rows.current is not None else None
            return DEFAULT_SLOT if row is None else row.name

    def set_current_slot(self, session_id: str, slot_id: str) -> None:
        with self._write() as db:
            rows = self._rows(db, session_id)
            key = self._row(rows, slot_id).key
            if rows.current != key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
                rows.current = key

    # -- slots -----------------------------------------------------------------------------

    def slots(self, session_id: str) -> list[Slot]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            return [self._to_slot(rows, row) for row in _tree_order(rows)]

    def last_messages(self, session_id: str, slot_ids: Iterable[str], role: str) -> dict[str, Message | None]:
        """The last stored message of ``role`` in each slot's history, reading only the end of
        each row's own messages: slots that share a stretch of history (a branch with no turn
        of its own since its fork) are answered by one read of it."""
        with self._read() as db:
            rows = self._rows(db, session_id)
            slot_ids = list(slot_ids)
            # Where each row's own last message of ``role`` is, for every row in one statement
            # (backwards along the primary key, stopping at the first): most slots' answers.
            tops: dict[int, int | None] = dict(
                db.execute(
                    "SELECT s.id, (SELECT m.seq FROM messages m WHERE m.slot = s.id AND m.role = ?"
                    " ORDER BY m.seq DESC LIMIT 1) FROM slots s WHERE s.session_id = ?",
                    (role, session_id),
                )
            )
            # (row key, hi) -> where its answer is: (key, seq), or None when there is none.
            places: dict[tuple[int, int], tuple[int, int] | None] = {}
            walked_out: dict[tuple[int, int], Message | None] = {}  # answered by the chunked walk

            def place(row: _Row | None, hi: int) -> tuple[int, int] | Message | None:
                walked: list[tuple[int, int]] = []
                answer: tuple[int, int] | Message | None = None
                while row is not None and hi > 0:
                    if (row.key, hi) in places:
                        answer = places[(row.key, hi)]
                        break
                    if (row.key, hi) in walked_out:
                        answer = walked_out[(row.key, hi)]
                        break
                    walked.append((row.key, hi))
                    top = tops.get(row.key)
                    if top is not None and top < hi:
                        answer = (row.key, top)
                        break
                    if top is not None and hi > row.fork_at:  # its last one is past ``hi``: walk back
                        message = self._last_below(row, hi, role)
                        if message is not None:
                            answer = message
                            break
                    hi = min(hi, row.fork_at)
                    row = None if row.parent is None else rows.rows[row.parent]
                for step in walked:
                    if isinstance(answer, Message):
                        walked_out[step] = answer
                    else:
                        places[step] = answer
                return answer

            answers = {slot_id: place((row := self._row(rows, slot_id)), row.length) for slot_id in slot_ids}
            wanted = sorted({a for a in answers.values() if isinstance(a, tuple)})
            read: dict[tuple[int, int], Message] = {}
            for at in range(0, len(wanted), 400):  # SQLite binds at most 32,766 values
                part = wanted[at : at + 400]
                pairs = ", ".join("(?, ?)" for _ in part)
                found = db.execute(
                    f"SELECT slot, seq, {MESSAGE_COLUMNS} FROM messages WHERE (slot, seq) IN (VALUES {pairs})",
                    [v for pair in part for v in pair],
                ).fetchall()
                for (key, seq), message in zip(
                    [(r[0], r[1]) for r in found], self._messages([r[2:] for r in found]), strict=True
                ):
                    read[(key, seq)] = message
            return {
                slot_id: a if isinstance(a, Message) or a is None else read.get(a) for slot_id, a in answers.items()
            }

    def _last_below(self, row: _Row, hi: int, role: str) -> Message | None:
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

    def slot(self, session_id: str, slot_id: str | None) -> Slot:
        with self._read() as db:
            rows = self._rows(db, session_id)
            return self._to_slot(rows, self._row(rows, slot_id))

    def has_slot(self, session_id: str, slot_id: str) -> bool:
        with self._read() as db:
            return slot_id in self._rows(db, session_id).by_name

    def _insert_slot(
        self,
        db: Connection,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        now: float,
        parent: int | None = None,
        fork_at: int = 0,
        tokens: int = 0,
        turns: int = 0,
    ) -> int:
        config_dict = config.to_dict()
        try:
            key = int(
                db.execute(
                    "INSERT INTO slots (session_id, name, parent, fork_at, length, tokens, turns, config, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (session_id, slot_id, parent, fork_at, fork_at, tokens, turns, json.dumps(config_dict), now),
                ).fetchall()[0][0]
            )
        except self._UNIQUE_VIOLATION:
            raise SlotExists(slot_id) from None
        rows = self._sessions.get(session_id)
        if rows is not None:
            rows.rows[key] = _Row(key, slot_id, parent, fork_at, fork_at, tokens, turns, config_dict, now, None)
            rows.by_name[slot_id] = key
        self._created[key] = now
        self._segments.pop(key, None)  # an id SQLite handed out again
        return key

    def create_slot(
        self,
        session_id: str,
        slot_id: str,
        config: SlotConfig,
        messages: Sequence[Message] = (),
        *,
        exist_ok: bool = False,
    ) -> tuple[Slot, bool]:
        with self._write() as db:
            rows = self._rows(db, session_id)
            if slot_id in rows.by_name:
                if exist_ok:
                    return self._to_slot(rows, self._row(rows, slot_id)), False
                raise SlotExists(slot_id)
            now = time.time()
            key = self._insert_slot(db, session_id, slot_id, config, now)
            row = rows.rows[key]
            if messages:
                self._append(db, row, 0, messages, TurnInfo(kind="preset"), now)
            return self._to_slot(rows, row), True

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
        with self._write() as db:
            rows = self._rows(db, session_id)
            if slot_id in rows.by_name:
                if exist_ok:
                    return self._to_slot(rows, self._row(rows, slot_id)), False
                raise SlotExists(slot_id)
            parent = self._row(rows, parent_id)
            length, tokens, turns = parent.length, parent.tokens, parent.turns
            if at is not None and at != length:
                self._check_fork_point(rows, parent, at)
                tokens, turns = self._prefix_totals(db, self._pieces(rows, parent, at))
                length = at
            key = self._insert_slot(db, session_id, slot_id, config, time.time(), parent.key, length, tokens, turns)
            return self._to_slot(rows, rows.rows[key]), True

    def _check_fork_point(self, rows: _SessionRows, parent: _Row, at: int) -> None:
        """A fork point is a whole turn boundary of the parent's history."""
        if not 0 <= at <= parent.length:
            raise ConfigError(
                f"cannot fork {parent.name!r} at message {at}: it holds {parent.length} messages "
                f"(use 0 to {parent.length})"
            )
        # A boundary is where a piece or a turn starts; only the piece holding `at` can say.
        piece = next(p for p in self._pieces(rows, parent) if p.lo <= at < p.hi)
        if (
            at == piece.lo
            or self._db.execute("SELECT 1 FROM turns WHERE slot = ? AND start = ?", (piece.key, at)).fetchone()
        ):
            return
        before, after = self._db.execute(
            "SELECT MAX(CASE WHEN start < ? THEN start END), MIN(CASE WHEN start > ? THEN start END)"
            " FROM turns WHERE slot = ? AND start >= ? AND start < ?",
            (at, at, piece.key, piece.lo, piece.hi),
        ).fetchone()
        lower = piece.lo if before is None else before
        upper = piece.hi if after is None else after
        raise ConfigError(
            f"cannot fork {parent.name!r} at message {at}: that is inside a turn; "
            f"fork at a turn boundary such as {lower} or {upper}"
        )

    def _prefix_totals(self, db: Connection, pieces: Sequence[Piece]) -> tuple[int, int]:
        """Tokens and last turn number of the messages the pieces hold."""
        tokens = turns = 0
        for piece in pieces:
            piece_tokens, piece_turn = db.execute(
                "SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT), COALESCE(MAX(turn), 0) FROM messages"
                " WHERE slot = ? AND seq >= ? AND seq < ?",
                (piece.key, piece.lo, piece.hi),
            ).fetchone()
            tokens += piece_tokens
            turns = max(turns, piece_turn)
        return tokens, turns

    def update_config(self, session_id: str, slot_id: str, config: SlotConfig) -> Slot:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            config_dict = config.to_dict()
            db.execute("UPDATE slots SET config = ? WHERE id = ?", (json.dumps(config_dict), row.key))
            row.config, row.parsed = config_dict, None
            return self._to_slot(rows, row)

    def rename_slot(self, session_id: str, old_id: str, new_id: str) -> Slot:
        if old_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be renamed; derive a copy under the new name")
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, old_id)
            if new_id in rows.by_name and new_id != old_id:
                raise SlotExists(new_id)
            db.execute("UPDATE slots SET name = ? WHERE id = ?", (new_id, row.key))
            del rows.by_name[old_id]
            row.name = new_id
            rows.by_name[new_id] = row.key
            return self._to_slot(rows, row)

    def delete_slot(self, session_id: str, slot_id: str) -> None:
        if slot_id == DEFAULT_SLOT:
            raise ProtectedSlot("the 'default' slot cannot be deleted (a session always keeps it)")
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if rows.current == row.key:
                default = self._row(rows, DEFAULT_SLOT).key
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (default, session_id))
                rows.current = default
            now = time.time()
            db.execute("UPDATE slots SET deleted_at = ? WHERE id = ?", (now, row.key))
            row.deleted_at = now
            del rows.by_name[slot_id]
            # Drop rows no live slot can reach: this slot's, and tombstone ancestors' that
            # were kept only for it. A slot with derived slots stays as a tombstone.
            current: _Row | None = row
            while current is not None and not current.live:
                if any(r.parent == current.key for r in rows.rows.values()):
                    break
                for table in SLOT_TABLES:
                    db.execute(f"DELETE FROM {table} WHERE slot = ?", (current.key,))
                db.execute("DELETE FROM slots WHERE id = ?", (current.key,))
                del rows.rows[current.key]
                self._segments.pop(current.key, None)
                current = None if current.parent is None else rows.rows[current.parent]

    # -- histories and turns ---------------------------------------------------------------

    def generation(self) -> int:
        with self._read():
            return self._generation

    def history(self, session_id: str, slot_id: str | None) -> History:
        with self._read() as db:
            rows = self._rows(db, session_id)
            return self._history(rows, self._row(rows, slot_id))

    def messages(self, session_id: str, slot_id: str) -> list[Message]:
        return self.history(session_id, slot_id).messages()

    def turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        return self.history(session_id, slot_id).turns()

    def tip(self, session_id: str, slot_id: str) -> Tip:
        with self._read() as db:
            row = self._row(self._rows(db, session_id), slot_id)
            return Tip(row.key, row.length, row.turns)

    def cell_turns(self, session_id: str, cell_id: str, slot_id: str) -> list[CellTurn]:
        with self._read() as db:
            found = db.execute(
                "SELECT turns.slot, number, start, count, info, turns.created_at FROM turns"
                " JOIN slots ON slots.id = turns.slot"
                f" WHERE {self._CELL_ID_SQL} = ? AND slots.session_id = ?"
                " ORDER BY turns.created_at, turns.slot, number",
                (cell_id, session_id),
            ).fetchall()
            if not found:
                return []
            rows = self._rows(db, session_id)
            mine = self._pieces(rows, self._row(rows, slot_id))
            out = []
            for key, number, start, count, info, created_at in found:
                held = any(p.key == key and p.lo <= start < p.hi for p in mine)
                owner = rows.rows[key]
                home = owner.name if owner.live else slot_id if held else self._any_holder(rows, key, start)
                if home is not None:
                    record = TurnRecord(
                        number, start, count, TurnInfo.from_dict(json.loads(info)), created_at, (key, number)
                    )
                    out.append(CellTurn(record, owner.name if owner.live else None, home, held))
            return out

    def _any_holder(self, rows: _SessionRows, key: int, start: int) -> str | None:
        """A live slot whose history holds position ``start`` of segment ``key``: a turn whose
        slot was deleted lives on in the slots derived after it."""
        for row in _tree_order(rows):
            if any(p.key == key and p.lo <= start < p.hi for p in self._pieces(rows, row)):
                return row.name
        return None

    def unshared_turns(self, session_id: str, slot_id: str) -> list[TurnRecord]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            shared: dict[int, int] = {}  # segment -> how far other live slots' histories reach into it
            for other in rows.rows.values():
                if other.live and other.key != row.key:
                    for piece in self._pieces(rows, other):
                        shared[piece.key] = max(shared.get(piece.key, 0), piece.hi)
            out: list[TurnRecord] = []
            for piece in self._pieces(rows, row):
                out.extend(self.read_turns(piece.key, max(piece.lo, shared.get(piece.key, 0)), piece.hi))
            return out

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
        if not messages:
            raise StoreError("a turn needs at least one message")
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if writable and row.slot_config(self._live_parent(rows, row)).mode is SlotMode.READONLY:
                raise SlotReadonly(row.name)
            if base is not None and base != Tip(row.key, row.length, row.turns):
                raise SlotMoved(row.name)
            return self._append(db, row, row.turns + 1, messages, info, time.time())

    def add_compaction(
        self, session_id: str, slot_id: str | None, compaction: Compaction, *, base: Tip | None = None
    ) -> Compaction:
        with self._write() as db:
            row = self._row(self._rows(db, session_id), slot_id)
            if base is not None and base != Tip(row.key, row.length, row.turns):
                raise SlotMoved(row.name)
            if not 0 < compaction.upto <= compaction.at <= row.length:
                raise StoreError(
                    f"a compaction of {row.name!r} must fold 1 to {row.length} messages, not {compaction.upto}"
                )
            number = db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM compactions WHERE slot = ?", (row.key,))
            number = number.fetchone()[0]
            now = time.time()
            db.execute(
                "INSERT INTO compactions (slot, number, at, record, created_at) VALUES (?, ?, ?, ?, ?)",
                (row.key, number, compaction.at, json.dumps(compaction.to_dict(), ensure_ascii=False), now),
            )
            stored = compaction.replace(created_at=now, origin=(row.key, number))
            segment = self._segments.get(row.key)
            if segment is not None and segment.compactions is not None:
                segment.compactions.append(stored)
            return stored

    def _append(
        self,
        db: Connection,
        row: _Row,
        number: int,
        messages: Sequence[Message],
        info: TurnInfo,
        now: float,
    ) -> TurnRecord:
        start = row.length
        if info.user is None and self.user is not None:
            info = info.replace(user=self.user)
        db.executemany(
            "INSERT INTO messages (slot, seq, turn, role, content, tokens, extra, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (row.key, start + i, number, m.role, self._text_in(m.content), m.tokens, _extra_json(m), now)
                for i, m in enumerate(messages)
            ],
        )
        db.execute(
            "INSERT INTO turns (slot, number, start, count, info, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (row.key, number, start, len(messages), _info_json(info), now),
        )
        length, tokens, turns = (
            start + len(messages),
            row.tokens + sum(m.tokens for m in messages),
            max(row.turns, number),
        )
        db.execute("UPDATE slots SET length = ?, tokens = ?, turns = ? WHERE id = ?", (length, tokens, turns, row.key))
        row.length, row.tokens, row.turns = length, tokens, turns
        record = TurnRecord(number, start, len(messages), info, now, (row.key, number))
        segment = self._segments.get(row.key)
        if segment is not None:  # keep what is cached whole; a gap would be read again anyway
            if segment.messages and segment.end == start:
                segment.messages.extend(messages)
            if segment.turns_until == start:
                segment.turns.append(record)
                segment.turns_until = length
        return record

    # -- working context and workflows ---------------------------------------------------------

    def read_context(self, key: int, hi: int, before: float | None) -> list[ContextEvent]:
        # Cached per segment as marks are (every view reads them); dropped when anyone writes some.
        with self._lock:
            segment = self._segment(key, 0)
            if segment.context is None:
                rows = self._db.execute(
                    "SELECT number, at, turn, event, created_at FROM context_events WHERE slot = ? ORDER BY number",
                    (key,),
                ).fetchall()
                try:
                    segment.context = [
                        ContextEvent.from_dict(json.loads(event), turn, at, created_at, (key, number))
                        for number, at, turn, event, created_at in rows
                    ]
                except (ValueError, TypeError, AttributeError) as exc:
                    why = " ".join(str(exc).split())[:120]
                    raise DamagedRecord(f"a working-context change cannot be read ({why})", str(key)) from None
            return [e for e in segment.context if e.at <= hi and (before is None or e.created_at < before)]

    def change_context(
        self,
        session_id: str,
        slot_id: str | None,
        change: Callable[[WorkingContext], ContextEvent | None],
    ) -> tuple[WorkingContext, ContextEvent | None]:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            context = self._history(rows, row).context()
            event = change(context)
            if event is None:
                return context, None
            number = db.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM context_events WHERE slot = ?", (row.key,)
            ).fetchone()[0]
            now = time.time()
            stamped = event.stamped(row.turns + 1, row.length, now, (row.key, number))
            db.execute(
                "INSERT INTO context_events (slot, number, at, turn, event, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (row.key, number, stamped.at, stamped.turn, json.dumps(stamped.to_dict(), ensure_ascii=False), now),
            )
            segment = self._segments.get(row.key)
            if segment is not None:
                segment.context = None  # read again, as stored, when next needed
            return context.apply(stamped), stamped

    def workflows(self, session_id: str) -> list[Workflow]:
        """The session's workflows that can be read (a damaged one is left out: see
        :meth:`damaged_workflows`)."""
        out = []
        with self._read() as db:
            for name, record, active in db.execute(
                "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY created_at, name",
                (session_id,),
            ):
                try:
                    out.append(_workflow(name, record, bool(active)))
                except DamagedRecord:
                    continue
        return out

    def damaged_workflows(self, session_id: str) -> list[DamagedRecord]:
        """Why each workflow of the session that cannot be read cannot be."""
        out = []
        with self._read() as db:
            for name, record, active in db.execute(
                "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY created_at, name",
                (session_id,),
            ):
                try:
                    _workflow(name, record, bool(active))
                except DamagedRecord as exc:
                    out.append(exc)
        return out

    def active_workflow(self, session_id: str) -> Workflow | None:
        with self._read() as db:
            # Every view asks: kept while the store's generation stands (any write moves it on).
            kept = self._active_workflows.get(session_id)
            if kept is not None and kept[0] == self._generation:
                if isinstance(kept[1], DamagedRecord):
                    raise kept[1]
                return kept[1]
            found = db.execute(
                "SELECT name, record FROM workflows WHERE session_id = ? AND active = 1", (session_id,)
            ).fetchone()
            try:
                workflow = None if found is None else _workflow(found[0], found[1], True)
            except DamagedRecord as exc:
                self._active_workflows[session_id] = (self._generation, exc)
                raise
            self._active_workflows[session_id] = (self._generation, workflow)
            return workflow

    def update_workflow(
        self,
        session_id: str,
        name: str,
        change: Callable[[Workflow | None], Workflow | None],
        *,
        activate: bool = False,
    ) -> Workflow | None:
        check_workflow_name(name)
        with self._write() as db:
            found = db.execute(
                "SELECT record, active FROM workflows WHERE session_id = ? AND name = ?", (session_id, name)
            ).fetchone()
            try:
                before = None if found is None else _workflow(name, found[0], bool(found[1]))
            except DamagedRecord:
                before = None  # damaged: defining it again repairs it, deleting it removes it
            after = change(before)
            if after is None:
                db.execute("DELETE FROM workflows WHERE session_id = ? AND name = ?", (session_id, name))
                return None
            if after.name != name:
                raise StoreError(f"a change of workflow {name!r} cannot rename it to {after.name!r}")
            record = json.dumps(after.to_dict(), ensure_ascii=False)
            if before is None:
                db.execute(
                    "INSERT INTO workflows (session_id, name, record, created_at) VALUES (?, ?, ?, ?)",
                    (session_id, name, record, time.time()),
                )
            elif after.to_dict() != before.to_dict():
                db.execute(
                    "UPDATE workflows SET record = ? WHERE session_id = ? AND name = ?", (record, session_id, name)
                )
            active = before is not None and before.active
            if activate and not active:
                self._activate(db, session_id, name)
                active = True
            return after.replace(active=active)

    def use_workflow(self, session_id: str, name: str | None) -> Workflow | None:
        with self._write() as db:
            if name is None:
                db.execute("UPDATE workflows SET active = 0 WHERE session_id = ? AND active = 1", (session_id,))
                return None
            found = db.execute(
                "SELECT record, active FROM workflows WHERE session_id = ? AND name = ?", (session_id, name)
            ).fetchone()
            if found is None:
                names = [r[0] for r in db.execute("SELECT name FROM workflows WHERE session_id = ?", (session_id,))]
                raise no_workflow(name, names)
            if not found[1]:
                self._activate(db, session_id, name)
            return _workflow(name, found[0], True)

    def _activate(self, db: Connection, session_id: str, name: str) -> None:
        db.execute("UPDATE workflows SET active = 0 WHERE session_id = ? AND active = 1", (session_id,))
        db.execute("UPDATE workflows SET active = 1 WHERE session_id = ? AND name = ?", (session_id, name))

    # -- exploring: pins and exclusions ----------------------------------------------------------

    def read_marks(self, key: int, hi: int, before: float | None) -> list[tuple[int, Mark]]:
        # Cached per segment (every view reads them); dropped when another connection writes.
        with self._lock:
            segment = self._segment(key, 0)
            if segment.marks is None:
                segment.marks = [
                    (position, mark, created_at)
                    for position, mark, created_at in self._db.execute(
                        "SELECT position, mark, created_at FROM marks WHERE slot = ? ORDER BY number", (key,)
                    )
                    if mark in MARKS
                ]
            return [(p, m) for p, m, at in segment.marks if p < hi and (before is None or at < before)]

    def mark_message(self, session_id: str, slot_id: str | None, position: int, mark: Mark) -> None:
        if mark not in MARKS:
            raise ConfigError(f"unknown mark {mark!r}; use one of {', '.join(MARKS)}")
        with self._write() as db:
            row = self._row(self._rows(db, session_id), slot_id)
            if not 0 <= position < row.length:
                raise ConfigError(
                    f"slot {row.name!r} has no message {position + 1}: it holds {row.length} (%slot show lists them)"
                )
            now = self._insert_numbered(db, "marks", row.key, "position, mark", (position, mark))
            segment = self._segments.get(row.key)
            if segment is not None and segment.marks is not None:
                segment.marks.append((position, mark, now))

    def _insert_numbered(self, db: Connection, table: str, key: int, columns: str, values: tuple[Any, ...]) -> float:
        """Insert a row numbered after the segment's last; returns its created_at."""
        number = db.execute(f"SELECT COALESCE(MAX(number), 0) + 1 FROM {table} WHERE slot = ?", (key,)).fetchone()[0]
        marks = ", ".join("?" * (len(values) + 3))
        now = time.time()
        db.execute(
            f"INSERT INTO {table} (slot, number, {columns}, created_at) VALUES ({marks})", (key, number, *values, now)
        )
        return now

    # -- exploring: undo and redo ----------------------------------------------------------------

    def _undo_step(self, rows: _SessionRows, hidden: _Row, slot: str, repeated: bool = False) -> UndoStep:
        assert hidden.undo is not None and hidden.deleted_at is not None
        undo = hidden.undo
        return UndoStep(
            slot,
            int(undo["turns"]),
            int(undo["at"]),
            hidden.length,
            undo.get("cell"),
            hidden.deleted_at,
            self._history(rows, hidden),
            repeated,
        )

    def undo(self, session_id: str, slot_id: str | None, turns: int, *, cell: str | None = None) -> UndoStep:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if cell is not None:
                for hidden in rows.rows.values():
                    if (
                        hidden.undo is not None
                        and hidden.undo.get("cell") == cell
                        and _replacement(rows, hidden) is row
                    ):
                        return self._undo_step(rows, hidden, row.name, repeated=True)
            records = [t for t in self._history(rows, row).turns() if t.info.kind != "preset"]
            if not 1 <= turns <= len(records):
                have = f"only {len(records)}" if records else "no"
                raise ConfigError(f"cannot undo {turns} turns of slot {row.name!r}: it has {have} turns to undo")
            at = records[-turns].start
            tokens, last = self._prefix_totals(db, self._pieces(rows, row, at))
            now = time.time()
            # Hide the old row first: a slot's name is unique among live rows.
            db.execute("UPDATE slots SET deleted_at = ? WHERE id = ?", (now, row.key))
            key = int(
                db.execute(
                    "INSERT INTO slots (session_id, name, parent, fork_at, length, tokens, turns, config, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (session_id, row.name, row.key, at, at, tokens, last, json.dumps(row.config), now),
                ).fetchall()[0][0]
            )
            undo = {"by": key, "turns": turns, "at": at, "cell": cell}
            db.execute("UPDATE slots SET undo = ? WHERE id = ?", (json.dumps(undo), row.key))
            if rows.current == row.key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (key, session_id))
            self._sessions.pop(session_id, None)
            rows = self._rows(db, session_id)
            return self._undo_step(rows, rows.rows[row.key], row.name)

    def redo(self, session_id: str, slot_id: str | None, *, branch: str | None = None) -> UndoStep:
        with self._write() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            if branch is not None:
                return self._branch_undone(db, session_id, rows, row, branch)
            hidden = next((h for h in rows.rows.values() if h.undo is not None and h.undo.get("by") == row.key), None)
            if hidden is None:
                raise ConfigError(f"nothing to redo in slot {row.name!r}: it has no undo step to return from")
            if row.length != row.fork_at:
                raise ConfigError(
                    f"cannot redo in slot {row.name!r}: it has had turns since the undo; "
                    "%slot redo --as NAME makes the undone turns a branch of their own"
                )
            step = self._undo_step(rows, hidden, row.name)
            # What the slot gathered since the undo (pins, working context, compactions) stays.
            for table in ("marks", "context_events", "compactions"):
                offset = db.execute(f"SELECT COALESCE(MAX(number), 0) FROM {table} WHERE slot = ?", (hidden.key,))
                db.execute(
                    f"UPDATE {table} SET slot = ?, number = number + ? WHERE slot = ?",
                    (hidden.key, offset.fetchone()[0], row.key),
                )
            db.execute("UPDATE slots SET parent = ? WHERE parent = ?", (hidden.key, row.key))
            db.execute("DELETE FROM token_counts WHERE slot = ?", (row.key,))
            db.execute("DELETE FROM slots WHERE id = ?", (row.key,))
            db.execute(
                "UPDATE slots SET deleted_at = NULL, undo = NULL, name = ?, config = ? WHERE id = ?",
                (row.name, json.dumps(row.config), hidden.key),
            )
            if rows.current == row.key:
                db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (hidden.key, session_id))
            self._sessions.pop(session_id, None)
            self._segments.pop(row.key, None)
            segment = self._segments.get(hidden.key)
            if segment is not None:
                segment.compactions = segment.marks = segment.context = None  # some were just moved here
            return step

    def _branch_undone(self, db: Connection, session_id: str, rows: _SessionRows, row: _Row, branch: str) -> UndoStep:
        steps = [h for h in rows.rows.values() if h.undo is not None and _replacement(rows, h) is row]
        if not steps:
            raise ConfigError(f"slot {row.name!r} has no undone turns to make a branch of")
        hidden = max(steps, key=lambda h: h.deleted_at or 0.0)
        step = self._undo_step(rows, hidden, row.name)
        # A slot on the hidden row's whole history; the hidden row stays, as a tombstone does.
        self._insert_slot(
            db,
            session_id,
            branch,
            SlotConfig.from_dict(hidden.config, row.name),
            time.time(),
            hidden.key,
            hidden.length,
            hidden.tokens,
            hidden.turns,
        )
        return step

    def undo_steps(self, session_id: str, slot_id: str | None) -> list[UndoStep]:
        with self._read() as db:
            rows = self._rows(db, session_id)
            row = self._row(rows, slot_id)
            steps = [
                self._undo_step(rows, hidden, row.name)
                for hidden in rows.rows.values()
                if hidden.undo is not None and _replacement(rows, hidden) is row
            ]
            return sorted(steps, key=lambda s: s.created_at, reverse=True)

    # -- exploring: search -----------------------------------------------------------------------

    def search(self, session_id: str, query: str, slot_id: str | None = None, *, limit: int = 20) -> list[SearchHit]:
        words = search_words(query)
        if not words:
            raise ConfigError("nothing to search for: give a word or two, e.g. %slot search deposit")
        with self._read() as db:
            rows = self._rows(db, session_id)
            only = None if slot_id is None else self._row(rows, slot_id)
            holders = [(r, self._pieces(rows, r)) for r in ([only] if only else _tree_order(rows))]
            hits: list[SearchHit] = []
            for key, seq, turn, role, snippet in self._matches_for(db, session_id, words, limit):
                hit = self._hit_home(rows, holders, key, seq, only is None)
                if hit is not None:
                    hits.append(SearchHit(hit[0], turn, seq, role, snippet, hit[1]))
                    if len(hits) >= limit:
                        break
            return hits

    def _hit_home(
        self, rows: _SessionRows, holders: list[tuple[_Row, list[Piece]]], key: int, seq: int, anywhere: bool
    ) -> tuple[str, bool] | None:
        """The slot to name for a message: its owner if live, a live slot holding it, else
        (``anywhere``) the slot whose undo history holds it."""
        owner = rows.rows.get(key)
        if anywhere and owner is not None and owner.live:
            return owner.name, False
        for row, pieces in holders:
            if any(p.key == key and p.lo <= seq < p.hi for p in pieces):
                return row.name, False
        if anywhere:
            for hidden in rows.rows.values():
                replaced = _replacement(rows, hidden) if hidden.undo is not None else None
                if replaced is not None and any(
                    p.key == key and p.lo <= seq < p.hi for p in self._pieces(rows, hidden)
                ):
                    return replaced.name, True
        return None

    # -- exploring: gc ---------------------------------------------------------------------------

    def gc(self, session_id: str, *, drop_undo: bool = False) -> GcReport:
        if self.refusal is not None:  # before the checkpoint below, which writes
            raise StoreError(self.refusal)
        before = self._file_size()
        with self._write() as db:
            rows = self._rows(db, session_id)
            for row in rows.rows.values():
                if row.undo is not None and (drop_undo or _replacement(rows, row) is None):
                    # Forgotten on request, or its slot was deleted: a plain tombstone now.
                    db.execute("UPDATE slots SET undo = NULL WHERE id = ?", (row.key,))
                    row.undo = None
            # How far into each segment a live slot or a kept undo step reaches.
            reach: dict[int, int] = {}
            for row in rows.rows.values():
                if row.live or row.undo is not None:
                    for piece in self._pieces(rows, row):
                        reach[piece.key] = max(reach.get(piece.key, 0), piece.hi)
            messages = turns = 0
            for row in list(rows.rows.values()):
                if row.live or row.undo is not None:
                    continue
                end = reach.get(row.key, row.fork_at)
                if end <= row.fork_at and not any(r.parent == row.key for r in rows.rows.values()):
                    end = -1  # nothing of it is reached and nothing hangs from it: the row goes too
                cut = max(end, 0)
                messages += db.execute("DELETE FROM messages WHERE slot = ? AND seq >= ?", (row.key, cut)).rowcount
                turns += db.execute("DELETE FROM turns WHERE slot = ? AND start >= ?", (row.key, cut)).rowcount
                db.execute("DELETE FROM token_counts WHERE slot = ? AND seq >= ?", (row.key, cut))
                db.execute("DELETE FROM marks WHERE slot = ? AND position >= ?", (row.key, cut))
                db.execute("DELETE FROM compactions WHERE slot = ? AND at > ?", (row.key, cut))
                db.execute("DELETE FROM context_events WHERE slot = ? AND at > ?", (row.key, cut))
                if end < 0:
                    db.execute("DELETE FROM slots WHERE id = ?", (row.key,))
                else:
                    db.execute("UPDATE slots SET length = ? WHERE id = ?", (max(cut, row.fork_at), row.key))
            namespace = db.execute(
                "DELETE FROM namespace WHERE session_id = ? AND NOT EXISTS (SELECT 1 FROM messages m"
                " JOIN slots s ON s.id = m.slot WHERE s.session_id = namespace.session_id"
                f" AND {self._CONTAINS_KEY_SQL})",
                (session_id,),
            ).rowcount
            self._forget()
        compacted = self._compact_file()
        return GcReport(messages, turns, namespace, before, self._file_size(), compacted)

    def _matches_for(
        self, db: Connection, session_id: str, words: list[str], limit: int
    ) -> Iterable[tuple[int, int, int, str, str]]:
        """``_matches`` for a search that keeps about ``limit`` of them: a dialect that can make
        snippets only for those does so (SQLite)."""
        return self._matches(db, session_id, words)

    def _matches(self, db: Connection, session_id: str, words: list[str]) -> Iterable[tuple[int, int, int, str, str]]:
        """Messages of the session matching every word, best first: (slot row, position, turn,
        role, snippet with the matches marked ``[…]``). The dialect's full-text search."""
        raise NotImplementedError

    def _file_size(self) -> int:
        """How many bytes the store takes (gc reports the difference)."""
        raise NotImplementedError

    def _compact_file(self) -> bool:
        """Give the space gc freed back; False when it could not be done now."""
        return True


MAX_SEARCH_WORDS = 50


def search_words(query: str) -> list[str]:
    """The different words of a search (case aside; a NUL separates words, as the full-text
    index reads it). More than :data:`MAX_SEARCH_WORDS` is refused in one line: each word is a
    condition every message is checked against, and a pasted page made SQLite refuse the
    query ("Expression tree is too large") or PostgreSQL take minutes."""
    words: dict[str, str] = {}
    for word in query.replace("\x00", " ").split():
        words.setdefault(word.casefold(), word)
    if len(words) > MAX_SEARCH_WORDS:
        raise ConfigError(
            f"a search takes at most {MAX_SEARCH_WORDS} different words, not {len(words):,}: "
            "search for the few that matter (a message is found when it holds every one)"
        )
    return list(words.values())


def _tree_order(rows: _SessionRows) -> list[_Row]:
    """Live slots depth first, each after its nearest live ancestor, siblings by fork point
    then id: the same order whatever order they were made in, so a re-run notebook lists
    its slots as the first run did. Kept until a row's place changes (a turn changes none)."""
    shape = [
        (r.key, r.name, r.parent, r.fork_at, r.deleted_at, r.undo and r.undo.get("by")) for r in rows.rows.values()
    ]
    if rows.order is None or rows.order[0] != shape:
        rows.order = (shape, _order(rows))
    return rows.order[1]


def _order(rows: _SessionRows) -> list[_Row]:
    children: dict[int | None, list[_Row]] = {}
    for row in rows.rows.values():
        if row.live:
            parent = _live_ancestor(rows, row)
            children.setdefault(None if parent is None else parent.key, []).append(row)
    out: list[_Row] = []
    stack = sorted(children.get(None, []), key=lambda r: (r.name != DEFAULT_SLOT, r.fork_at, r.name), reverse=True)
    while stack:
        row = stack.pop()
        out.append(row)
        stack.extend(sorted(children.get(row.key, []), key=lambda r: (r.fork_at, r.name), reverse=True))
    return out


def _replacement(rows: _SessionRows, row: _Row) -> _Row | None:
    """The live row that now holds the slot a row hidden by undo was (None: not hidden by
    undo, or that slot is gone)."""
    seen: set[int] = set()
    current: _Row | None = row
    while current is not None and not current.live and current.undo is not None and current.key not in seen:
        seen.add(current.key)
        current = rows.rows.get(current.undo.get("by", -1))
    return current if current is not None and current.live else None


def _live_ancestor(rows: _SessionRows, row: _Row) -> _Row | None:
    """The nearest live ancestor: a deleted parent hands its children to its own parent; one
    hidden by undo, to the slot that replaced it (unless that is ``row`` itself)."""
    parent = row.parent
    while parent is not None:
        ancestor = rows.rows[parent]
        if ancestor.live:
            return ancestor
        replaced = _replacement(rows, ancestor)
        if replaced is not None and replaced.key != row.key:
            return replaced
        parent = ancestor.parent
    return None


def _workflow(name: str, record: str, active: bool) -> Workflow:
    """A stored workflow; ``DamagedRecord`` saying how to repair it when it cannot be read."""
    try:
        return Workflow.from_dict(name, json.loads(record), active=active)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise DamagedRecord(
            f"workflow {name!r} cannot be read ({why}): %workflow delete {name} removes it, "
            f"%%workflow {name} defines it again",
            name,
        ) from None
