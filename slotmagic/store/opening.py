"""Opening the state file: its path, creating it owner-only, whose file it is, whether it is
whole, and the backup taken before a migration.

Opening a store (``SQLiteStore.__init__``) goes through here first:

- the path is checked (``check_path``) and the file and its folders created owner-only;
- the file is read through a read-only connection before anything writes to it: that it is
  an SQLite file, that it is slotmagic's (``PRAGMA application_id``, or the tables of a
  slotmagic file from before the mark), and that it is whole (``PRAGMA quick_check``, over
  the whole file up to ``FULL_CHECK_BYTES``, over its small tables beyond);
- a file that cannot be written is opened read-only on purpose.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.checks import check_text
from ..core.secrets import masked_url
from ..errors import ConfigError, StoreError
from .connection import _BUSY, _CANTOPEN, _LOCKED, _NOTADB, damaged_message, foreign_message, translate
from .migrations import APPLICATION_ID, migrate

# A slotmagic file from before the mark (APPLICATION_ID) is recognised by its tables: these,
# and no table that slotmagic's migrations do not create (see ``slotmagic_tables``).
LEGACY_TABLES = frozenset({"sessions", "slots", "messages", "turns"})
# Up to this size (file and WAL) opening checks every page; beyond, only the small tables.
FULL_CHECK_BYTES = 64 * 1024 * 1024

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def check_path(value: object) -> str:
    """A path to a state file, or ``":memory:"``; anything else is one clear error."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigError(f"db_path must be a file path (str or Path) or ':memory:', not {type(value).__name__}")
    if not value.strip():
        raise ConfigError("db_path is empty: name a state file, e.g. .slotmagic/state.sqlite3, or ':memory:'")
    if "\x00" in value:
        raise ConfigError(f"db_path {value!r:.80} holds a NUL character; name a real file")
    check_text(value, "db_path")
    if _URL.match(value.strip()):  # never a file named so: mysql://x@y/z is no state file
        raise ConfigError(
            f"db_path {masked_url(value.strip())} is a URL slotmagic cannot open; name a state file, or a "
            "postgresql://USER@HOST/DATABASE?schema=NAME URL"
        )
    if value != ":memory:" and os.path.isdir(value):
        raise ConfigError(
            f"db_path {value} is a folder; name a file in it, e.g. {os.path.join(value, 'state.sqlite3')}"
        )
    return value


def use_wal(db: sqlite3.Connection, path: str, timeout: float) -> None:
    """Put the file in WAL mode, waiting up to ``timeout`` for another process that is doing
    the same to a new file: while it writes the new file's first page, SQLite answers "locked"
    at once rather than wait (the busy timeout does not apply), and opening failed."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            sqlite3.Connection.execute(db, "PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
            if code not in (_BUSY, _LOCKED) or time.monotonic() >= deadline:
                raise translate(exc, path, timeout) or exc from None
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


# -- creating, reading, checking ----------------------------------------------------------------


def create_private(path: Path) -> bool:
    """Create the file, and every folder missing on the way to it, readable by their owner
    only (it holds conversations). Returns whether the file was created."""
    if path.exists():
        return False
    missing = []
    folder = path.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another process meanwhile
            folder.mkdir(mode=0o700)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:  # created by another process meanwhile
        return False
    return True


def readonly_reason(path: str) -> str | None:
    """Why the file cannot be written (it, or its folder, which must take the WAL), or None."""
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        return "its folder is not writable"
    return None


def check_header(path: str) -> None:
    """Refuse a file that is not an SQLite database, in one line, before anything is written.

    SQLite reads the header, never a file object of ours: POSIX advisory locks belong to the
    process, and closing any descriptor of the file drops every lock the process holds on it
    (https://www.sqlite.org/howtocorrupt.html, 2.2), so another connection of this process in
    the middle of a write would lose its lock and another process could write under it.
    SQLite's own descriptors are kept open while another connection of the process holds a lock.
    """
    try:
        db = connect_readonly(path, 0.0)
    except sqlite3.Error:
        return  # opening it for the checks that follow says why, in their words
    try:
        db.execute("PRAGMA schema_version").fetchone()  # reads page 1, header first
    except sqlite3.DatabaseError as exc:
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if code == _NOTADB:
            raise StoreError(
                f"cannot use {path} as a slotmagic store (it is not an SQLite database); move the file aside "
                "or point SLOTMAGIC_DB at another path"
            ) from None
        if code == _CANTOPEN and not os.access(path, os.R_OK):
            raise StoreError(f"cannot read the state file {path} (permission denied)") from None
        # busy (another process is making it) and the rest: the checks that follow wait or say why
    finally:
        db.close()


def connect_readonly(
    path: str, timeout: float, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> sqlite3.Connection:
    """A connection that cannot write to the file, even by a checkpoint when it closes.

    A file in a folder we cannot write has no WAL to read (a writer would have needed the
    folder), so it is opened immutable: SQLite would otherwise want to create its -shm file.
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    kwargs: dict[str, Any] = {"timeout": timeout, "isolation_level": None, "check_same_thread": False}
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK) and not os.path.exists(path + "-wal"):
        uri += "&immutable=1"
    db = sqlite3.connect(uri, uri=True, factory=factory, **kwargs)
    db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    return db


@dataclass(frozen=True)
class FileInfo:
    """What opening learned of an existing file."""

    version: int  # PRAGMA user_version: the schema version
    empty: bool  # no tables yet: a new store


def identify(db: sqlite3.Connection, path: str) -> FileInfo:
    """Whose file this is: slotmagic's (marked, or a slotmagic file from before the mark), a
    new empty database, or someone else's (refused, untouched)."""
    # One read transaction: another process may be making the store right now, and its mark,
    # version and tables must be seen as of one moment (a file read between two of its
    # commits looked like someone else's).
    db.execute("BEGIN")
    try:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
    finally:
        db.execute("COMMIT")
    if app == APPLICATION_ID:
        return FileInfo(version, False)
    if app != 0:
        raise StoreError(foreign_message(path, f"it is marked as another application's, application_id {app:#x}"))
    if not tables and version == 0:
        return FileInfo(0, True)
    if version >= 1 and LEGACY_TABLES <= tables <= slotmagic_tables():
        return FileInfo(version, False)
    others = sorted(tables - slotmagic_tables()) or sorted(tables)
    shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
    raise StoreError(foreign_message(path, f"it holds other tables: {shown}" if tables else "it is another database"))


@functools.cache
def slotmagic_tables() -> frozenset[str]:
    """Every table slotmagic's migrations create, found by running them in memory (so a
    migration added later is known here without a list to keep up to date)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(db)
        return frozenset(n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        db.close()


def file_bytes(path: str) -> int:
    total = 0
    for name in (path, path + "-wal"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(name)
    return total


def check_integrity(db: sqlite3.Connection, path: str, *, limit: int | None = None) -> None:
    """Refuse a damaged file: every page checked when the file is up to ``limit`` bytes, the
    small tables (sessions, slots, turns) beyond. Damage found later, by a read or a write,
    is refused then (``translate``)."""
    if file_bytes(path) <= (FULL_CHECK_BYTES if limit is None else limit):
        checks = ["quick_check(1)"]
    else:
        names = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        checks = [f"quick_check({t})" for t in ("sessions", "slots", "turns") if t in names]
    for pragma in checks:
        found = db.execute(f"PRAGMA {pragma}").fetchone()
        if found is None or found[0] != "ok":
            raise StoreError(damaged_message(path, found[0] if found else "the check found nothing to read"))


def backup_before_migrating(db: sqlite3.Connection, version: int) -> Path | None:
    """Copy the file (through SQLite's backup API, so a consistent copy even while others
    write) to ``<file>.v<version>.bak`` beside it, owner-only, before a migration changes it.
    Nothing for a database in memory."""
    found = next((row for row in db.execute("PRAGMA database_list") if row[1] == "main"), None)
    if found is None or not found[2]:
        return None
    source = Path(found[2])
    target = source.with_name(f"{source.name}.v{version}.bak")
    n = 1
    while True:
        try:
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            n += 1
            target = source.with_name(f"{source.name}.v{version}-{n}.bak")
    copy = sqlite3.connect(target)
    try:
        db.backup(copy)
        # A plain file of its own: no WAL beside it until someone opens it to write.
        copy.execute("PRAGMA journal_mode = DELETE")
    except BaseException:
        copy.close()
        target.unlink(missing_ok=True)
        raise
    copy.close()
    return target
