"""The store's connection to its file: an SQLite error about the file (damaged, read-only,
full, locked, gone) becomes one StoreError line naming the file, and damage found by any read
or write is reported so the store stops writing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import StoreError

# Primary SQLite result codes that say something about the file, not about the statement.
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26


def damaged_message(path: str, detail: str) -> str:
    detail = " ".join(detail.split())[:160]
    return (
        f"the state file {path} is damaged ({detail}); slotmagic will not write to it: save what can be "
        f"read with slotmagic.recover({path!r}, replace=True) (the damaged file is kept beside it)"
    )


def readonly_message(path: str, reason: str) -> str:
    return (
        f"the state file {path} is read-only ({reason}): slots can be read but nothing can be stored; "
        "make it writable (chmod u+w on the file and its folder) or point SLOTMAGIC_DB at a copy"
    )


def foreign_message(path: str, what: str) -> str:
    return (
        f"{path} is not a slotmagic store ({what}); slotmagic leaves it untouched: point SLOTMAGIC_DB "
        "(or db_path) at another file"
    )


def translate(exc: sqlite3.DatabaseError, path: str, timeout: float) -> Exception | None:
    """The one-line StoreError for an SQLite error about the file, or None for any other
    (an IntegrityError the store handles, a bug)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_CORRUPT, _NOTADB):
        return StoreError(damaged_message(path, str(exc)))
    if code == _READONLY:
        return StoreError(readonly_message(path, str(exc)))
    if code == _FULL:
        return StoreError(f"cannot write to {path}: the disk is full; free some space and run it again")
    if code == _IOERR:
        return StoreError(f"cannot read or write {path} ({exc}); check the disk, then open the session again")
    if code in (_BUSY, _LOCKED):
        return StoreError(
            f"{path} stayed locked by another process for {timeout:g} s; run it again when that process is done"
        )
    if code == _CANTOPEN:
        return StoreError(f"cannot open {path} ({exc}); check that the file and its folder exist and are readable")
    return None


class GuardedCursor(sqlite3.Cursor):
    """A cursor whose row reads report errors about the file as its connection says."""

    connection: GuardedConnection

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            raise self.connection.refused(exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.connection.refused(exc) from None

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as exc:
            raise self.connection.refused(exc) from None

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        # Rows fetched in C at once, then iterated: no Python call per row.
        return iter(self.fetchall())


class GuardedConnection(sqlite3.Connection):
    """The store's connection: an SQLite error about the file (damaged, read-only, full,
    locked) becomes one StoreError line naming the file, and ``on_damage`` hears of damage,
    so the store stops writing. Any other error (an IntegrityError the store expects, a bug)
    passes as it is."""

    path = ""
    timeout = 10.0
    on_damage: Callable[[str], None] | None = None  # told of damage found by a read or a write

    def refused(self, exc: sqlite3.DatabaseError) -> BaseException:
        error = translate(exc, self.path, self.timeout)
        if error is None:
            return exc
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if code in (_CORRUPT, _NOTADB) and self.on_damage is not None:
            self.on_damage(str(error))
        return error

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or GuardedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            # Connection.execute would make a plain cursor, whatever cursor() returns.
            return GuardedCursor(self).execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise self.refused(exc) from None

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return GuardedCursor(self).executemany(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise self.refused(exc) from None


def guarded(db: sqlite3.Connection, path: str, timeout: float) -> GuardedConnection:
    assert isinstance(db, GuardedConnection)
    db.path, db.timeout = path, timeout
    return db
