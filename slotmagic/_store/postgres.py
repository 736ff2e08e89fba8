"""The PostgreSQL store: sessions shared by kernels on several hosts.

``SLOTMAGIC_DB=postgresql://user@host/db?schema=team_a`` selects it. The store logic is the
SQLite store's (``rows.RowStore``); this module connects (psycopg 3: one connection, made
on demand, replaced when lost, closed after ``idle_timeout=`` seconds unused), migrates
(``postgres_schema.py``, under an advisory lock), runs write transactions and tells
subscribers about other connections' writes.

- **Writes take turns.** A write transaction first increments the one row of ``changes``;
  its row lock makes concurrent writers wait, as SQLite's ``BEGIN IMMEDIATE`` does, so the
  concurrency rule (``append_turn(base=...)``) is checked on what every other writer
  committed. Under READ COMMITTED each statement after that lock sees their commits.
- **Reads are served from memory** as in the SQLite store; each call reads the counter (one
  round trip) to learn whether another connection wrote.
- **Live across kernels.** Each write transaction also ``NOTIFY``s, with its schema, the
  change counter and the sessions it changed, the channel of each of those sessions (and
  ``slotmagic``); delivered on commit, never for a rollback. ``subscribe(callback)`` starts
  one listener thread (its own connection, ``LISTEN``, no table polling) that calls back
  within a fraction of a second of another connection's commit to the session
  ``follow(session_id)`` named (any, without), and, back from a lost connection, once if the
  counter moved meanwhile. A call reads again only the sessions others changed
  (``postgres_changes.py``).
- **Text.** PostgreSQL text cannot hold NUL characters; a message or tool result that holds
  one (or starts with U+E000) is stored as U+E000 followed by its JSON string, and read back
  exactly.
- **Credentials** in the URL are used to connect and shown nowhere: ``path``, ``repr()`` and
  every error show ``postgresql://***@host/db``, and any error text has the password
  redacted.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Literal, TypeVar

import psycopg

from .._core.messages import Message
from .._errors import ConnectionLost, StoreError
from .postgres_changes import _NEVER, ChangeTracking
from .postgres_connection import _Connection, _Listener, _UniqueViolation, error_line, lost_connection
from .postgres_retry import Retries, retrying
from .postgres_schema import CHANNEL, MIGRATION_LOCK, MIGRATIONS, SCHEMA_TABLE, VERSION_SETTING
from .rows import Connection, Dialect
from .urls import parse_postgres_url

logger = logging.getLogger("slotmagic")

__all__ = ["PostgresStore"]

T = TypeVar("T")

_ESCAPE = "\ue000"  # marks text stored as a JSON string (it held a NUL)


@retrying  # a call whose connection is lost runs again on a new one, when safe (postgres_retry.py)
class PostgresStore(ChangeTracking):
    """A store in a PostgreSQL schema. Safe to share between threads."""

    _DIALECT: ClassVar[Dialect] = "postgresql"
    _UNIQUE_VIOLATION: ClassVar[tuple[type[Exception], ...]] = (_UniqueViolation,)

    def __init__(
        self, url: str, *, durability: Literal["normal", "full"] = "normal", timeout: float = 10.0, create: bool = True
    ) -> None:
        if durability not in ("normal", "full"):
            raise StoreError(f"unknown durability {durability!r}; use 'normal' or 'full'")
        self.target = parse_postgres_url(url)
        self.path = self.target.shown  # what is shown of where the store lives
        self.schema = self.target.schema
        self.timeout = timeout
        self.readonly = False
        self.damaged = False
        self.refusal: str | None = None
        self._init_caches()
        self._stale = {}
        self._version: int | None = None
        self._in_transaction = False
        self._scope = threading.local()  # this thread's consistent() block: open, and the connection it looked on
        self._token = secrets.token_hex(8)  # this store's writes, in NOTIFY payloads
        self._listener: _Listener | None = None
        self._heard = 0  # the newest change counter a notification (or the listener) has read
        self._retell_at: float | None = None  # when to tell subscribers again (a read was lost)
        self._meta_seen: dict[str, str | None] = {}  # meta values as last read or written (see update_meta)
        # "normal": a commit does not wait for the server's disk (a server crash may lose the
        # last turns, never tear one), as the SQLite store's synchronous=NORMAL.
        synchronous = "on" if durability == "full" else "off"
        options = f"-c search_path={self.schema} -c synchronous_commit={synchronous}"
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"{self.target.options} {options}".strip(),
            "connect_timeout": max(1, int(timeout)),
            "application_name": self.target.application_name,
        }
        self._closed = threading.Event()
        self._retries = Retries(self._closed)
        self._retries.run(lambda: self._migrate(create), write=True)
        # Connection economy: a kernel idle most of the time holds no connection (the one it
        # reads and writes through is closed after ``idle_timeout`` seconds unused, and made
        # again on the next call) and at most one more, its listener's: the server counts at
        # most two per kernel. One connection, made on demand: a pool would only keep more.
        self.idle_timeout = self.target.idle_timeout
        self._held: _Connection | None = None
        self._last_use = 0.0
        self._reaper: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"

    # -- opening -------------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.target.conninfo, **self._kwargs)
        except psycopg.Error as exc:
            lost = ConnectionLost if lost_connection(exc) else StoreError  # a refused password is no loss
            raise lost(error_line(self.target, exc)) from None

    def _migrate(self, create: bool = True) -> None:
        """Create the schema and bring it to the newest version, once, however many kernels
        open it at the same moment (an advisory lock held for the transaction). Without
        ``create``, a schema that holds no store yet is refused, and nothing is made."""
        conn = self._connect()
        db = _Connection(conn, self.target)
        try:
            db.execute("BEGIN")
            db.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (MIGRATION_LOCK, self.schema))
            found = db.execute("SELECT to_regclass(?)", (f"{self.schema}.slotmagic_schema",)).fetchone()[0]
            if found is None and not create:
                raise StoreError(
                    f"there is no slotmagic store in schema {self.schema} of {self.path}; check the URL's schema="
                )
            if db.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (self.schema,)).fetchone() is None:
                db.execute(f'CREATE SCHEMA "{self.schema}"')
            if db.execute("SELECT to_regclass(?)", (f"{self.schema}.slotmagic_schema",)).fetchone()[0] is None:
                others = db.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = ?", (self.schema,)
                ).fetchone()[0]
                if others:
                    raise StoreError(
                        f"schema {self.schema} in {self.path} holds tables that are not slotmagic's; "
                        "name another schema with ?schema=NAME"
                    )
                db.execute(SCHEMA_TABLE)
                db.execute("INSERT INTO slotmagic_schema (version) VALUES (0)")
            version = int(db.execute("SELECT version FROM slotmagic_schema").fetchone()[0])
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"schema {self.schema} in {self.path} has slotmagic schema version {version} but this "
                    f"slotmagic knows only {len(MIGRATIONS)}; upgrade slotmagic (pip install -U slotmagic)"
                )
            for number in range(version + 1, len(MIGRATIONS) + 1):
                for statement in MIGRATIONS[number - 1]:
                    db.execute(statement)
                db.execute("UPDATE slotmagic_schema SET version = ?", (number,))
            db.execute("COMMIT")
        finally:
            conn.close()

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def _db(self) -> _Connection:  # type: ignore[override]
        """The connection the shared store code reads through (lazy reads of a history too)."""
        return self._connection()

    def _connection(self) -> _Connection:
        """The connection: made when none is held (first use, after an idle release) or the
        last one was lost (a server restart, a failover), without the caller noticing."""
        if self._closed.is_set():
            raise StoreError(f"PostgreSQL store {self.path} is closed")
        db = self._held
        if db is not None and db.broken:
            self._held = None
            with suppress(Exception):
                db.conn.close()
            db = None
            self._forget()
            self._version = None
        if db is None:
            db = self._held = _Connection(self._connect(), self.target)
            self._watch_idle()
        self._last_use = time.monotonic()
        return db

    def _drop_lost(self) -> None:
        """See ``RowsBase._drop_lost``: a held connection known broken is replaced now (which
        drops the caches); none is made when none is held (a read from memory needs none)."""
        held = self._held
        if held is not None and held.broken:
            self._connection()

    def _watch_idle(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(target=self._release_when_idle, name="slotmagic-idle", daemon=True)
            self._reaper.start()

    def _release_when_idle(self) -> None:
        """Close the held connection once it has been unused for ``idle_timeout`` seconds, so an
        idle kernel holds none; the next call makes a new one (a few milliseconds)."""
        while not self._closed.wait(max(0.05, self._last_use + self.idle_timeout - time.monotonic())):
            with self._lock:
                if self._held is None:
                    return
                if self._in_transaction or time.monotonic() - self._last_use < self.idle_timeout:
                    continue
                db, self._held = self._held, None
                with suppress(Exception):
                    db.conn.close()
                return

    @contextmanager
    def consistent(self) -> Iterator[None]:
        """See ``Store.consistent``: in the block, this thread's first read looks for others'
        writes (the change counter, one round trip) and the rest read on from there, on the
        same connection (a new one, after a loss, looks again)."""
        scope = self._scope
        if getattr(scope, "open", False):
            yield  # within an enclosing block
            return
        scope.open, scope.looked_on = True, None
        try:
            yield
        finally:
            scope.open, scope.looked_on = False, None

    @contextmanager
    def _read(self) -> Iterator[_Connection]:
        with self._lock:
            if self._in_transaction:
                yield self._db
                return
            db = self._connection()
            scope = self._scope
            try:
                if getattr(scope, "looked_on", None) is not db:
                    try:
                        version, unscoped, sessions, noted = self._changes(db)
                    except StoreError:
                        if not db.broken:
                            raise
                        db = self._connection()  # lost while idle (a server restart): once more, on a new one
                        version, unscoped, sessions, noted = self._changes(db)
                    self._sync(version, unscoped, sessions, noted)
                    if getattr(scope, "open", False):
                        scope.looked_on = db
                yield db
            except StoreError:
                if db.broken or self._held is not db:
                    # A read lost with its connection: a subscriber refreshing on a notification
                    # would show stale data until the next one, so it is told again (see
                    # _Listener.run) once the server may be back.
                    self._retell_at = time.monotonic() + 1.0
                    self._wake_listener()
                raise

    @contextmanager
    def _transaction(self) -> Iterator[_Connection]:
        with self._lock, self._retries.transaction():  # what it runs is run again only with it
            if self._in_transaction:
                yield self._db
                return
            db = self._connection()
            self._in_transaction = True
            self._touched, self._quiet = set(), False
            try:
                try:
                    version, xid, unscoped, sessions, noted = self._begin(db)
                except StoreError:
                    if not db.broken:
                        raise
                    db = self._connection()  # lost while idle: nothing was sent yet, so once more
                    version, xid, unscoped, sessions, noted = self._begin(db)
                known = self._version
                self._version = version
                if known is not None and version != known + 1:
                    self._others_changed(known, unscoped, sessions, noted)
                yield db
                self._commit(db, xid, version)
            except BaseException:
                db.drop_deferred()
                if not db.broken:
                    with suppress(Exception):
                        db.conn.execute("ROLLBACK")
                self._forget()  # the caches may hold what was just rolled back
                self._version = None
                raise
            finally:
                self._in_transaction = False
                self._touched = None

    def retried(self, call: Callable[[], T]) -> T:
        """See ``Store.retried``: run again from its start, a few times, while its connection
        is lost before it commits (``postgres_retry.py``)."""
        return self._retries.run(call, write=True)

    def _begin(self, db: _Connection) -> tuple[int, int, int, list[str], list[str]]:
        """Open a write transaction: the change counter's new value, the transaction's id,
        and what others wrote since the version this store knows (see ``_changes``). The row
        lock on the counter makes writers take turns: what others committed before it is what
        this transaction builds on (the sessions are read by a statement of their own, whose
        snapshot is taken after the lock). All in one round trip."""
        known = _NEVER if self._version is None else int(self._version)
        # Three statements in one simple query: one round trip (a pipeline lost with its
        # connection logs a warning into the notebook as well as raising).
        counter = db.script(
            "BEGIN; UPDATE changes SET version = version + 1 RETURNING version, txid_current(), unscoped,"
            f" set_config('{VERSION_SETTING}', version::text, true);"  # for the slot triggers (schema v6)
            " SELECT ARRAY(SELECT id FROM sessions WHERE changed > %s),"
            " ARRAY(SELECT id FROM sessions WHERE noted > %s)",
            (known, known),
        )
        with db.errors():
            counter.nextset()
            version, xid, unscoped, _ = counter.fetchone()  # type: ignore[misc]
            counter.nextset()
            sessions, noted = counter.fetchone()  # type: ignore[misc]
        db.noted = False  # (see _commit)
        return int(version), int(xid), int(unscoped), list(sessions), list(noted)

    def _commit(self, db: _Connection, xid: int, version: int) -> None:
        """Record which sessions the write changed, NOTIFY (delivered on commit) and COMMIT,
        in one round trip. When the connection is lost with it, whether the server committed
        is asked on a new connection: a turn whose COMMIT went through, its answer lost with
        the connection, was reported failed although it was stored. A server that cannot be
        asked (restarting) is asked again until ``timeout``; if it still cannot, the error
        says the write may be stored, never that it is not."""
        rows, row_values = db.deferred()  # a turn's rows: no round trip of their own under the writers' turn
        touched = sorted(self._touched or ())
        sql, values = "COMMIT", list[Any]()
        if touched or not self._quiet:  # (token counts, calibration: nothing a kernel keeps or shows)
            channels = [CHANNEL, *self._channels_of(touched)]
            sql, values = (
                "SELECT pg_notify(c, %s) FROM unnest(%s::text[]) c; " + sql,
                [self._payload(version), channels],
            )
        if touched and db.noted:  # a workflow or annotation written: other kernels read the sessions' again
            sql = "UPDATE sessions SET changed = %s, noted = %s WHERE id = ANY(%s); " + sql
            values = [version, version, touched, *values]
        elif touched:
            sql, values = "UPDATE sessions SET changed = %s WHERE id = ANY(%s); " + sql, [version, touched, *values]
        elif not self._quiet:
            sql, values = "UPDATE changes SET unscoped = %s; " + sql, [version, *values]
        sql, values = rows + sql, [*row_values, *values]
        try:
            db.script(sql, values)
        except StoreError as exc:
            self._settle(db, xid, exc)

    def _settle(self, db: _Connection, xid: int, exc: StoreError) -> None:
        """A COMMIT failed: raise unless the connection was lost with it and the server says the
        transaction committed after all."""
        if not db.broken:
            raise exc
        committed = self._committed(xid)
        if committed is None:
            raise StoreError(
                f"PostgreSQL store {self.path}: the connection was lost as this write committed and the "
                f"server could not be asked within {self.timeout:g} s whether it did; it may be stored: "
                "look (%slot list) before running it again"
            ) from None
        if not committed:
            raise exc from None
        logger.info("PostgreSQL store %s: the connection was lost as a write committed; it did", self.path)

    def update_meta(self, key: str, update: Callable[[str | None], str]) -> str:
        """A small value kept across sessions (the token estimate's calibration, after each
        turn), replaced by ``update(old value)`` by compare-and-set: one statement, in a
        transaction of its own, sets it only if it still holds the value ``update`` was given
        (the one this store last read or wrote), else returns what it holds and ``update`` runs
        again on that. Not the writers' turn: no other kernel's write waits for it, nothing a
        kernel keeps in memory changes, and nobody is woken. One round trip when no other
        kernel updated it meanwhile; two kernels updating it at once still each see the
        other's update."""
        with self._lock:
            if self.refusal is not None or self._in_transaction:
                return super().update_meta(key, update)
            expected = self._meta_seen.get(key)
            deadline = time.monotonic() + self.timeout
            while True:
                value = update(expected)
                db = self._connection()
                try:
                    done, held = self._set_meta(db, key, expected, value)
                except StoreError:
                    if not db.broken:
                        raise
                    # Lost with its connection: set or not, the value it holds now says (equal to
                    # ours, it is as if ours was set); asked on a new connection.
                    row = self._connection().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                    held = None if row is None else str(row[0])
                    done = held == value
                if done:
                    self._meta_seen[key] = value
                    return value
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"PostgreSQL store {self.path}: {key!r} changed under every update for {self.timeout:g} s"
                    )
                expected = self._meta_seen[key] = held

    def _set_meta(self, db: _Connection, key: str, expected: str | None, value: str) -> tuple[bool, str | None]:
        """Set ``key`` to ``value`` if it holds ``expected`` (None: if it is absent): whether it
        was set, and what it held (as of the statement's start) when it was not. An UPDATE
        whose row another kernel changed meanwhile waits for that one and checks its value."""
        if expected is None:
            change = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING 1"
            values: tuple[str, ...] = (key, value, key)
        else:
            change = "UPDATE meta SET value = ? WHERE key = ? AND value = ? RETURNING 1"
            values = (value, key, expected, key)
        found = db.execute(
            f"WITH changed AS ({change}) SELECT EXISTS (SELECT 1 FROM changed), (SELECT value FROM meta WHERE key = ?)",
            values,
        ).fetchone()
        return bool(found[0]), None if found[1] is None else str(found[1])

    def _committed(self, xid: int) -> bool | None:
        """Whether transaction ``xid`` committed; None when the server could not be asked."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                status = self._connection().execute("SELECT txid_status(?)", (xid,)).fetchone()[0]
            except StoreError:
                status = None  # the server is away (a restart): ask again
            if status is not None and status != "in progress":  # the server may still be at it
                return bool(status == "committed")
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def _send(self, db: Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Inside a write transaction, with its COMMIT: the turn's rows cost no round trip of
        their own while this kernel holds the writers' turn (every other writer waits)."""
        if self._in_transaction and isinstance(db, _Connection):
            db.defer(sql, rows)
        else:
            super()._send(db, sql, rows)

    def _text_in(self, text: str) -> str:
        if "\x00" in text or text.startswith(_ESCAPE):
            return _ESCAPE + json.dumps(text)
        return text

    def _text_out(self, text: str) -> str:
        return str(json.loads(text[1:])) if text and text[0] == _ESCAPE else text

    def _messages(self, rows: Iterable[tuple[str, str, int, str | None]]) -> list[Message]:
        messages = super()._messages(rows)
        for message in messages:
            content = message.content
            if content and content[0] == _ESCAPE:
                object.__setattr__(message, "content", json.loads(content[1:]))
        return messages

    # -- gc: the schema's size, and giving freed space back (see rows/search.py) ---------------

    def _file_size(self) -> int:
        """The bytes the schema's tables take, indexes and TOAST included."""
        with self._read() as db:
            found = db.execute(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relkind = 'r'",
                (self.schema,),
            ).fetchone()
            return int(found[0])

    def _compact_file(self) -> bool:
        """A plain VACUUM (never VACUUM FULL, which would lock other kernels out): space at the
        tables' ends goes back to the file system, the rest is reused by later turns."""
        with self._lock:
            db = self._connection()
            try:
                for table in ("messages", "turns", "token_counts", "marks", "namespace"):
                    db.execute(f"VACUUM {table}")
            except StoreError as exc:
                logger.info("%s", exc)
                return False
            return True

    def close(self) -> None:
        listener = self._listener
        if listener is not None:
            listener.stop()
        self._closed.set()
        with self._lock:
            self._listener = None
            held, self._held = self._held, None
            if held is not None:
                with suppress(Exception):
                    held.conn.close()
            self._forget()
