"""Calls of the PostgreSQL store run again on a new connection when theirs was lost.

A connection dies under a call (the server restarted, a failover, an administrator's
``pg_terminate_backend``, a network blip): the call is run again, from its start, on a new
connection, when that is known to be safe —

- a **read**, always (it changed nothing);
- a **write** whose transaction did not commit: the connection was lost before its COMMIT
  (the server rolls it back), or with it and the server says so (``txid_status``, see
  ``PostgresStore._settle``). A write whose fate the server could not tell is never run
  again: its error says it may be stored;
- **opening** the store (its migration is one transaction).

A call that is part of a write under way (inside ``atomic()``, or called by another write)
is not run again on its own: the write is, as a whole. After :data:`TRIES` tries the error
is one line saying so, and for a write that nothing was stored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import wraps
from typing import Any, TypeVar

from .._errors import ConnectionLost, StoreError

logger = logging.getLogger("slotmagic")

__all__ = ["READS", "TRIES", "WRITES", "Retries", "retrying"]

T = TypeVar("T")
C = TypeVar("C", bound=type)

TRIES = 4
PAUSES = (0.05, 0.15, 0.4)  # seconds before the 2nd, 3rd and 4th tries: the server may be restarting

# The store's calls (``rows/``): the reads, the writes (each one write transaction, or a read
# and then one, as ``ensure_session``). ``update_meta`` settles a lost connection itself.
READS = (
    "sessions", "current_slot", "slots", "tree_slots", "slot", "has_slot", "last_messages", "generation", "history",
    "messages", "turns", "tip", "cell_turns", "unshared_turns", "workflows", "damaged_workflows",
    "active_workflow", "undo_steps", "search", "namespace_get", "namespace_has", "meta", "cell_record",
    "state_marker", "dump_session", "read_messages", "read_turns", "read_cached_turns", "read_first_system",
    "read_compactions", "read_context", "read_marks", "read_counts", "_file_size",
)  # fmt: skip
WRITES = (
    "ensure_session", "set_current_slot", "create_slot", "derive_slot", "update_config", "rename_slot",
    "delete_slot", "append_turn", "add_compaction", "change_context", "update_workflow", "use_workflow",
    "mark_message", "undo", "redo", "gc", "namespace_put", "record_cell", "write_counts", "load_session",
)  # fmt: skip


class Retries:
    """One store's retrying: what this thread has under way (a write call, a transaction)."""

    def __init__(self, closed: threading.Event) -> None:
        self._closed = closed
        self._local = threading.local()

    def _depth(self, what: str) -> int:
        return int(getattr(self._local, what, 0))

    @contextmanager
    def _within(self, *what: str) -> Iterator[None]:
        for name in what:
            setattr(self._local, name, self._depth(name) + 1)
        try:
            yield
        finally:
            for name in what:
                setattr(self._local, name, self._depth(name) - 1)

    def transaction(self) -> AbstractContextManager[None]:
        """A transaction under way on this thread (``atomic()``, a write's): no call made in
        it is run again on its own, only the write it is part of."""
        return self._within("transaction", "writing")

    def run(self, call: Callable[[], T], *, write: bool) -> T:
        """``call()``, run again (up to :data:`TRIES` in all) while its connection is lost. A
        read is run again on its own unless it is part of a transaction; a write unless it is
        part of another write."""
        if self._depth("writing" if write else "transaction"):
            return call()  # run again with what it is part of, as a whole
        for attempt in range(1, TRIES + 1):
            try:
                if not write:
                    return call()
                with self._within("writing"):
                    return call()
            except ConnectionLost as exc:
                if attempt == TRIES or self._closed.is_set():
                    stored = "; nothing was stored" if write else ""
                    raise StoreError(f"{exc} (tried {attempt} times, each on a new connection{stored})") from None
                logger.info("%s: trying again on a new connection", exc)
                time.sleep(PAUSES[min(attempt, len(PAUSES)) - 1])
        raise AssertionError("unreachable")  # pragma: no cover


def _retried(method: Callable[..., Any], write: bool) -> Callable[..., Any]:
    @wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._retries.run(lambda: method(self, *args, **kwargs), write=write)

    return call


def retrying(cls: C) -> C:
    """The class with each of its :data:`READS` and :data:`WRITES` run through its
    ``_retries`` (a :class:`Retries`)."""
    for names, write in ((READS, False), (WRITES, True)):
        for name in names:
            setattr(cls, name, _retried(getattr(cls, name), write))
    return cls
