"""Recovering a damaged state file: every table is read around the pages that cannot be read
(``_TableReader``), copied into a new file, then made consistent (:mod:`.consistency`); the
report says what was saved and what was lost. The damaged file is only read."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._errors import ConfigError, StoreError
from .consistency import STATE_TABLES, keep_state, make_consistent
from .migrations import MIGRATIONS, migrate
from .opening import check_path, connect_readonly, create_private
from .recovery_report import RecoveryReport

_END = 2**63 - 1  # the largest rowid
_BATCH = 256  # rows read at once where the table reads well
# Queries a damaged stretch costs at most: a failing batch halved down to one row (twice 9
# sizes), a look at that row's rowid, then galloping and bisecting a 63-bit rowid range.
PROBES_PER_STRETCH = 2 * 9 + 1 + 2 * 63


class _Damaged(Exception):
    """A read that failed, or that handed back rows out of rowid order (a page past the end of
    a cut file, or overwritten, can read as rows of another place)."""


class _Exhausted(Exception):
    """A table's queries ran out (see ``_TableReader``)."""


class _TableReader:
    """Reads a table's rows in rowid order, going around pages that cannot be read.

    Every query on the damaged file counts (``probes``). A file of N pages has at most N
    damaged stretches and each costs at most ``PROBES_PER_STRETCH`` queries, so a table is read
    in at most ``limit`` of them; should they run out, the rest of the table counts as one more
    unreadable stretch.
    """

    def __init__(self, db: sqlite3.Connection, table: str, columns: Sequence[str], pages: int) -> None:
        self.db, self.table = db, table
        self.select = f"SELECT rowid, {', '.join(columns)} FROM {table}"
        self.unreadable = 0  # stretches of rows that could not be read
        self.probes = 0
        self.limit = PROBES_PER_STRETCH * (pages + 2)

    def _query(self, sql: str, args: tuple[int, ...], after: int) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, each with a rowid above ``after``, in order; or ``_Damaged``."""
        self.probes += 1
        if self.probes > self.limit:
            raise _Exhausted
        try:
            rows = self.db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError:
            raise _Damaged from None
        for row in rows:
            if not isinstance(row[0], int) or row[0] <= after:
                raise _Damaged
            after = row[0]
        return rows

    def _next(self, after: int) -> int | None:
        """The first rowid after ``after`` (None at the end), or ``_Damaged``."""
        found = self._query(f"SELECT rowid FROM {self.table} WHERE rowid > ? ORDER BY rowid LIMIT 1", (after,), after)
        return int(found[0][0]) if found else None

    def _readable(self, after: int) -> bool:
        try:
            self._next(after)
        except _Damaged:
            return False
        return True

    def _skip(self, after: int) -> int:
        """A rowid past the damaged stretch that starts after ``after``: the smallest bound
        from which the table reads again, found by galloping then bisecting; ``_END`` when
        the rest of the table cannot be read."""
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

    def _past(self, after: int) -> int | None:
        """Where to read on when the row after ``after`` cannot be read: past that row if only
        it is damaged (its own overflow pages), else past the damaged stretch; None at the end."""
        self.unreadable += 1
        try:
            rowid = self._next(after)
        except _Damaged:
            rowid = self._skip(after)
        return None if rowid is None or rowid >= _END else rowid

    def rows(self) -> Iterator[tuple[Any, ...]]:
        after: int | None = -1  # slotmagic's rows have positive rowids
        size = _BATCH
        try:
            while after is not None:
                try:
                    batch = self._query(f"{self.select} WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, size), after)
                except _Damaged:
                    if size > 1:  # read up to the damage in smaller batches
                        size //= 2
                    else:
                        after, size = self._past(after), _BATCH
                    continue
                if not batch:
                    return
                yield from batch
                after, size = batch[-1][0], min(_BATCH, size * 2)
        except _Exhausted:
            self.unreadable += 1


def _pages(path: str, db: sqlite3.Connection) -> int:
    """Pages the damaged file and its WAL hold (not what its header claims)."""
    held = 0
    for name in (path, f"{path}-wal"):
        with contextlib.suppress(OSError):
            held += os.path.getsize(name)
    return held // max(512, int(db.execute("PRAGMA page_size").fetchone()[0])) + 1


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
    large tool results, workflows, calibration and notebook cell records; and each slot's pins, compactions and
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
            pages = _pages(source, src)
            for table in ("sessions", "slots", "turns", "messages", *STATE_TABLES):
                if table not in names:
                    if table in STATE_TABLES and version < len(MIGRATIONS):
                        continue  # a file from before the table existed
                    report.unreadable[table] = report.unreadable.get(table, 0)
                    continue
                _copy_table(src, dst, table, pages, report)
            keep_state(dst, make_consistent(dst, report), report)
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


def _copy_table(
    src: sqlite3.Connection, dst: sqlite3.Connection, table: str, pages: int, report: RecoveryReport
) -> None:
    try:
        theirs = _columns(src, table)
    except sqlite3.DatabaseError:
        theirs = []
    columns = [c for c in _columns(dst, table) if c in theirs]
    if not columns:
        report.unreadable[table] = report.unreadable.get(table, 0) + 1
        return
    reader = _TableReader(src, table, columns, pages)
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
