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

from .._core.checks import check_text
from .._core.secrets import masked_url
from .._errors import ConfigError, StoreError
from . import whole
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


def create_private(target: str | os.PathLike[str]) -> bool:
    """Create the file, and every folder missing on the way to it, readable by their owner
    only (it holds conversations). Returns whether the file was created."""
    if os.path.exists(target):  # the usual case: no Path made
        return False
    path = Path(target)
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


def check_header(path: str, db: sqlite3.Connection | None = None) -> None:
    """Refuse a file that is not an SQLite database, in one line, before anything is written;
    read through ``db`` when given (the caller's, left open), else a read-only connection.

    SQLite reads the header, never a file object of ours: POSIX advisory locks belong to the
    process, and closing any descriptor of the file drops every lock the process holds on it
    (https://www.sqlite.org/howtocorrupt.html, 2.2), so another connection of this process in
    the middle of a write would lose its lock and another process could write under it.
    SQLite's own descriptors are kept open while another connection of the process holds a lock.
    """
    own = db is None
    if db is None:
        try:
            db = connect_readonly(path, 0.0)
        except sqlite3.Error:
            return  # opening it for the checks that follow says why, in their words
    try:
        sqlite3.Connection.execute(db, "PRAGMA schema_version").fetchone()  # reads page 1, header first
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
        if own:
            db.close()


def nothing_to_write_back(path: str) -> bool:
    """Whether a connection that may write can read the file to check it without changing it:
    no WAL holding frames (closing the last connection would copy them into the file) and no
    rollback journal (a hot one would be played back into it). Then opening checks the file
    through the connection it keeps; else first through a read-only one."""
    return _bytes(path + "-wal") == 0 and not os.access(path + "-journal", os.F_OK)


def _bytes(name: str) -> int:
    """A file's size, 0 when there is none: asked first without an exception (after the last
    connection closes there is no WAL, and no rollback journal beside a file in WAL mode)."""
    if not os.access(name, os.F_OK):
        return 0
    try:
        return os.stat(name).st_size
    except OSError:
        return 0


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
    marked: bool = False  # slotmagic's mark is set (PRAGMA application_id)
    wal: bool = False  # in WAL mode already (it persists in the file): no need to ask again


def identify(db: sqlite3.Connection, path: str) -> FileInfo:
    """Whose file this is: slotmagic's (marked, or a slotmagic file from before the mark), a
    new empty database, or someone else's (refused, untouched)."""
    # One statement, so one read transaction: another process may be making the store right
    # now, and its mark, version and tables must be seen as of one moment (a file read between
    # two of its commits looked like someone else's).
    app, version, names, journal = db.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version),"
        " (SELECT group_concat(name, char(10)) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'),"
        " (SELECT journal_mode FROM pragma_journal_mode)"
    ).fetchone()
    tables = set(names.split("\n")) if names else set()
    if app == APPLICATION_ID:
        return FileInfo(version, False, marked=True, wal=journal == "wal")
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
    return _bytes(path) + _bytes(path + "-wal")


# Files this process found whole: (device, inode) -> (size, mtime, ctime, whether every page
# was checked, what ``identify`` found of it). A file whose stamp is still the same has not been
# written since, by anyone through any means (a copy is a new inode, and nothing sets a ctime
# back), so opening it again skips the check, and reading whose file it is. Only a check that
# began well after the file's last change is kept: a change within the same tick of the file
# system's clock would keep its timestamps.
_FOUND_WHOLE: dict[tuple[int, int], tuple[int, int, int, bool, FileInfo | None]] = {}
SETTLED_NS = (
    25_000_000  # 25 ms: over a tick of the clock file times are taken from (10 ms at HZ=100, 15.6 ms on Windows)
)

# A file's identity (device, inode), its (size, mtime, ctime), and whether it is settled.
Stamp = tuple[tuple[int, int], tuple[int, int, int], bool]


def file_stamp(path: str) -> Stamp | None:
    """The file's identity and timestamps, and whether it last changed long enough ago to be
    told apart from a later change; None with a WAL that holds frames (the file is not all).
    Taken before the file is read: a change made while it is read gives it another stamp."""
    now = time.time_ns()
    try:
        found = os.stat(path)
    except OSError:
        return None
    if _bytes(path + "-wal") > 0:
        return None
    coarse = found.st_mtime_ns % 1_000_000_000 == 0  # a file system that keeps whole seconds
    settled = now - max(found.st_mtime_ns, found.st_ctime_ns) > (3_000_000_000 if coarse else SETTLED_NS)
    return (found.st_dev, found.st_ino), (found.st_size, found.st_mtime_ns, found.st_ctime_ns), settled


def _seen(identity: tuple[int, int]) -> tuple[int, int, int, bool, FileInfo | None] | None:
    """What this process, or another on this machine (``whole.py``), knows of a file found whole."""
    seen = _FOUND_WHOLE.get(identity)
    if seen is None:
        found = whole.recall(identity)
        if found is not None:
            seen = _FOUND_WHOLE[identity] = (*found[:4], None if found[4] is None else FileInfo(*found[4]))
    return seen


def _keep(identity: tuple[int, int], times: tuple[int, int, int], full: bool, info: FileInfo | None) -> None:
    _FOUND_WHOLE[identity] = (*times, full, info)
    fields = None if info is None else (info.version, info.empty, info.marked, info.wal)
    whole.remember(identity, (*times, full, fields))


def closed_whole(path: str, full: bool, info: FileInfo) -> None:
    """A store that found ``path`` whole at opening (every page of it checked: ``full``) and
    saw no damage since closed it: the file is remembered as whole as it is now (no WAL frames
    left: it was the last connection), once its times have settled and if it is still so;
    its next opening, here or in another process, then reads nothing of it to check it."""
    stamp = file_stamp(path)
    if stamp is None or stamp[1][1] % 1_000_000_000 == 0:  # WAL frames, or whole-second times
        return
    identity, times = stamp[0], stamp[1]

    def keep() -> None:
        again = file_stamp(path)
        if again is not None and again[:2] == (identity, times):
            _keep(identity, times, full, info)

    whole.when_settled(max(times[1], times[2]) + SETTLED_NS, keep)


def found_damaged(path: str) -> None:
    """Damage was found in ``path``: no record says it is whole."""
    with contextlib.suppress(OSError):
        found = os.stat(path)
        identity = (found.st_dev, found.st_ino)
        _FOUND_WHOLE.pop(identity, None)
        whole.forget(identity)


def known_whole(stamp: Stamp | None) -> FileInfo | None:
    """What ``identify`` found of a file known whole (``_seen``), while its ``stamp`` shows it
    unchanged since (and the check covered what a file of its size needs); else None. Reopening
    an unchanged file then reads nothing of it to know whose it is."""
    if stamp is None:
        return None
    seen = _seen(stamp[0])
    if seen is None or seen[4] is None or seen[:3] != stamp[1]:
        return None
    # no WAL frames (a stamp says so): the file's size is all there is to check
    return seen[4] if seen[3] or stamp[1][0] > FULL_CHECK_BYTES else None


def check_integrity(db: sqlite3.Connection, path: str, *, limit: int | None = None, size: int | None = None) -> None:
    """Refuse a damaged file: every page checked when the file is up to ``limit`` bytes, the
    small tables (sessions, slots, turns) beyond; not again while the file stays as this
    process found it whole. Damage found later, by a read or a write, is refused then
    (``translate``). ``size``: the file's and its WAL's, when the caller has just read it."""
    size = file_bytes(path) if size is None else size
    check_whole(db, path, size=size, stamp=file_stamp(path) if path != ":memory:" else None, limit=limit)


def check_whole(
    db: sqlite3.Connection,
    path: str,
    *,
    size: int,
    stamp: Stamp | None,
    info: FileInfo | None = None,
    limit: int | None = None,
) -> None:
    """``check_integrity`` with the file's ``stamp`` taken by the caller before it read the
    file; ``info``, what ``identify`` found of it since, is kept with the stamp (see
    ``known_whole``)."""
    full = size <= (FULL_CHECK_BYTES if limit is None else limit)
    if stamp is not None:
        seen = _seen(stamp[0])
        if seen is not None and seen[:3] == stamp[1] and (seen[3] or not full):
            if info is not None and seen[4] is None:
                _keep(stamp[0], stamp[1], seen[3], info)
            return
    if full:
        checks = ["quick_check(1)"]
    else:
        names = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        checks = [f"quick_check({t})" for t in ("sessions", "slots", "turns") if t in names]
    for pragma in checks:
        found = db.execute(f"PRAGMA {pragma}").fetchone()
        if found is None or found[0] != "ok":
            raise StoreError(damaged_message(path, found[0] if found else "the check found nothing to read"))
    if stamp is not None and stamp[2]:
        _keep(stamp[0], stamp[1], full, info)


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
