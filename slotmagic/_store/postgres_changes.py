"""What another kernel changed, and who is told: the PostgreSQL store's side of keeping many
kernels on one schema current without each re-reading everything on every turn.

- **Reading again only what changed.** Each write records the sessions it changed
  (``sessions.changed``, or ``changes.unscoped`` when it cannot say) in the round trip of its
  COMMIT; a store reads the change counter at each call and, with it, the sessions changed
  since the version it knows, and forgets only those (``_others_changed``).
- **Telling only those who follow.** A write NOTIFYs ``CHANNEL`` (kernels following no one
  session listen there) and the channel of each session it changed; a store following one
  session listens only to that session's channel and the one of writes that named none, so a
  team's kernels are not even sent each other's turns. The listener thread
  (``postgres_connection._Listener``) hands notifications to ``_notified``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .postgres_connection import _Connection, _Listener
from .postgres_schema import CHANNEL, session_channel
from .rows import Connection, RowStore
from .rows.cache import SessionRows, SlotRow
from .rows.common import SLOT_SELECT
from .urls import PostgresTarget

# A session's rows changed since a version: the current slot, the last write that removed one
# of its rows, and the rows written since (SlotRow(*got[2:])).
_SESSION_AND_SLOTS_SINCE = (
    f"SELECT sessions.current_slot, sessions.removed, {SLOT_SELECT}"
    " FROM sessions LEFT JOIN slots ON slots.session_id = sessions.id AND slots.changed > ? WHERE sessions.id = ?"
)

__all__ = ["ChangeTracking"]

_NEVER = 2**62  # a change counter no store reaches: "no version known yet"


class ChangeTracking(RowStore):
    """The change tracking half of ``PostgresStore`` (which sets these attributes)."""

    target: PostgresTarget
    _kwargs: dict[str, Any]  # how its connections are made
    schema: str
    timeout: float
    _version: int | None
    _token: str
    _listener: _Listener | None
    _heard: int
    _retell_at: float | None
    _lock: threading.RLock
    # session -> (version, its rows as of that version): others changed it since (see _rows)
    _stale: dict[str, tuple[int, SessionRows]]

    def _changes(self, db: _Connection) -> tuple[int, int, list[str], list[str]]:
        """The change counter, the last write whose sessions are not known, the sessions
        written since the version this store knows, and those of them whose workflows or
        annotations were: one round trip."""
        known = _NEVER if self._version is None else self._version
        found = db.execute(
            "SELECT version, unscoped, ARRAY(SELECT id FROM sessions WHERE changed > ?),"
            " ARRAY(SELECT id FROM sessions WHERE noted > ?) FROM changes",
            (known, known),
        ).fetchone()
        return int(found[0]), int(found[1]), list(found[2]), list(found[3])

    def _sync(self, version: int, unscoped: int, sessions: list[str], noted: list[str]) -> None:
        known = self._version
        if version == known:
            return
        self._version = version
        if known is not None:
            self._others_changed(known, unscoped, sessions, noted)

    def _others_changed(self, known: int, unscoped: int, sessions: list[str], noted: list[str]) -> None:
        """Other connections wrote since version ``known``: what they changed is read again.
        Writes record the sessions they changed (``sessions.changed``), so only those are
        forgotten; a write that could not say (``changes.unscoped``) makes everything read
        again. Writes that changed no session (token counts, calibration) cost nothing. A
        session's active workflow and its segments' marks, compactions and working context
        are forgotten only when a write to those was recorded (``sessions.noted``): not
        after another member's turn."""
        if unscoped > known:
            self._others_wrote()
            return
        if not sessions:
            return
        self._generation += 1
        self._others_seen += 1
        mine: set[int] = set()  # the segments of the sessions written
        annotated: set[int] = set()  # of those whose workflows or annotations were
        for session_id in noted:
            self._active_workflows.pop(session_id, None)
            rows = self._sessions.get(session_id)
            if rows is not None:
                annotated.update(rows.rows)
        for session_id in sessions:
            rows = self._sessions.pop(session_id, None)
            if rows is not None:
                mine.update(rows.rows)
                self._stale[session_id] = (known, rows)
        others: set[int] = set()
        for rows in self._sessions.values():
            others.update(rows.rows)
        # A segment whose session is not known now may be one of those: read again too.
        keys = [key for key in self._segments if key in mine or key not in others]
        for key in keys:
            self._created.pop(key, None)
        self._reread_segments(keys, [key for key in keys if key in annotated or key not in mine])

    def _others_wrote(self) -> None:
        self._stale.clear()
        super()._others_wrote()

    def _forget(self) -> None:
        self._stale.clear()
        super()._forget()

    def _rows(self, db: Connection, session_id: str, every: bool = True) -> SessionRows:
        """A session others changed since this store read its rows is read again from the
        rows they wrote (``slots.changed``, set on every write to a row): a member's turn
        changed one row of the session's hundred. A row removed meanwhile
        (``sessions.removed``) makes it read whole. Rows read in part (``every=False``) are
        kept in part: the changed rows of slots not read yet are left to be read when asked."""
        stale = self._stale.pop(session_id, None)
        if stale is None or session_id in self._sessions or (every and stale[1].partial_of is not None):
            return super()._rows(db, session_id, every)
        since, kept = stale
        found = db.execute(_SESSION_AND_SLOTS_SINCE, (since, session_id)).fetchall()
        if not found or found[0][1] > since:  # the session is gone, or rows of it
            return super()._rows(db, session_id, every)
        rows = dict(kept.rows)
        for got in found:
            row = SlotRow(*got[2:])
            if row.key is not None and (kept.partial_of is None or row.key in rows):
                rows[row.key] = row
        current = found[0][0]
        if kept.partial_of is not None and (
            (current is not None and current not in rows)
            or any(r.undo is not None and not r.live for r in rows.values())
        ):
            return super()._rows(db, session_id, every)  # its current slot moved, or undo hid a row: read anew
        if self._touched is not None:
            self._touched.add(session_id)
        for row in rows.values():
            self._row_read(row)
        loaded = self._sessions[session_id] = SessionRows(rows, current, partial_of=kept.partial_of)
        return loaded

    def _channels_of(self, sessions: list[str]) -> list[str]:
        """The channels a write to ``sessions`` is told on besides ``CHANNEL`` (which kernels
        following no one session listen to): each session's own, so that a kernel is woken
        only by writes to the session it follows; none known, the channel every follower
        also listens to."""
        if not sessions or len(sessions) > 20:
            return [session_channel(self.schema, None)]
        return [session_channel(self.schema, session) for session in sessions]

    def channels(self) -> set[str]:
        """The channels this store's listener listens to (``follow`` chooses)."""
        following = self.following
        if following is None:
            return {CHANNEL}
        return {session_channel(self.schema, following), session_channel(self.schema, None)}

    def _payload(self, version: int) -> str:
        """``schema token version sessions``: the sessions the write changed (JSON), ``"-"`` for
        none a view shows (token counts, calibration), ``"*"`` when it is not known."""
        if self._quiet and not self._touched:
            sessions = "-"
        elif self._touched:
            sessions = json.dumps(sorted(self._touched), ensure_ascii=False)
            if len(sessions.encode()) > 6000:  # NOTIFY payloads stop at 8000 bytes
                sessions = "*"
        else:
            sessions = "*"
        return f"{self.schema} {self._token} {version} {sessions}"

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (on a background thread) after another connection commits a
        write to this schema; returns a function that stops it."""
        unsubscribe = self._add_subscriber(callback)
        with self._lock:
            if self._listener is None:
                self._listener = _Listener(self)
                self._listener.start()
                self._listener.ready.wait(self.timeout)
        return unsubscribe

    def _notified(self, payloads: Sequence[str]) -> None:
        news = False
        for payload in payloads:
            schema, token, version, sessions = [*payload.split(" ", 3), "", "", ""][:4]
            if schema != self.schema:
                continue
            if version.isdigit():
                self._heard = max(self._heard, int(version))
            news = news or (token != self._token and self._concerns(sessions))
        if news:
            self._tell_subscribers()

    def _concerns(self, sessions: str) -> bool:
        """Whether a write to ``sessions`` (a payload's last part) is news to the subscribers:
        with ``follow(session_id)`` only writes to that session (or to ones not known) are; a
        team's kernels on one schema are then not woken by each other's sessions."""
        if sessions == "-":
            return False
        following = self.following
        if following is None or not sessions.startswith("["):
            return True
        try:
            return following in json.loads(sessions)
        except ValueError:
            return True

    def follow(self, session_id: str | None) -> None:
        super().follow(session_id)
        self._wake_listener()  # to listen to that session's channel

    def _wake_listener(self) -> None:
        listener = self._listener
        if listener is not None:
            listener.wake()

    def _retell_in(self) -> float:
        """How long the listener may sleep: until subscribers are to be told again, if they
        are; otherwise until it is woken (the timeout is a safeguard only)."""
        at = self._retell_at
        return 60.0 if at is None else max(0.0, at - time.monotonic())

    def _retell_if_due(self) -> None:
        at = self._retell_at
        if at is not None and time.monotonic() >= at:
            self._retell_at = None
            self._tell_subscribers()

    def _caught_up(self, version: int) -> None:
        """The listener (re)connected and the counter reads ``version``: writes made while it
        was not listening are news unless the version is one this store already knew."""
        known = max(self._heard, self._version or 0)
        self._heard = max(self._heard, version)
        if version != known:
            self._tell_subscribers()
