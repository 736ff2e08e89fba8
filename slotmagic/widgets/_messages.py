"""The widgets' messages of a fixed shape: what a view reads of the answer to its last action.

A view sends its actions as custom messages (``{"type": ..., ...}``, each widget its own, checked
by the widget that takes them: ``_tree.py``, ``_workflow.py``, ``_summary.py``) and learns
the answer from the ``status`` trait: an ``ActionStatus``, which ``tree.js`` and
``workflow.js`` read (``kind``, ``text``, ``seq``; ``error``, ``action`` and ``slot`` to offer a
forced delete; ``current`` to tell a stale line).
"""

# No ``from __future__ import annotations``: a TypedDict reads ``NotRequired`` from its
# annotations when the class is made, and a string annotation would hide it.
from typing import Literal, NotRequired, TypedDict

__all__ = ["ActionStatus"]


class ActionStatus(TypedDict):
    """The answer to a view's last action (the ``status`` trait of a ``SessionWidget``)."""

    kind: Literal["ok", "error"]
    text: str  # one line, for the user
    seq: int  # new for every answer: the view shows a line once (a refusal's is negative)
    action: NotRequired[object]  # the ``type`` of the action answered, as sent
    slot: NotRequired[str]  # the slot it named
    error: NotRequired[str]  # the error's class name: "SlotNotEmpty", "AsOfCell" ...
    current: NotRequired[str | None]  # the current slot the action left (a later change makes the line stale)
