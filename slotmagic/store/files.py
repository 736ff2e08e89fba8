"""The state file itself: its path, whose it is, whether it is whole, backups and recovery.

Opening a store (``SQLiteStore.__init__``) goes through here first:

- the path is checked (``check_path``) and the file and its folders created owner-only;
- the file is read through a read-only connection before anything writes to it: that it is
  an SQLite file, that it is slotmagic's (``PRAGMA application_id``, or the tables of a
  slotmagic file from before the mark), and that it is whole (``PRAGMA quick_check``, over
  the whole file up to ``FULL_CHECK_BYTES``, over its small tables beyond);
- a file that cannot be written is opened read-only on purpose.

A damaged file is never written to: ``recover()`` copies what can be read into a new file
and says what was saved and what was lost.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.checks import check_text
from ..core.secrets import masked_url
from ..errors import ConfigError, StoreError
from .migrations import APPLICATION_ID, MIGRATIONS, migrate

# A slotmagic file from before the mark (APPLICATION_ID) is recognised by its tables: these,
# and no table that slotmagic's migrations do not create (see ``slotmagic_tables``).
LEGACY_TABLES = frozenset({"sessions", "slots", "messages", "turns"})
# Up to this size (file and WAL) opening checks every page; beyond, only the small tables.
FULL_CHECK_BYTES = 64 * 1024 * 1024

# Primary SQLite result codes that say something about the file, not about the statement.
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26


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


# -- messages -----------------------------------------------------------------------------------


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


# -- recovery -----------------------------------------------------------------------------------


@dataclass
class RecoveryReport:
    """What ``recover()`` saved into ``target`` and what it could not.

    Counts are of the new file (live slots, their turns and stored messages); ``lost_*`` are
    turns and messages the damaged file's slots held but that could not be read whole (a turn
    is saved whole or not at all, and a slot keeps its history up to its first loss).
    """

    source: str
    target: str
    moved_to: str | None = None  # where the damaged file went (replace=True)
    sessions: int = 0
    slots: int = 0
    turns: int = 0
    messages: int = 0
    lost_turns: int = 0
    lost_messages: int = 0
    lost_slots: list[str] = field(default_factory=list)  # "session/slot" cut short or emptied
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> stretches of rows that could not be read
    # table -> rows read but not kept: pins, compactions and working-context changes of a slot
    # whose history lost turns (their positions would point elsewhere), rows a damaged page
    # left without their slot or session, and rows that do not parse
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not (self.lost_turns or self.lost_messages or self.lost_slots or self.unreadable or self.dropped)

    def __str__(self) -> str:
        saved = (
            f"saved {self.sessions} session{'s' * (self.sessions != 1)}, {self.slots} slot{'s' * (self.slots != 1)}, "
            f"{self.turns} turn{'s' * (self.turns != 1)} ({self.messages} message{'s' * (self.messages != 1)})"
        )
        where = f"recovered {self.source} into {self.target}" + (
            f" (the damaged file is now {self.moved_to})" if self.moved_to else ""
        )
        if self.complete:
            return f"{where}: {saved}; nothing was lost"
        cut = (
            f" in {', '.join(self.lost_slots[:8])}{', …' if len(self.lost_slots) > 8 else ''}"
            if self.lost_slots
            else ""
        )
        rows = ", ".join(f"{n} stretch{'es' * (n != 1)} of {t} rows" for t, n in sorted(self.unreadable.items()))
        dropped = ", ".join(f"{n} {_STATE_WORDS.get(t, (t, t))[n != 1]}" for t, n in sorted(self.dropped.items()))
        return (
            f"{where}: {saved}; lost {self.lost_turns} turn{'s' * (self.lost_turns != 1)} "
            f"({self.lost_messages} message{'s' * (self.lost_messages != 1)}){cut}"
            + (f"; unreadable: {rows}" if rows else "")
            + (f"; not kept: {dropped}" if dropped else "")
        )


_END = 2**63 - 1  # the largest rowid


class _TableReader:
    """Reads a table's rows in rowid order, going around pages that cannot be read."""

    def __init__(self, db: sqlite3.Connection, table: str, columns: Sequence[str]) -> None:
        self.db, self.table = db, table
        self.select = f"SELECT rowid, {', '.join(columns)} FROM {table}"
        self.unreadable = 0  # stretches of rows that could not be read

    def _probe(self, after: int) -> int | None:
        """The first rowid after ``after`` (None at the end); raises on a damaged page."""
        found = self.db.execute(f"SELECT rowid FROM {self.table} WHERE rowid > ? ORDER BY rowid LIMIT 1", (after,))
        row = found.fetchone()
        return None if row is None else int(row[0])

    def _readable(self, after: int) -> bool:
        try:
            self._probe(after)
        except sqlite3.DatabaseError:
            return False
        return True

    def _skip(self, after: int) -> int:
        """A rowid past the damaged stretch that starts after ``after``: the smallest bound
        from which the table reads again, found by galloping then bisecting; ``_END`` when
        the rest of the table cannot be read."""
        self.unreadable += 1
        step = 1
        while not self._readable(after + step):
            step *= 2
            if after + step >= _END:
                return _END
        low, high = step // 2, step  # unreadable at after + low (or low == 0), readable at after + high
        while high - low > 1:
            mid = (low + high) // 2
            if self._readable(after + mid):
                high = mid
            else:
                low = mid
        return after + high

    def rows(self) -> Iterator[tuple[Any, ...]]:
        after = -1  # slotmagic's rows have positive rowids
        while True:
            try:
                batch = self.db.execute(f"{self.select} WHERE rowid > ? ORDER BY rowid LIMIT 256", (after,)).fetchall()
            except sqlite3.DatabaseError:
                batch = None
            if batch is not None:
                if not batch:
                    return
                yield from batch
                after = batch[-1][0]
                continue
            # Row by row through the damaged stretch.
            try:
                rowid = self._probe(after)
            except sqlite3.DatabaseError:
                after = self._skip(after)
                if after >= _END:
                    return
                continue
            if rowid is None:
                return
            try:
                row = self.db.execute(f"{self.select} WHERE rowid = ?", (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                row = None
                self.unreadable += 1
            if row is not None:
                yield row
            after = rowid


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _recovered_name(path: Path) -> Path:
    stem = path.name.removesuffix(".sqlite3")
    candidate = path.with_name(f"{stem}.recovered.sqlite3")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{stem}.recovered-{n}.sqlite3")
    return candidate


def recover(
    path: str | os.PathLike[str], new_path: str | os.PathLike[str] | None = None, *, replace: bool = False
) -> RecoveryReport:
    """Copy what can be read of a (damaged) state file into a new one, and say what was lost.

    The damaged file is only read. The new file (``new_path``, default
    ``<name>.recovered.sqlite3`` beside it) holds every session and slot whose rows could be
    read, each slot's history with every turn that was read whole, in order; the sessions'
    large tool results, workflows and calibration; and each slot's pins, compactions and
    working context where its history kept every turn (see ``RecoveryReport.dropped``). With
    ``replace=True`` the damaged file (and its WAL) is moved aside to ``<file>.damaged`` and
    the recovered one takes its place, so notebooks that use it open the recovered one.
    """
    source = check_path(path)
    if source == ":memory:":
        raise ConfigError("recover() reads a state file; ':memory:' keeps nothing to recover")
    if not os.path.isfile(source):
        raise ConfigError(f"no state file {source} to recover")
    if new_path is not None and replace:
        raise ConfigError("recover(): pass new_path or replace=True, not both")
    target = Path(check_path(new_path)) if new_path is not None else _recovered_name(Path(source))
    if target.exists():
        raise ConfigError(f"{target} already exists; name a new file for the recovered store")
    try:
        src = connect_readonly(source, 5.0)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"nothing in {source} can be read ({exc}); it cannot be recovered") from None
    report = RecoveryReport(source, str(target))
    try:
        try:
            # Read past a header that promises more pages than a truncated file holds (only
            # checks are relaxed: the connection is read-only).
            src.execute("PRAGMA writable_schema = ON")
            version = src.execute("PRAGMA user_version").fetchone()[0]
            names = {n for (n,) in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"nothing in {source} can be read: its first page, which lists the tables, is damaged ({exc})"
            ) from None
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{source} has schema version {version}; recover it with the newer slotmagic that wrote it"
            )
        create_private(target)
        dst = sqlite3.connect(target, isolation_level=None)
        try:
            migrate(dst)
            dst.execute("BEGIN IMMEDIATE")
            for table in ("sessions", "slots", "turns", "messages", *_STATE_TABLES):
                if table not in names:
                    if table in _STATE_TABLES and version < len(MIGRATIONS):
                        continue  # a file from before the table existed
                    report.unreadable[table] = report.unreadable.get(table, 0)
                    continue
                _copy_table(src, dst, table, report)
            _keep_state(dst, _make_consistent(dst, report), report)
            dst.execute("COMMIT")
            check = dst.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":  # pragma: no cover - a bug in the copy, not in the damaged file
                raise StoreError(f"the recovered file {target} failed its own check ({check})")
        finally:
            dst.close()
    except BaseException:
        for name in (str(target), f"{target}-wal", f"{target}-shm"):
            with contextlib.suppress(OSError):
                os.unlink(name)
        raise
    finally:
        src.close()
    if replace:
        moved = _move_aside(source)
        os.replace(target, source)
        report.moved_to, report.target = moved, source
    return report


def _move_aside(path: str) -> str:
    aside = f"{path}.damaged"
    n = 1
    while os.path.exists(aside):
        n += 1
        aside = f"{path}.damaged-{n}"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside


def _copy_table(src: sqlite3.Connection, dst: sqlite3.Connection, table: str, report: RecoveryReport) -> None:
    try:
        theirs = _columns(src, table)
    except sqlite3.DatabaseError:
        theirs = []
    columns = [c for c in _columns(dst, table) if c in theirs]
    if not columns:
        report.unreadable[table] = report.unreadable.get(table, 0) + 1
        return
    reader = _TableReader(src, table, columns)
    insert = f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    batch: list[tuple[Any, ...]] = []
    for row in reader.rows():
        batch.append(row[1:])
        if len(batch) >= 512:
            _insert(dst, insert, batch)
            batch = []
    _insert(dst, insert, batch)
    if reader.unreadable:
        report.unreadable[table] = reader.unreadable


def _insert(dst: sqlite3.Connection, insert: str, rows: list[tuple[Any, ...]]) -> None:
    try:
        dst.executemany(insert, rows)
    except sqlite3.Error:  # a damaged row holding values the schema refuses: row by row
        for row in rows:
            with contextlib.suppress(sqlite3.Error):
                dst.execute(insert, row)


def _make_consistent(db: sqlite3.Connection, report: RecoveryReport) -> set[int]:
    """Keep every turn whose rows were all read, in order, and close the gaps the others
    leave (positions and fork points move up); make each slot's counters match its rows and
    every session hold its default slot and a current slot. Returns the slot rows whose
    positions moved."""
    from ..core.messages import ROLES
    from ..core.slots import DEFAULT_SLOT, SlotConfig

    slots: dict[int, dict[str, Any]] = {}
    for key, session_id, name, parent, fork_at, length, config, created_at, deleted_at in db.execute(
        "SELECT id, session_id, name, parent, fork_at, length, config, created_at, deleted_at FROM slots"
    ):
        slots[key] = {
            "session": session_id,
            "name": name,
            "parent": parent,
            "fork_at": fork_at if isinstance(fork_at, int) and fork_at >= 0 else 0,
            "length": length if isinstance(length, int) else 0,
            "config": config,
            "created_at": created_at,
            "live": deleted_at is None,
        }
    messages: dict[int, dict[int, tuple[int, int]]] = {}  # slot -> seq -> (turn, tokens)
    for slot, seq, turn, role, content, tokens, extra in db.execute(
        "SELECT slot, seq, turn, role, content, tokens, extra FROM messages"
    ):
        if (
            isinstance(seq, int)
            and isinstance(turn, int)
            and isinstance(tokens, int)
            and role in ROLES
            and isinstance(content, str)
            and (extra is None or _json_ok(extra))
        ):
            messages.setdefault(slot, {})[seq] = (turn, tokens)
    turn_rows: dict[int, list[tuple[int, int, int]]] = {}  # slot -> [(number, start, count)]
    for slot, number, start, count, info in db.execute("SELECT slot, number, start, count, info FROM turns"):
        if (
            isinstance(number, int)
            and isinstance(start, int)
            and isinstance(count, int)
            and count > 0
            and _json_ok(info)
        ):
            turn_rows.setdefault(slot, []).append((number, start, count))

    # For each slot: the old positions its history keeps, in order, and (turn, tokens) of each.
    kept: dict[int, list[int]] = {}
    values: dict[int, list[tuple[int, int]]] = {}
    made_turns: list[tuple[int, int, int, int]] = []  # turns whose row was lost, rebuilt from their messages
    moves: dict[int, tuple[int, list[tuple[int, int]], list[tuple[int, int]]]] = {}  # new fork, seq and turn moves

    def settle(key: int, seen: frozenset[int] = frozenset()) -> None:
        if key in kept:
            return
        row = slots[key]
        parent, fork_at = row["parent"], row["fork_at"]
        if parent is not None and parent in slots and parent not in seen:
            settle(parent, seen | {key})
            cut = bisect.bisect_left(kept[parent], fork_at)
            old_positions, history = kept[parent][:cut], values[parent][:cut]
            new_fork = cut
            inherited_whole = cut == fork_at and all(p == i for i, p in enumerate(old_positions))
        else:
            old_positions, history, new_fork = [], [], 0
            inherited_whole = fork_at == 0
            row["parent"] = None
        old_positions, history = list(old_positions), list(history)
        mine = messages.get(key, {})
        seq_moves: list[tuple[int, int]] = []
        turn_moves: list[tuple[int, int]] = []
        end = fork_at
        lost_turns = 0
        candidates = [(number, start, count, False) for number, start, count in turn_rows.get(key, [])]
        candidates += _unrecorded_turns(mine, turn_rows.get(key, []), fork_at, row["length"])
        for number, start, count, made in sorted(candidates, key=lambda t: t[1]):
            if start < end:
                continue  # overlaps a turn kept before it: not a turn of this history
            part = [mine.get(seq) for seq in range(start, start + count)]
            if any(m is None or m[0] != number for m in part):
                lost_turns += 1
                continue
            if made:
                made_turns.append((key, number, start, count))
            turn_moves.append((number, len(history)))
            for offset, m in enumerate(part):
                assert m is not None
                seq_moves.append((start + offset, len(history)))
                history.append(m)
                old_positions.append(start + offset)
            end = start + count
        kept[key], values[key] = old_positions, history
        own_before = max(0, row["length"] - fork_at)
        own_kept = len(seq_moves)
        lost = own_before - own_kept
        if lost > 0 or not inherited_whole:
            report.lost_messages += max(0, lost)
            report.lost_turns += lost_turns
            if row["live"]:
                report.lost_slots.append(f"{row['session']}/{row['name']}")
        if not inherited_whole or any(old != new for old, new in seq_moves):
            moves[key] = (new_fork, seq_moves, turn_moves)
        row["fork_at"] = new_fork

    for key in sorted(slots):
        settle(key)

    created = max((r["created_at"] for r in slots.values() if isinstance(r["created_at"], float)), default=0.0)
    db.executemany(
        "INSERT OR IGNORE INTO turns (slot, number, start, count, info, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (key, n, start, count, json.dumps({"kind": "append", "recovered": True}), created)
            for key, n, start, count in made_turns
        ],
    )
    for key, row in slots.items():
        history = values[key]
        length = len(history)
        if key in moves:
            _, seq_moves, turn_moves = moves[key]
            # Out of the way first (negative), then into place: positions are a primary key.
            db.execute("UPDATE messages SET seq = -1 - seq WHERE slot = ?", (key,))
            db.executemany(
                "UPDATE messages SET seq = ? WHERE slot = ? AND seq = ?",
                [(new, key, -1 - old) for old, new in seq_moves],
            )
            db.execute("DELETE FROM messages WHERE slot = ? AND seq < 0", (key,))
            db.execute("UPDATE turns SET start = -1 - start WHERE slot = ?", (key,))
            db.executemany(
                "UPDATE turns SET start = ? WHERE slot = ? AND number = ?", [(new, key, n) for n, new in turn_moves]
            )
            db.execute("DELETE FROM turns WHERE slot = ? AND start < 0", (key,))
        else:
            db.execute("DELETE FROM messages WHERE slot = ? AND (seq < ? OR seq >= ?)", (key, row["fork_at"], length))
            db.execute("DELETE FROM turns WHERE slot = ? AND (start < ? OR start >= ?)", (key, row["fork_at"], length))
        tokens = sum(t for _, t in history)
        last_turn = max((n for n, _ in history), default=0)
        config = row["config"]
        try:
            SlotConfig.from_dict(json.loads(config))
        except Exception:  # a damaged config: the slot is kept as a plain full slot
            config = json.dumps(SlotConfig().to_dict())
        db.execute(
            "UPDATE slots SET parent = ?, fork_at = ?, length = ?, tokens = ?, turns = ?, config = ? WHERE id = ?",
            (row["parent"], row["fork_at"], length, tokens, last_turn, config, key),
        )
    # Rows whose slot row was lost cannot be placed in any history; nor can messages that no
    # kept turn covers.
    report.lost_turns += db.execute("SELECT COUNT(*) FROM turns WHERE slot NOT IN (SELECT id FROM slots)").fetchone()[0]
    db.execute("DELETE FROM turns WHERE slot NOT IN (SELECT id FROM slots)")
    report.lost_messages += db.execute(
        "SELECT COUNT(*) FROM messages WHERE slot NOT IN (SELECT id FROM slots)"
    ).fetchone()[0]
    db.execute(
        "DELETE FROM messages WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.slot = messages.slot"
        " AND messages.seq >= t.start AND messages.seq < t.start + t.count)"
    )

    # Sessions: one row each, a live default slot, a current slot that exists.
    for (session_id,) in db.execute("SELECT DISTINCT session_id FROM slots").fetchall():
        created = db.execute("SELECT MIN(created_at) FROM slots WHERE session_id = ?", (session_id,)).fetchone()[0]
        db.execute(
            "INSERT OR IGNORE INTO sessions (id, current_slot, created_at) VALUES (?, NULL, ?)", (session_id, created)
        )
    for session_id, current, created in db.execute("SELECT id, current_slot, created_at FROM sessions").fetchall():
        default = db.execute(
            "SELECT id FROM slots WHERE session_id = ? AND name = ? AND deleted_at IS NULL", (session_id, DEFAULT_SLOT)
        ).fetchone()
        if default is None:
            cursor = db.execute(
                "INSERT INTO slots (session_id, name, config, created_at) VALUES (?, ?, ?, ?)",
                (session_id, DEFAULT_SLOT, json.dumps(SlotConfig().to_dict()), created or 0.0),
            )
            default = (cursor.lastrowid,)
        live = db.execute(
            "SELECT 1 FROM slots WHERE id = ? AND session_id = ? AND deleted_at IS NULL", (current, session_id)
        ).fetchone()
        if live is None:
            db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (default[0], session_id))

    report.sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    report.slots = db.execute("SELECT COUNT(*) FROM slots WHERE deleted_at IS NULL").fetchone()[0]
    report.turns = db.execute("SELECT COUNT(*) FROM turns WHERE number > 0").fetchone()[0]
    report.messages = db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    return set(moves)


# What a session holds beside its histories, carried by recover(): large tool results and
# workflows (per session), then pins, compactions and working-context changes (per slot row, at
# positions of its history). Token counts are not carried: they are counted again when needed.
_STATE_TABLES = ("namespace", "workflows", "marks", "compactions", "context_events", "meta")
_STATE_WORDS = {  # table -> (one, several)
    "namespace": ("large tool result", "large tool results"),
    "workflows": ("workflow", "workflows"),
    "marks": ("pin or exclusion", "pins or exclusions"),
    "compactions": ("compaction", "compactions"),
    "context_events": ("working-context change", "working-context changes"),
    "meta": ("calibration value", "calibration values"),
}


def _keep_state(db: sqlite3.Connection, moved: set[int], report: RecoveryReport) -> None:
    """Keep the state rows that still fit the recovered histories and parse; count the rest."""
    from ..core.compaction import Compaction
    from ..core.context import ContextEvent
    from ..core.workflow import Workflow
    from ..tokens.calibration import Calibration

    lengths = dict(db.execute("SELECT id, length FROM slots").fetchall())
    sessions = {row[0] for row in db.execute("SELECT id FROM sessions")}

    def parses(read: Callable[[], object]) -> bool:
        try:
            read()
        except Exception:
            return False
        return True

    def fits(slot: int, position: int) -> bool:
        return slot in lengths and slot not in moved and isinstance(position, int) and 0 <= position <= lengths[slot]

    checks: dict[str, tuple[str, Callable[[tuple[Any, ...]], bool]]] = {
        "namespace": (
            "session_id, key, tool, content",
            lambda r: r[0] in sessions and all(isinstance(v, str) for v in r[1:]),
        ),
        "workflows": (
            "session_id, name, record",
            lambda r: r[0] in sessions and parses(lambda: Workflow.from_dict(r[1], json.loads(r[2]))),
        ),
        "marks": (
            "slot, position, mark",
            lambda r: fits(r[0], r[1]) and r[1] < lengths[r[0]] and r[2] in ("pin", "exclude", "clear"),
        ),
        "compactions": (
            "slot, at, record",
            lambda r: fits(r[0], r[1]) and parses(lambda: Compaction.from_dict(json.loads(r[2]))),
        ),
        "context_events": (
            "slot, at, turn, event",
            lambda r: fits(r[0], r[1]) and parses(lambda: ContextEvent.from_dict(json.loads(r[3]), r[2], r[1])),
        ),
        "meta": (
            "key, value",
            lambda r: r[0] != "calibration" or parses(lambda: Calibration.from_dict(json.loads(r[1]))),
        ),
    }
    for table, (columns, keep) in checks.items():
        gone = [
            (rowid,) for rowid, *row in db.execute(f"SELECT rowid, {columns} FROM {table}").fetchall() if not keep(row)
        ]
        if gone:
            db.executemany(f"DELETE FROM {table} WHERE rowid = ?", gone)
            report.dropped[table] = report.dropped.get(table, 0) + len(gone)
    # At most one active workflow per session survives a damaged page that left two.
    db.execute(
        "UPDATE workflows SET active = 0 WHERE active = 1 AND rowid NOT IN"
        " (SELECT MIN(rowid) FROM workflows WHERE active = 1 GROUP BY session_id)"
    )


def _unrecorded_turns(
    mine: dict[int, tuple[int, int]], recorded: list[tuple[int, int, int]], fork_at: int, length: int
) -> list[tuple[int, int, int, bool]]:
    """Turns whose row was lost but whose messages were all read: a run of messages of one
    turn number with a message of another turn (or the history's start or end) on each side,
    so it is known to be whole."""
    covered = {seq for _, start, count in recorded for seq in range(start, start + count)}
    out: list[tuple[int, int, int, bool]] = []
    seqs = sorted(seq for seq in mine if seq >= fork_at and seq not in covered)
    i = 0
    while i < len(seqs):
        start, number = seqs[i], mine[seqs[i]][0]
        j = i
        while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1 and mine[seqs[j + 1]][0] == number:
            j += 1
        end = seqs[j] + 1
        before = start == fork_at or (start - 1 in mine and mine[start - 1][0] != number)
        after = end == length or (end in mine and mine[end][0] != number)
        if before and after:
            out.append((number, start, end - start, True))
        i = j + 1
    return out


def _json_ok(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# -- the store's connection ------------------------------------------------------------------------


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
