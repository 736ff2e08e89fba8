"""The words every display of a slot shares: how a mode, an entry and a budget category are
named, and how much of a body a widget is sent.

A view's and a budget's own forms (text, the data the widgets send, escaped HTML) live with
them (:mod:`slotmagic._engine.view.view`, :mod:`slotmagic._engine.view.budgeting`), made from the same
data, so every display says the same thing. Plain Python: no IPython, no widgets.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ._core.slots import SlotConfig, SlotMode

__all__ = ["BODY_LIMIT", "CATEGORY_LABELS", "NAMESPACE_REF", "ROW_LIMIT", "describe_mode", "entry_label", "plural"]

BODY_LIMIT = 4_000  # characters of one message body sent to a widget
ROW_LIMIT = 400  # history entries a preview widget shows (the latest); the text form shows all
CATEGORY_LABELS = {
    "system": "system",
    "history": "history",
    "tools": "tools",
    "tool_results": "tool results",
    "reserve": "reserve",
}
_LABELS = {
    "system": "system prompt",
    "summary": "summary",
    "compaction": "compaction summary",
    "new": "new message",
    "elided": "older tool result, shortened",
    "not_run": "added: the call was not run",
    "opening": "added: the API wants a user message first",
    "told": "told as text: thinking is on",
}
NAMESPACE_REF = re.compile(r"namespace://[^\s)\]>\"']+")


def describe_mode(config: SlotConfig) -> str:
    """A slot's mode in words: ``full``, ``readonly``, or what a focused slot keeps."""
    if config.mode is SlotMode.FOCUSED:
        focus = config.focused
        parts = [f"last {plural(focus.recent_messages, 'message')}"]
        parts.append("system prompt kept" if focus.keep_system else "system prompt dropped")
        if focus.summary_override:
            parts.append("with a summary")
        return "focused: " + ", ".join(parts)
    return str(config.mode)


def entry_label(kind: str) -> str:
    """What an entry is, for a label: a stored message says nothing more than its role; an
    injected block says what put it there (a kind this version does not know by its name)."""
    return "" if kind == "history" else _LABELS.get(kind, kind)


@lru_cache(maxsize=4_096)  # a tree of 10,000 slots shows 30,000 counts, most of them alike
def plural(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``, ``1,000 tokens``."""
    return f"{thousands(n)} {noun}{'' if n == 1 else 's'}"


def thousands(n: int) -> str:
    """``1,000``: the thousands separated. (``str`` below a thousand: formatting with the
    separator costs ~4x, and a tree of 10,000 slots shows 40,000 counts, most of them small.)"""
    return str(n) if -1000 < n < 1000 else f"{n:,}"
