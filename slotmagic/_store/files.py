"""The state file itself: opening and checking it, recovering a damaged one, and the store's
guarded connection to it. Each is a module of its own; this one keeps the names they always
had importable from here.

- :mod:`.opening`: the path, creating the file owner-only, whose file it is, whether it is
  whole, read-only files, the backup before a migration;
- :mod:`.recovery` and :mod:`.consistency`: ``recover()`` copies what can be read of a damaged
  file into a new one and says what was saved and what was lost;
- :mod:`.connection`: SQLite errors about the file as one StoreError line, damage reported.

A damaged file is never written to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection import (
    GuardedConnection,
    GuardedCursor,
    damaged_message,
    foreign_message,
    guarded,
    readonly_message,
    translate,
)
from .migrations import APPLICATION_ID, MIGRATIONS
from .opening import (
    FULL_CHECK_BYTES,
    LEGACY_TABLES,
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
    slotmagic_tables,
    use_wal,
)

if TYPE_CHECKING:
    from .recovery import RecoveryReport, recover


def __getattr__(name: str) -> Any:
    # recover() and its report are imported when first named: every store opens through this
    # module, few ever recover.
    if name in ("RecoveryReport", "recover"):
        from . import recovery

        return getattr(recovery, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "APPLICATION_ID",
    "FULL_CHECK_BYTES",
    "LEGACY_TABLES",
    "MIGRATIONS",
    "FileInfo",
    "GuardedConnection",
    "GuardedCursor",
    "RecoveryReport",
    "backup_before_migrating",
    "check_header",
    "check_integrity",
    "check_path",
    "check_whole",
    "closed_whole",
    "connect_readonly",
    "create_private",
    "damaged_message",
    "file_bytes",
    "file_stamp",
    "foreign_message",
    "found_damaged",
    "guarded",
    "identify",
    "known_whole",
    "nothing_to_write_back",
    "readonly_message",
    "readonly_reason",
    "recover",
    "slotmagic_tables",
    "translate",
    "use_wal",
]
