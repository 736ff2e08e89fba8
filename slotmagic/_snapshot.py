"""What the JupyterLab sidebar shows of a session, built from the public Session API.

Plain Python (no IPython): ``session_snapshot(session)`` is the ``state`` message the kernel
sends the sidebar (its types: :mod:`slotmagic._core.sidebar_protocol`)::

    {"type": "state", "protocol": 1, "session": "notes.ipynb", "current": "default",
     "model": "echo", "workflow": None,
     "budget": {"window": 8192, "total": 8192, "used": 35, "threshold": 5120,
                "parts": {"system": {"used": 0, "limit": 512}, "history": {"used": 35, "limit": 5120}, ...}},
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
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from ._core.sidebar_protocol import PROTOCOL, BudgetInfo, BudgetPart, StateMessage, WorkflowInfo
from ._errors import DamagedRecord, SlotMagicError

if TYPE_CHECKING:
    from ._core.messages import Message
    from ._core.slots import Slot
    from ._core.workflow import Workflow
    from ._engine.view.budgeting import SlotBudget

__all__ = [
    "LAST_USER_CHARS",
    "HistoryReader",
    "LastUserCache",
    "SessionReader",
    "WorkflowReader",
    "last_user_text",
    "session_snapshot",
]

LAST_USER_CHARS = 80
_SPACE = re.compile(r"\s+")


class HistoryReader(Protocol):
    """What they read of ``session.history``."""

    def last_message(self, slot: str | None = None, role: str = "user") -> Message | None: ...

    def last_messages(self, slots: Iterable[str], role: str = "user") -> dict[str, Message | None]: ...


class WorkflowReader(Protocol):
    """What they read of ``session.workflows``."""

    def active(self) -> Workflow | None: ...


class SessionReader(Protocol):
    """What the sidebar reads of a session: a :class:`~slotmagic.Session` is one. (A protocol,
    so that the sidebar does not depend on the façade that builds it.)"""

    @property
    def session_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def current_slot(self) -> str: ...

    @property
    def history(self) -> HistoryReader: ...

    @property
    def workflows(self) -> WorkflowReader: ...

    def list_slots(self) -> list[Slot]: ...

    def budget(self, slot: str | None = None) -> SlotBudget: ...


def last_user_text(text: str, limit: int = LAST_USER_CHARS) -> str:
    """The first words of a message on one line, at most ``limit`` characters (with "…" when cut)."""
    # most are one line with single spaces: no pattern to run (a text is printable only if its
    # sole whitespace is the ASCII space)
    flat = text.strip() if text.isprintable() and "  " not in text else _SPACE.sub(" ", text).strip()
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

    def get(self, session: SessionReader, slot: Slot) -> str | None:
        key = (session.session_id, slot.id, slot.meta.created_at, slot.meta.message_count)
        if key not in self._entries:
            self._entries[key] = _read_last_user(session, slot)
        return self._entries[key]

    def fill(self, session: SessionReader, slots: list[Slot]) -> None:
        """Read the entries ``slots`` lack in one call (branches sharing history share reads)."""
        self.texts(session, slots, keep_only=False)

    def keep_only(self, session: SessionReader, slots: list[Slot]) -> None:
        """Forget entries of slots that are gone or have grown, so the cache stays small."""
        live = {(session.session_id, s.id, s.meta.created_at, s.meta.message_count) for s in slots}
        self._entries = {k: v for k, v in self._entries.items() if k in live}

    def texts(self, session: SessionReader, slots: list[Slot], *, keep_only: bool = True) -> list[str | None]:
        """Each slot's entry, in order: ``keep_only`` (the entries of these slots only are
        kept), ``fill`` and ``get`` at once, each slot's key made once (5,000 slots a tree)."""
        sid, entries = session.session_id, self._entries
        keys = [(sid, s.id, s.meta.created_at, s.meta.message_count) for s in slots]
        missing = {key: slot.id for key, slot in zip(keys, slots, strict=True) if key not in entries}
        if keep_only:
            entries = self._entries = {key: entries[key] for key in keys if key in entries}
        if missing:
            found = session.history.last_messages(missing.values())
            shown: dict[int, str] = {}  # a message branches share is shortened once (found holds it)
            for key, slot_id in missing.items():
                message = found.get(slot_id)
                if message is None:
                    entries[key] = None
                    continue
                text = shown.get(id(message))
                if text is None:
                    text = shown[id(message)] = last_user_text(message.content)
                entries[key] = text
        return [entries[key] for key in keys]


def _read_last_user(session: SessionReader, slot: Slot) -> str | None:
    if slot.meta.message_count == 0:
        return None
    message = session.history.last_message(slot.id, "user")  # reads the end of the history only
    return None if message is None else last_user_text(message.content)


def session_snapshot(session: SessionReader, cache: LastUserCache | None = None) -> StateMessage:
    """The sidebar's ``state`` message for ``session``: JSON-ready, no message bodies beyond
    the first words of each slot's last user message."""
    cache = cache if cache is not None else LastUserCache()
    slots = session.list_slots()
    cache.keep_only(session, slots)
    cache.fill(session, slots)
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
        # A view's cost is bounded by the budget it is measured against (past it, history is
        # compacted), so this stays cheap however long the history is.
        "budget": _budget(session, current),
        "workflow": _workflow(session),
    }


def _budget(session: SessionReader, slot: str) -> BudgetInfo | None:
    """The current slot's next request against its budget, as the panel draws it."""
    try:
        budget = session.budget(slot)
    except SlotMagicError:  # e.g. a model whose counting cannot be set up: no bar, no error
        return None
    parts: dict[str, BudgetPart] = {
        name: {"used": use.used, "limit": use.allowed} for name, use in budget.report.categories.items()
    }
    return {
        "window": budget.window,
        "total": budget.budget.total,  # the slot's own budget, else the model's window
        "used": budget.report.used,
        "parts": parts,
        "threshold": budget.threshold,
    }


def _workflow(session: SessionReader) -> WorkflowInfo | None:
    """The active workflow as the panel shows it (name, current step, done of total, next)."""
    try:
        workflow = session.workflows.active()
    except DamagedRecord:  # the turn warns about it; the panel shows none
        return None
    return None if workflow is None else workflow.summary()
