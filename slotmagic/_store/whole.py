"""State files known whole, remembered across processes, so that opening an unchanged file
does not read it whole again (see ``opening.known_whole``).

A record is a file's identity (device, inode) and its stamp (size, modification and change
times, in ns) when it was known whole: checked by ``PRAGMA quick_check``, or closed cleanly by
a store that had found it whole when it opened it and saw no damage since. Any later change to
the file, by anyone through any means, gives it another stamp (a copy is a new inode, and
nothing sets a change time back), and a process that ended without closing its store leaves
frames in the WAL, which no record covers: both are read whole at their next opening.

The records are one small JSON file per user (``$XDG_CACHE_HOME/slotmagic/whole-files.json``,
else ``~/.cache/...``, owner-only), at most ``_KEPT`` of them, written by replacing the file
whole: two processes writing at once may lose one record, which costs one check, never a
wrong answer. A record that cannot be read or written is no record.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_KEPT = 256  # records kept, the latest
_LONGEST_WAIT = 0.1  # seconds a closing store's record waits for the file's times to settle, at most
_lock = threading.Lock()

# (device, inode) -> (size, mtime, ctime, whether every page was checked, what opening found
# of the file as its four fields, or None)
Record = tuple[int, int, int, bool, tuple[int, bool, bool, bool] | None]


def _records_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "slotmagic" / "whole-files.json"


def _key(identity: tuple[int, int]) -> str:
    return f"{identity[0]}:{identity[1]}"


def _read() -> dict[str, Any]:
    try:
        found = json.loads(_records_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def recall(identity: tuple[int, int]) -> Record | None:
    """The record of the file ``identity`` names, or None."""
    with _lock:
        entry = _read().get(_key(identity))
    try:
        size, mtime, ctime, full, info = entry  # type: ignore[misc]
        fields = None if info is None else (int(info[0]), bool(info[1]), bool(info[2]), bool(info[3]))
        return int(size), int(mtime), int(ctime), bool(full), fields
    except (TypeError, ValueError, IndexError):
        return None


def remember(identity: tuple[int, int], record: Record) -> None:
    """Keep ``record`` for the file ``identity`` names (the latest ``_KEPT`` are kept)."""
    with _lock:
        records = _read()
        records.pop(_key(identity), None)
        records[_key(identity)] = list(record)
        _write(dict(list(records.items())[-_KEPT:]))


def forget(identity: tuple[int, int]) -> None:
    """Drop the record of a file found damaged."""
    with _lock:
        records = _read()
        if records.pop(_key(identity), None) is not None:
            _write(records)


def _write(records: dict[str, Any]) -> None:
    path = _records_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".whole-", dir=path.parent)  # owner-only
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(records, out)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError:
        pass  # no record: the file is checked at its next opening


def when_settled(settled_at_ns: int, then: Any) -> None:
    """Call ``then()`` once the clock has passed ``settled_at_ns``: now, or on a thread of its
    own that the interpreter waits for at exit (a few ms); never, if that is over 0.1 s away."""
    wait = (settled_at_ns - time.time_ns()) / 1e9
    if wait <= 0:
        then()
        return
    if wait > _LONGEST_WAIT:  # a clock that coarse (or a test that says so): no record
        return

    def later() -> None:
        time.sleep(wait)
        then()

    threading.Thread(target=later, name="slotmagic-whole", daemon=False).start()
