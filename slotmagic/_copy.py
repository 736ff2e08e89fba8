"""Copy sessions between stores: a SQLite file and PostgreSQL, in either direction.

``copy_sessions(SRC, DST)`` (the ``slotmagic copy SRC DST`` command, and ``%slot session
--copy-to URL``) reads each session whole from the source, writes it to the destination in one
transaction, reads it back and compares a SHA-256 of every message and of every other row:
a copy that differs in anything is refused (``StoreError``), and its session removed again.
Sessions already in the destination are never overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from ._errors import StoreError
from ._store import check_target, open_store, shown_target
from ._store.rows import RowStore
from ._store.urls import is_postgres_url

__all__ = ["CopyReport", "copy_sessions"]


@dataclass
class CopyReport:
    """What was copied, and the checksum both stores agree on."""

    source: str  # as shown: no credentials
    destination: str
    sessions: list[str] = field(default_factory=list)
    slots: int = 0
    messages: int = 0
    checksums: dict[str, str] = field(default_factory=dict)  # session -> SHA-256 of all its rows

    def __str__(self) -> str:
        return (
            f"copied {len(self.sessions)} session{'s' * (len(self.sessions) != 1)} ({self.slots} slots, "
            f"{self.messages} messages) from {self.source} to {self.destination}; every message's "
            "checksum matches"
        )


def _row_store(target: str, *, create: bool = True) -> RowStore:
    store = open_store(target, create=create)
    assert isinstance(store, RowStore)
    return store


def copy_sessions(source: str, destination: str, sessions: Sequence[str] | None = None) -> CopyReport:
    """Copy ``sessions`` (all of the source's by default) from ``source`` to ``destination``
    (paths or ``postgresql://`` URLs); nothing is copied if any of them exists there. The
    source is only read (a PostgreSQL schema that is not there is not made); a state file
    the copy made is removed again when the copy fails."""
    source, destination = check_target(source), check_target(destination)
    if not is_postgres_url(source) and (source == ":memory:" or not os.path.isfile(source)):
        raise StoreError(f"there is no state file {source} to copy from; name an existing file or a postgresql:// URL")
    src = _row_store(source, create=False)
    try:
        held = src.sessions()
        names = list(held) if sessions is None else list(dict.fromkeys(sessions))
        missing = [n for n in names if n not in set(held)]
        if missing:
            known = ", ".join(held[:10]) or "none"
            raise StoreError(f"{shown_target(source)} holds no session {missing[0]!r} (it holds: {known})")
        made = not is_postgres_url(destination) and not os.path.exists(destination)
        dst = _row_store(destination)
        try:
            return _copy(src, dst, source, destination, names)
        except BaseException:
            dst.close()
            if made:
                for leftover in (destination, destination + "-wal", destination + "-shm"):
                    with suppress(FileNotFoundError):
                        os.remove(leftover)
            raise
        finally:
            dst.close()
    finally:
        src.close()


def _copy(src: RowStore, dst: RowStore, source: str, destination: str, names: list[str]) -> CopyReport:
    taken = [n for n in names if n in set(dst.sessions())]
    if taken:
        raise StoreError(
            f"session {taken[0]!r} exists already in {shown_target(destination)}; nothing was copied "
            "(copy into another store, or delete it there first)"
        )
    report = CopyReport(shown_target(source), shown_target(destination))
    for name in names:
        dump = src.dump_session(name)
        dst.load_session(dump)
        back = dst.dump_session(name)
        if back.message_digests() != dump.message_digests() or back.checksum() != dump.checksum():
            raise StoreError(
                f"session {name!r} read back from {report.destination} differs from {report.source}; "
                "the copy is not to be trusted"
            )
        report.sessions.append(name)
        report.slots += len(dump.slots)
        report.messages += len(dump.tables["messages"])
        report.checksums[name] = dump.checksum()
    return report
