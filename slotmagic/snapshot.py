"""What the JupyterLab sidebar shows of a session, built from the public Session API.

Plain Python (no IPython): ``session_snapshot(session)`` is the ``state`` message the kernel
sends the sidebar (see :mod:`slotmagic.magics.sidebar` for the protocol)::

    {"type": "state", "protocol": 1, "session": "notes.ipynb", "current": "default",
     "model": "echo", "budget": None, "workflow": None,
     "slots": [{"id": "default", "parent": None, "mode": "full", "source": "new",
                "messages": 2, "tokens": 31, "turns": 1, "current": True,
                "last_user": "I need help with a rental deposit dispute."}]}

The counts come from the slot list, which the store keeps up to date, so listing costs one
query whatever the history's length. Only ``last_user`` needs a slot's messages, and only the
last few of them (read from the end); a :class:`LastUserCache` keeps it per slot and history
length, so they are read again only after the history changed (a turn, or a new slot).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.slots import Slot
    from .session import Session

__all__ = ["LAST_USER_CHARS", "PROTOCOL", "LastUserCache", "last_user_text", "session_snapshot"]

PROTOCOL = 1
LAST_USER_CHARS = 80
_SPACE = re.compile(r"\s+")


def last_user_text(text: str, limit: int = LAST_USER_CHARS) -> str:
    """The first words of a message on one line, at most ``limit`` characters (with "…" when cut)."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:  # end on a whole word unless that loses too much
        cut = cut[:space]
    return cut.rstrip() + "…"


class LastUserCache:
    """The last user message of each slot, read once per slot and history length.

    Histories are append-only, so a slot whose message count and creation time are unchanged
    still ends with the same messages; a renamed slot keeps its entry under its new id only
    after one more read.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, float, int], str | None] = {}

    def get(self, session: Session, slot: Slot) -> str | None:
        key = (session.session_id, slot.id, slot.meta.created_at, slot.meta.message_count)
        if key not in self._entries:
            self._entries[key] = _read_last_user(session, slot)
        return self._entries[key]

    def keep_only(self, session: Session, slots: list[Slot]) -> None:
        """Forget entries of slots that are gone or have grown, so the cache stays small."""
        live = {(session.session_id, s.id, s.meta.created_at, s.meta.message_count) for s in slots}
        self._entries = {k: v for k, v in self._entries.items() if k in live}


def _read_last_user(session: Session, slot: Slot) -> str | None:
    if slot.meta.message_count == 0:
        return None
    # From the end of the history backwards, a few messages at a time (a tool loop puts a
    # handful between a question and its answer): a long history is not read whole.
    history = session.store.history(session.session_id, slot.id)
    hi, chunk = len(history), 8
    while hi > 0:
        lo = max(0, hi - chunk)
        for message in reversed(history.messages(lo, hi)):
            if message.role == "user":
                return last_user_text(message.content)
        hi, chunk = lo, chunk * 4
    return None


def session_snapshot(session: Session, cache: LastUserCache | None = None) -> dict[str, Any]:
    """The sidebar's ``state`` message for ``session``: JSON-ready, no message bodies beyond
    the first words of each slot's last user message."""
    cache = cache if cache is not None else LastUserCache()
    slots = session.list_slots()
    cache.keep_only(session, slots)
    current = next((s.id for s in slots if s.current), None) or session.current_slot
    return {
        "type": "state",
        "protocol": PROTOCOL,
        "session": session.session_id,
        "current": current,
        "model": session.model,
        "slots": [
            {
                "id": slot.id,
                "parent": slot.meta.parent_id,
                "mode": slot.mode.value,
                "source": slot.source.kind,
                "messages": slot.meta.message_count,
                "tokens": slot.meta.total_tokens,
                "turns": slot.meta.turns,
                "current": slot.id == current,
                "last_user": cache.get(session, slot),
            }
            for slot in slots
        ],
        # Filled in by later work (the budget consumed by compaction, the workflow DAG); the
        # panel shows them when they are not None.
        "budget": None,
        "workflow": None,
    }
