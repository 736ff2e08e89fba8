"""The SQLite store: every session, slot and message in one file.

The store logic (slot rows, segments, histories, the concurrency rule) is ``rows.RowStore``,
shared with the PostgreSQL store; this module opens the file (see ``opening.py`` and
``migrations.py``), runs write transactions (``BEGIN IMMEDIATE``: one writer at a time) and
asks SQLite whether another connection wrote anything (``PRAGMA data_version``, a few
microseconds at each call).

Durability: WAL journal with ``synchronous=NORMAL``. Every turn is one transaction, so after
a crash of the process (kernel killed, machine out of memory) a slot holds a turn whole or not
at all; a power cut may lose the last turns committed before it, never corrupt the file.
``durability="full"`` makes each commit wait for the disk.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Literal

from .._errors import StoreError
from .connection import GuardedConnection, guarded, readonly_message
from .migrations import MIGRATIONS, migrate, newer_schema_message
from .opening import (
    FULL_CHECK_BYTES,
    FileInfo,
    backup_before_migrating,
    check_header,
    check_integrity,
    check_path,
    check_whole,
    closed_whole,
    connect_readonly,
    create_private,
    file_bytes,
    file_stamp,
    found_damaged,
    identify,
    known_whole,
    nothing_to_write_back,
    readonly_reason,
    use_wal,
)
from .rows import Dialect, RowStore

logger = logging.getLogger("slotmagic")

Durability = Literal["normal", "full"]


class SQLiteStore(RowStore):
    """A store in one SQLite file (or ``":memory:"``). Safe to share between threads."""

    _DIALECT: ClassVar[Dialect] = "sqlite"
    _UNIQUE_VIOLATION: ClassVar[tuple[type[Exception], ...]] = (sqlite3.IntegrityError,)
    _db: GuardedConnection

    def __init__(
        self, path: str | os.PathLike[str], *, durability: Durability = "normal", timeout: float = 10.0
    ) -> None:
        self.path = check_path(path)
        if durability not in ("normal", "full"):
            raise StoreError(f"unknown durability {durability!r}; use 'normal' or 'full'")
        self._init_caches()
        self._data_version: int | None = None
        self._scope = threading.local()  # this thread's consistent() block: open, and whether it looked
        self._watcher: _Watcher | None = None
        self._others_polled = 0
        self.timeout = timeout
        self.readonly = False  # opened read-only on purpose: the file or its folder cannot be written
        self.damaged = False  # damage was found by a read or a write: nothing more is written
        self.refusal: str | None = None  # why writes are refused (read-only, damaged), or None
        # found whole when opened (True: every page of it checked), for close() to say so
        self._opened_whole: bool | None = None
        self._db = self._open(durability)

    # -- opening (see opening.py) ------------------------------------------------------------

    def _connect(self, target: str) -> GuardedConnection:
        db = sqlite3.connect(
            target, timeout=self.timeout, isolation_level=None, check_same_thread=False, factory=GuardedConnection
        )
        return self._guard(db)

    def _guard(self, db: sqlite3.Connection) -> GuardedConnection:
        guarded_db = guarded(db, self.path, self.timeout)
        guarded_db.on_damage = self._found_damage
        return guarded_db

    def _open(self, durability: Durability) -> GuardedConnection:
        """Check the file, then open it for writing (or keep a read-only connection, for a file
        that cannot be written). Nothing is written to a file that is damaged, someone else's
        or from a newer slotmagic."""
        if self.path == ":memory:":
            db = self._connect(self.path)
            migrate(db)
            return db
        try:
            created = create_private(self.path)
        except OSError as exc:
            raise StoreError(
                f"cannot create the state file {self.path} ({exc.strerror or exc}); "
                "point SLOTMAGIC_DB (or db_path) at a writable place"
            ) from None
        reason = readonly_reason(self.path)
        try:
            if reason is None and nothing_to_write_back(self.path):
                return self._open_checked(durability, created)
            if not created:
                check_header(self.path)
            return self._open_after_checking(durability, reason)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot use {self.path} as a slotmagic store ({exc}); move the file aside "
                "or point SLOTMAGIC_DB at another path"
            ) from None

    def _open_checked(self, durability: Durability, created: bool) -> GuardedConnection:
        """Open the connection the store keeps and check the file through it before anything
        is written: nothing beside the file (a WAL with frames, a rollback journal) that a
        read or a close could write into it (``nothing_to_write_back``)."""
        db = self._connect(self.path)
        try:
            stamp = file_stamp(self.path)  # before anything is read: a change meanwhile gives another
            info = known_whole(stamp)
            if info is None:
                info = FileInfo(0, True)
                size = file_bytes(self.path) if stamp is None else stamp[1][0]  # a stamp: no WAL frames
                if size > 0:
                    try:
                        info = identify(db, self.path)
                    except StoreError:
                        if not created:
                            check_header(self.path, db)  # not a database at all: says so instead
                        raise
                    check_whole(db, self.path, size=size, stamp=stamp, info=info)
            if info.version > len(MIGRATIONS):
                raise StoreError(newer_schema_message(info.version))
            self._prepare(db, durability, current=info.marked and info.version == len(MIGRATIONS), wal=info.wal)
            self._opened_whole = (file_bytes(self.path) if stamp is None else stamp[1][0]) <= FULL_CHECK_BYTES
        except BaseException:
            _close_without_checkpoint(db, self.path, self.timeout)
            raise
        return db

    def _open_after_checking(self, durability: Durability, reason: str | None) -> GuardedConnection:
        """Check the file through a read-only connection first, then open it for writing (or
        keep that one, for a file that cannot be written)."""
        checker: GuardedConnection | None = None
        try:
            info = FileInfo(0, True)
            if file_bytes(self.path) > 0:
                checker = self._guard(connect_readonly(self.path, self.timeout, GuardedConnection))
                info = identify(checker, self.path)
                check_integrity(checker, self.path)
            if info.version > len(MIGRATIONS):
                raise StoreError(newer_schema_message(info.version))
            if reason is not None:
                if info.empty:
                    raise StoreError(readonly_message(self.path, reason) + " (and it holds no store yet)")
                if info.version < len(MIGRATIONS):
                    raise StoreError(
                        f"{self.path} has schema version {info.version} and this slotmagic needs "
                        f"{len(MIGRATIONS)}; upgrading it needs writing, but {reason}: make it writable once"
                    )
                assert checker is not None
                db, checker = checker, None
                self.readonly, self.refusal = True, readonly_message(self.path, reason)
                logger.warning("%s", self.refusal)
                return db
            db = self._connect(self.path)
            try:
                self._prepare(db, durability)
            except BaseException:
                db.close()
                raise
            self._opened_whole = file_bytes(self.path) <= FULL_CHECK_BYTES
            return db
        finally:
            if checker is not None:
                checker.close()

    def _prepare(
        self, db: GuardedConnection, durability: Durability, *, current: bool = False, wal: bool = False
    ) -> None:
        """WAL (``wal``: the file is in WAL mode already, as just read through ``db``), the
        durability asked, the newest schema (``current``: marked and at the newest schema
        already). The busy timeout is the connection's own (``_connect``)."""
        if not wal:
            use_wal(db, self.path, self.timeout)
        db.execute(f"PRAGMA synchronous = {durability.upper()}")
        if not current:
            migrate(db, backup=backup_before_migrating)

    def _found_damage(self, message: str) -> None:
        self.damaged = True
        self.refusal = message
        if self._opened_whole is not None:
            self._opened_whole = None
            found_damaged(self.path)

    # -- plumbing --------------------------------------------------------------------------

    def _read(self) -> _Reading:
        """The connection, with the caches brought up to date with other connections' writes."""
        return _Reading(self)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits or none of it does. Inside ``atomic()``
        it joins the enclosing transaction."""
        with self._lock:
            db = self._db
            if db.in_transaction:
                yield db
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                # Holding the write lock now: what others committed before is what we build on.
                self._sync()
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                self._forget()  # the caches may hold what was just rolled back
                raise
            db.execute("COMMIT")

    def consistent(self) -> _Consistent:
        """See ``Store.consistent``: in the block, this thread's first read asks whether others
        wrote (``PRAGMA data_version``) and the rest read on from there. A write transaction
        still asks again once it holds the write lock."""
        return _Consistent(self._scope)

    def _sync(self) -> None:
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        first = self._data_version is None
        self._data_version = version
        if not first:
            self._others_wrote()

    # -- gc: the file's size, and giving freed pages back (see rows/search.py) -----------------

    def _rowids(self) -> list[int]:
        """Every message's rowid in (slot, seq) order: the index follows rowids, so it needs a
        rebuild only if VACUUM changed one (it rarely does: a scan of ints, not of the text)."""
        return [r for (r,) in self._db.execute("SELECT rowid FROM messages ORDER BY slot, seq")]

    def _file_size(self) -> int:
        with self._lock:
            if self.path == ":memory:":
                count, size = (self._db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
                return int(count * size)
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return file_bytes(self.path)

    def _compact_file(self) -> bool:
        """VACUUM gives freed pages back to the file system; it may renumber the messages'
        rowids, so the search index is rebuilt after it. False when another connection was
        in the middle of reading: the file then keeps its size (the new pages wait in the WAL)."""
        with self._lock:
            before = self._rowids()
            try:
                self._db.execute("VACUUM")
            except sqlite3.OperationalError as exc:
                logger.info("gc could not compact %s now: %s", self.path, exc)
                return False
            if self._rowids() != before:  # renumbered: the index points at other messages now
                with self._write() as db:
                    db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")  # every message
                    db.execute(
                        "UPDATE meta SET value = (SELECT COALESCE(MAX(rowid), 0) FROM messages) WHERE key = 'fts_upto'"
                    )
            self._forget()
            if self.path == ":memory:":
                return True
            busy = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            return not busy

    # -- live across kernels -------------------------------------------------------------------

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (on a background thread) within ~a quarter second of another
        connection committing a write to this file; returns a function that stops it. SQLite
        has no notifications: a thread asks ``PRAGMA data_version``, a few microseconds."""
        unsubscribe = self._add_subscriber(callback)
        with self._lock:
            if self._watcher is None and self.path != ":memory:":  # no one else can write to that
                self._others_polled = self._others_seen  # from now on
                self._watcher = _Watcher(self)
                self._watcher.start()
        return unsubscribe

    def _poll(self) -> bool:
        """Bring the caches up to date; whether other connections wrote since the last poll
        (noticed now or by a read meanwhile)."""
        with self._lock:
            if not self._db.in_transaction:
                self._sync()
            seen, self._others_polled = self._others_polled, self._others_seen
            return seen != self._others_seen

    def close(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        with self._lock:
            if self.damaged and not self.readonly:
                _close_without_checkpoint(self._db, self.path, self.timeout)
            else:
                self._db.close()
            self._forget()
            full, self._opened_whole = self._opened_whole, None
            if full is not None and not self.damaged and not self.readonly:
                closed_whole(self.path, full, FileInfo(len(MIGRATIONS), False, marked=True, wal=True))


class _Consistent:
    """``SQLiteStore.consistent``: a class, not a generator, as ``_Reading`` (a turn enters one)."""

    __slots__ = ("_outer", "_scope")

    def __init__(self, scope: threading.local) -> None:
        self._scope = scope
        self._outer = False

    def __enter__(self) -> None:
        scope = self._scope
        self._outer = not getattr(scope, "open", False)  # an enclosing block keeps its look
        if self._outer:
            scope.open, scope.looked = True, False

    def __exit__(self, *exc: object) -> None:
        if self._outer:
            self._scope.open = self._scope.looked = False


class _Reading:
    """``SQLiteStore._read``: the store's lock held and its caches brought up to date. A class,
    not a generator: every read of the store enters one."""

    __slots__ = ("_store",)

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def __enter__(self) -> GuardedConnection:
        store = self._store
        store._lock.acquire()
        try:
            scope = store._scope
            if not getattr(scope, "looked", False):  # in a consistent() block, the first read looks
                store._sync()
                if getattr(scope, "open", False):
                    scope.looked = True
        except BaseException:
            store._lock.release()
            raise
        return store._db

    def __exit__(self, *exc: object) -> None:
        self._store._lock.release()


def _close_without_checkpoint(db: sqlite3.Connection, path: str, timeout: float) -> None:
    """Close a connection to a file found damaged (or refused) without writing to it: the last
    connection to close a file checkpoints its WAL into it, so a read-only one is held open
    meanwhile, to keep this one from being the last."""
    try:
        keeper: sqlite3.Connection | None = connect_readonly(path, timeout)
        assert keeper is not None
        keeper.execute("BEGIN")
        keeper.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # holds a read lock
    except sqlite3.Error:
        keeper = None
    db.close()
    if keeper is not None:
        keeper.close()


class _Watcher(threading.Thread):
    """Asks the store every ``interval`` seconds whether another connection wrote, and tells
    its subscribers when one did."""

    def __init__(self, store: SQLiteStore, interval: float = 0.25) -> None:
        super().__init__(name="slotmagic-watch", daemon=True)
        self._store, self._interval = store, interval
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        if self is not threading.current_thread():
            self.join(2)

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            try:
                changed = self._store._poll()
            except Exception:  # closed meanwhile, or damage found (reads say so themselves)
                logger.debug("watching the store stopped", exc_info=True)
                return
            if changed:
                self._store._tell_subscribers()
