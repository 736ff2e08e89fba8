"""The PostgreSQL store's connections: one that takes the shared SQL and raises slotmagic's
one-line errors, and the listener thread that ``LISTEN``s for other kernels' writes."""

from __future__ import annotations

import logging
import re
import selectors
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Protocol

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

from .._core.secrets import redact_all
from .._errors import ConnectionLost, StoreError
from .rows import Cursor
from .urls import PostgresTarget

logger = logging.getLogger("slotmagic")


def _not_a_second_report(record: logging.LogRecord) -> bool:
    """psycopg warns, lines long, when a pipeline (``executemany``) cannot be ended because its
    connection was lost; the store raises its own one-line error for that very loss, so the
    warning would only print the failure twice (into the notebook: no handler is set there)."""
    return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_not_a_second_report)

__all__ = ["error_line", "lost_connection"]


class _UniqueViolation(StoreError):
    """A unique index refused a row (a slot name another connection took meanwhile)."""


# The tables of what a kernel keeps per session or segment apart from its slot rows and
# messages: a write transaction that sends a statement naming one records it (``noted``).
_NOTED = re.compile(r"\b(workflows|marks|compactions|context_events)\b")


class _Connection:
    """A psycopg connection that takes the shared code's ``?`` placeholders and raises
    slotmagic's errors: one line, credentials redacted."""

    def __init__(self, conn: psycopg.Connection[Any], target: PostgresTarget) -> None:
        self.conn = conn
        self._target = target
        self._sql: dict[str, tuple[str, bool]] = {}
        self.broken = False
        # Whether a statement naming a workflow or annotation table was sent since the store
        # last set it False (at a write transaction's start): such a write is ``noted``.
        self.noted = False
        # Statements whose results nobody reads (a turn's rows), sent with the next statement
        # that is not one: a write transaction's COMMIT takes them along (see ``deferred``).
        self._deferred: list[tuple[str, Sequence[Any]]] = []

    def _translate(self, sql: str) -> str:
        found = self._sql.get(sql)
        if found is None:
            assert "%" not in sql, "the shared SQL must not hold '%'"
            found = self._sql[sql] = (sql.replace("?", "%s"), _NOTED.search(sql) is not None)
        if found[1]:
            self.noted = True
        return found[0]

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        self._send_deferred()
        with self.errors():
            return self.conn.execute(self._translate(sql), parameters)

    def script(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.ClientCursor[Any]:
        """Several statements (psycopg's ``%s`` placeholders, bound here) in one round trip; the
        cursor is at the first statement's result (``nextset()`` moves on)."""
        self._send_deferred()
        with self.errors():
            return psycopg.ClientCursor(self.conn).execute(sql, parameters)

    def defer(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per row later: with the next statement sent (see ``deferred``)."""
        self._deferred.extend((sql, row) for row in rows)

    def deferred(self) -> tuple[str, list[Any]]:
        """The deferred statements as a script's text (``%s`` placeholders, each ending in
        ``; ``) and its values, handed over to be sent with another script: no longer held."""
        taken, self._deferred = self._deferred, []
        return "".join(f"{self._translate(sql)}; " for sql, _ in taken), [v for _, row in taken for v in row]

    def drop_deferred(self) -> None:
        """Forget the deferred statements (their transaction is rolled back)."""
        self._deferred = []

    def _send_deferred(self) -> None:
        """Send the deferred statements before one that may read what they write."""
        if self._deferred:
            sql, values = self.deferred()
            with self.errors():
                psycopg.ClientCursor(self.conn).execute(sql.rstrip("; "), values)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        self._send_deferred()
        with self.errors():
            cursor = self.conn.cursor()
            cursor.executemany(self._translate(sql), parameters)
            return cursor

    @contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except pg_errors.UniqueViolation as exc:
            raise _UniqueViolation(self.message(exc)) from None
        except psycopg.OperationalError as exc:
            self.broken = self.conn.closed or self.conn.broken
            # Lost with the connection: what the statement was part of did not commit (the
            # COMMIT's own loss is settled by asking the server, PostgresStore._settle).
            raise (ConnectionLost if self.broken else StoreError)(self.message(exc)) from None
        except psycopg.Error as exc:
            raise StoreError(self.message(exc)) from None
        except BaseException:
            # Raised into a query from outside it (a signal handler's exception; psycopg
            # cancels the query itself only for Ctrl-C): a command left running here would
            # refuse every later one ("another command is already in progress"), so the
            # connection is replaced before the next.
            if self.conn.closed or self.conn.info.transaction_status == pq.TransactionStatus.ACTIVE:
                self.broken = True
            raise

    def message(self, exc: BaseException) -> str:
        return error_line(self._target, exc)


_PASSING = ("starting up", "shutting down", "too many clients", "terminating connection", "recovery mode")


def lost_connection(exc: psycopg.Error) -> bool:
    """Whether a failure to connect is the server's being away (refused, unreachable,
    restarting, shutting down, full for now): worth another try, unlike its refusing this
    connection for good (a password, a role or a database that does not exist). libpq gives
    a failed connection no SQLSTATE: what the server said is its ``FATAL`` line. A connection
    that timed out is not tried again either: it already waited ``connect_timeout``."""
    text = str(exc)
    if "timeout expired" in text:
        return False
    return "FATAL:" not in text or any(passing in text for passing in _PASSING)


def error_line(target: PostgresTarget, exc: BaseException) -> str:
    """One line about a database error, naming the store without its credentials."""
    detail = redact_all(" ".join(str(exc).split()) or type(exc).__name__, [target.password] if target.password else [])
    if "NUL (0x00)" in detail:
        detail = "PostgreSQL cannot store a NUL character in a name or id; remove it"
    return f"PostgreSQL store {target.shown}: {detail}"


class Listened(Protocol):
    """What a listener asks of its store (a :class:`~slotmagic._store.postgres.PostgresStore`)
    and tells it: named here so that the store's connections do not import the store."""

    target: PostgresTarget
    _kwargs: dict[str, Any]

    def channels(self) -> set[str]: ...

    def _caught_up(self, version: int) -> None: ...

    def _notified(self, payloads: Sequence[str]) -> None: ...

    def _retell_if_due(self) -> None: ...

    def _retell_in(self) -> float: ...


class _Listener(threading.Thread):
    """LISTENs on its own connection and hands each notification to the store. It sleeps in
    ``select`` until the server sends one or it is woken (``wake``: stopped, the store follows
    another session, a read to retry): an idle kernel's listener costs no CPU (psycopg's own
    wait wakes ten times a second, 50 kernels' listeners 500 times)."""

    def __init__(self, store: Listened) -> None:
        super().__init__(name="slotmagic-listen", daemon=True)
        self._store = store
        self._halt = threading.Event()
        self._bell, self._woken = socket.socketpair()  # sockets, which select takes on Windows too
        self._woken.setblocking(False)
        self.ready = threading.Event()
        self.connected = threading.Event()  # listening now
        self.pid: int | None = None  # the server process of its connection (pg_stat_activity)

    def wake(self) -> None:
        with suppress(OSError):  # closed (stopped), or already ringing
            self._bell.send(b"!")

    def stop(self) -> None:
        self._halt.set()
        self.wake()
        if self is not threading.current_thread():
            self.join(2)

    def _listen(self, conn: psycopg.Connection[Any], listening: set[str]) -> None:
        """LISTEN on the channels the store wants (only its session's, when it follows one),
        then catch up by version: LISTEN first, then the counter, so every write is either
        counted here or notified after; a first connection learns the counter too."""
        wanted = self._store.channels()
        for channel in sorted(listening - wanted):
            conn.execute(f"UNLISTEN {channel}")
        for channel in sorted(wanted - listening):
            conn.execute(f"LISTEN {channel}")
        listening.clear()
        listening.update(wanted)
        found = conn.execute("SELECT version FROM changes").fetchone()
        self._store._caught_up(int(found[0]) if found else 0)

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                with (
                    psycopg.connect(self._store.target.conninfo, **self._store._kwargs) as conn,
                    selectors.DefaultSelector() as waiting,  # (epoll where there is one: any fd number)
                ):
                    waiting.register(conn.pgconn.socket, selectors.EVENT_READ)
                    waiting.register(self._woken, selectors.EVENT_READ)
                    listening: set[str] = set()
                    self._listen(conn, listening)
                    self.pid = conn.info.backend_pid
                    self.connected.set()
                    self.ready.set()
                    while not self._halt.is_set():
                        # Each as it comes, those that came with another command's answer first.
                        for notification in conn.notifies(timeout=0):
                            self._store._notified([notification.payload])
                        self._store._retell_if_due()
                        if self._store.channels() != listening:
                            self._listen(conn, listening)
                            continue
                        if any(key.fileobj is self._woken for key, _ in waiting.select(self._store._retell_in())):
                            with suppress(OSError):
                                self._woken.recv(64)
            except (psycopg.Error, OSError) as exc:
                self.connected.clear()
                logger.debug("%s", error_line(self._store.target, exc))
                self.ready.set()
                self._halt.wait(1.0)  # the server went away: try again
        self._bell.close()
        self._woken.close()
