"""What every part of a row store shares: the connection, the caches and the slot rows.

A part (``slots.py``, ``turns.py``, ...) is a class over ``RowsBase`` holding one concern's
SQL; ``RowStore`` (``__init__.py``) is all of them, and a dialect's store (``SQLiteStore``,
``PostgresStore``) subclasses it to connect. Where the dialects' SQL differs, the part holds
both forms side by side, keyed by ``RowsBase._DIALECT``.

Reads are served from memory: the slot rows of each session, and the parts of each segment
already read (``cache.py``). A store asks, at each call, whether another connection wrote
anything (cheaply: SQLite's ``PRAGMA data_version``, PostgreSQL's change counter); only then
are slot rows read again (``_others_wrote``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, ClassVar, Literal, Protocol, Self, TypeVar

from ..._core.messages import Message
from ..._core.slots import Slot
from ..._core.users import current_user
from ..._core.workflow import Workflow
from ..._errors import DamagedRecord, SlotNotFound, StoreError
from ..history import Piece
from .cache import SLOT_COLUMNS, Segment, SessionRows, SlotRow, live_ancestor, made_slot, messages_from_rows

logger = logging.getLogger("slotmagic")

Dialect = Literal["sqlite", "postgresql"]
T = TypeVar("T")

# The slots columns a slot row is made of (SlotRow's, in its order), as a select list.
SLOT_SELECT = ", ".join(f"slots.{column}" for column in SLOT_COLUMNS.values())
MESSAGE_COLUMNS = "role, content, tokens, extra"
# A session's current slot, then its slot rows: SlotRow(*got[1:]) of each row with a slot.
_SESSION_AND_SLOTS = (
    f"SELECT sessions.current_slot, {SLOT_SELECT}"
    " FROM sessions LEFT JOIN slots ON slots.session_id = sessions.id WHERE sessions.id = ?"
)
# The rows a cell on one slot needs: the current slot's and its ancestors' (then, for each other
# slot named, that slot's and its ancestors', _CHAIN_OF), along the primary key.
_UP = " UNION SELECT slots.parent FROM slots JOIN chain ON slots.id = chain.id WHERE slots.parent IS NOT NULL)"
_SESSION_AND_CURRENT = (
    "WITH RECURSIVE chain(id) AS (SELECT current_slot FROM sessions WHERE id = ?"
    + _UP
    + f" SELECT sessions.current_slot, {SLOT_SELECT}"
    " FROM sessions LEFT JOIN slots ON slots.session_id = sessions.id AND slots.id IN (SELECT id FROM chain)"
    " WHERE sessions.id = ?"
)
# Slot rows alone: SlotRow(*got).
_CHAIN_OF = (
    "WITH RECURSIVE chain(id) AS (SELECT id FROM slots WHERE session_id = ? AND name = ? AND deleted_at IS NULL"
    + _UP
    + f" SELECT {SLOT_SELECT} FROM slots WHERE id IN (SELECT id FROM chain)"
)
_CHAIN_OF_KEY = (
    "WITH RECURSIVE chain(id) AS (SELECT id FROM slots WHERE session_id = ? AND id = ?"
    + _UP
    + f" SELECT {SLOT_SELECT} FROM slots WHERE id IN (SELECT id FROM chain)"
)


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


class RowsBase:
    """The connection, the caches and the slot rows every part uses, for a subclass that
    connects.

    A subclass sets ``_DIALECT`` and ``self._db`` and implements ``_read`` (the connection,
    caches brought up to date), ``_transaction`` (one write transaction, joined inside
    ``atomic()``; ``_write`` runs it), ``close`` and ``__init__``. Safe to share between
    threads: every call holds ``self._lock``.
    """

    # Which SQL a part uses where the dialects differ.
    _DIALECT: ClassVar[Dialect]

    _db: Connection
    refusal: str | None

    def _init_caches(self) -> None:
        self.user = current_user()
        self.viewing = False
        self.following: str | None = None  # the session subscribers show (see follow)
        self._touched: set[str] | None = None  # the sessions the write in progress read or changed
        self._quiet = False  # the write in progress changes only what no view shows (counts, meta)
        self._lock = threading.RLock()
        self._sessions: dict[str, SessionRows] = {}
        self._segments: dict[int, Segment] = {}
        self._created: dict[int, float] = {}  # slot row -> created_at, for segments of rows read
        self._unverified: set[int] = set()  # segments whose slot row another connection may have removed
        self._generation = 0  # see generation(): bumped by every write and every change noticed
        self._others_seen = 0  # writes of other connections noticed so far (see SQLiteStore.subscribe)
        self._subscribers: list[Callable[[], None]] = []  # told of other connections' writes
        # session -> the active workflow, or why it cannot be read: kept until a workflow write
        # here, another connection's write to the session (or one naming none), or a rollback
        self._active_workflows: dict[str, Workflow | DamagedRecord | None] = {}

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

    def _drop_lost(self) -> None:
        """Let go of a connection known lost, and of the caches with it (a store whose
        connection can be lost: PostgreSQL). A file's cannot be."""

    def _send(self, db: Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per row where nothing reads its result (a turn's rows); a store may
        send them later in the same transaction (PostgreSQL: with its COMMIT)."""
        db.executemany(sql, rows)

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
        return messages_from_rows(rows)

    def _others_wrote(self) -> None:
        """Another connection committed: slot rows are read again when next needed; segments
        stay valid (rows never change), unless their slot row was removed, or removed and its
        id reused by a new slot."""
        self._generation += 1
        self._others_seen += 1
        self._sessions.clear()
        self._created.clear()
        self._active_workflows.clear()
        self._reread_segments(list(self._segments))

    def _reread_segments(self, keys: list[int], annotated: Iterable[int] | None = None) -> None:
        """Another connection may have changed these slots: the marks, compactions and
        working context of ``annotated`` (default: all of them) are read again, and a slot
        deleted or made anew is dropped when the segment is next used (``_segment``): by then
        its session's rows were mostly read again, which say so, with no statement of its own."""
        for key in keys if annotated is None else annotated:
            segment = self._segments[key]
            segment.marks = segment.compactions = segment.context = None
        self._unverified.update(keys)

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
        self._active_workflows.clear()
        self._sessions.clear()
        self._segments.clear()
        self._created.clear()
        self._unverified.clear()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make several store calls one transaction: if the block raises, none of them happened."""
        with self._write():
            yield

    def retried(self, call: Callable[[], T]) -> T:
        """See ``Store.retried``: a file's connection is not lost, so once."""
        return call()

    def consistent(self) -> AbstractContextManager[None]:
        """See ``Store.consistent``: each store looks for others' writes its own way."""
        raise NotImplementedError

    # -- cached rows -----------------------------------------------------------------------

    def _rows(self, db: Connection, session_id: str, every: bool = True) -> SessionRows:
        """The session's slot rows, kept until another connection writes: all of them, or
        (``every=False``, for what works on one slot) at least the current slot's with its
        ancestors; ``_row`` reads any other slot's when it is asked for. Listing, ordering
        or looking across slots needs ``every``."""
        if self._touched is not None:
            self._touched.add(session_id)
        cached = self._sessions.get(session_id)
        if cached is not None and (cached.partial_of is None or not every):
            return cached
        if not every:
            found = db.execute(_SESSION_AND_CURRENT, (session_id, session_id)).fetchall()
            read = self._read_slot_rows(session_id, found, partial=True)
            if read is not None:
                return read
        # the session's row and its slots' in one statement: none when the session is unknown,
        # one with no slot when it has none yet
        loaded = self._read_slot_rows(session_id, db.execute(_SESSION_AND_SLOTS, (session_id,)), partial=False)
        assert loaded is not None
        return loaded

    def _read_slot_rows(self, session_id: str, found: Iterable[Sequence[Any]], *, partial: bool) -> SessionRows | None:
        """Rows of ``(current_slot, *SLOT_SELECT)`` as the session's rows, cached when the
        session is known; None for a partial read that met a row hidden by undo (the slot
        that replaced it may be anywhere in the session: read it all)."""
        known, current, rows = False, None, {}
        for got in found:
            known, current = True, got[0]
            row = SlotRow(*got[1:])
            if row.key is None:
                continue  # a session with no slot yet
            rows[row.key] = row
            if partial and row.stored_undo is not None and not row.live:
                return None
        for row in rows.values():
            self._row_read(row)
        loaded = SessionRows(rows, current, partial_of=session_id if partial else None)
        if known:  # an unknown session is not cached: it may be created any time
            self._sessions[session_id] = loaded
        return loaded

    def _read_slot(self, rows: SessionRows, slot_id: str) -> SlotRow | None:
        """The live row of ``slot_id`` in a partial set of rows, read with its ancestors when
        not read yet (None: there is no such slot). A hidden ancestor makes the set whole."""
        assert rows.partial_of is not None
        self._read_chain(rows, self._db.execute(_CHAIN_OF, (rows.partial_of, slot_id)).fetchall())
        key = rows.by_name.get(slot_id)
        return None if key is None else rows.rows[key]

    def _row_of(self, rows: SessionRows, key: int) -> SlotRow | None:
        """Slot row ``key`` (live or not) of the session, read with its ancestors when a partial
        set lacks it (None: the session has no such row)."""
        if key not in rows.rows and rows.partial_of is not None:
            self._read_chain(rows, self._db.execute(_CHAIN_OF_KEY, (rows.partial_of, key)).fetchall())
        return rows.rows.get(key)

    def _read_chain(self, rows: SessionRows, found: list[Any]) -> None:
        """Rows of ``SLOT_SELECT`` (a slot's and its ancestors') added to a partial set; a row
        hidden by undo among them makes the set whole."""
        session_id = rows.partial_of
        assert session_id is not None
        made = [SlotRow(*got) for got in found]
        if any(row.stored_undo is not None and not row.live for row in made):
            whole = (SlotRow(*got[1:]) for got in self._db.execute(_SESSION_AND_SLOTS, (session_id,)))
            made = [row for row in whole if row.key is not None]
            rows.partial_of = None
        for row in made:
            if row.key not in rows.rows:
                self._row_read(row)
                rows.add(row)

    def _row_read(self, row: SlotRow) -> None:
        """A slot row as it is now: its segment, if one is cached and unverified (see
        ``_reread_segments``), is kept only if it was read from this very row."""
        key = row.key
        self._created[key] = row.created_at
        if key in self._unverified:
            self._unverified.discard(key)
            segment = self._segments.get(key)
            if segment is not None and segment.created_at != row.created_at:
                del self._segments[key]

    def _row(self, rows: SessionRows, slot_id: str | None) -> SlotRow:
        """The live row of the slot (of the current slot if None)."""
        if slot_id is None:
            if rows.current is None:
                raise StoreError("the session has no current slot: open it with Session.open first")
            return rows.rows[rows.current]
        found = self._live(rows, slot_id)
        if found is None:
            known = rows.by_name if rows.partial_of is None else self._names(rows.partial_of)
            raise SlotNotFound(slot_id, known)
        return found

    def _live(self, rows: SessionRows, slot_id: str) -> SlotRow | None:
        """The live row of the slot, None when there is none (read when a partial set lacks it)."""
        key = rows.by_name.get(slot_id)
        if key is not None:
            return rows.rows[key]
        return None if rows.partial_of is None else self._read_slot(rows, slot_id)

    def _names(self, session_id: str) -> list[str]:
        """The names of the session's live slots (an unknown name's suggestions)."""
        found = self._db.execute("SELECT name FROM slots WHERE session_id = ? AND deleted_at IS NULL", (session_id,))
        return [got[0] for got in found]

    def _live_parent(self, rows: SessionRows, row: SlotRow) -> str | None:
        """The nearest live ancestor: a deleted parent hands its children to its own parent."""
        found = live_ancestor(rows, row)
        return None if found is None else found.name

    def _to_slot(self, rows: SessionRows, row: SlotRow) -> Slot:
        parent_name = self._live_parent(rows, row)
        config = row.slot_config(parent_name)
        # the same Slot while nothing it shows changed: listing 5,000 slots after a turn makes one
        state = (row.name, parent_name, row.length, row.tokens, row.turns, row.fork_at, config, row.key == rows.current)
        if row.shown is not None and row.shown[0] == state:
            return row.shown[1]
        slot = made_slot(row, parent_name, config, row.key == rows.current)
        row.shown = (state, slot)
        return slot

    def _pieces(self, rows: SessionRows, row: SlotRow, end: int | None = None) -> list[Piece]:
        """The pieces of a slot's history (its first ``end`` messages), root first."""
        pieces = []
        hi = row.length if end is None else min(row.length, end)
        current: SlotRow | None = row
        branched: float | None = None  # when the history left `current` for its child
        while current is not None:
            if current.fork_at < hi:
                pieces.append(Piece(current.key, current.fork_at, hi, branched))
            hi = min(hi, current.fork_at)
            branched = current.created_at
            current = None if current.parent is None else rows.rows[current.parent]
        pieces.reverse()
        return pieces

    def _chain(self, rows: SessionRows, row: SlotRow) -> list[Piece]:
        """Every row of a slot's history, root first, as ``_pieces`` walks them but keeping
        the rows that hold no message of it (``lo == hi``): their working context counts."""
        chain = []
        hi = row.length
        current: SlotRow | None = row
        branched: float | None = None
        while current is not None:
            lo = min(current.fork_at, hi)
            chain.append(Piece(current.key, lo, hi, branched))
            hi = lo
            branched = current.created_at
            current = None if current.parent is None else rows.rows[current.parent]
        chain.reverse()
        return chain

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
