"""The read-time filters that turn a slot's stored history into what the model sees."""

from __future__ import annotations

from collections.abc import Sequence

from .messages import Message
from .slots import FocusedConfig, SlotConfig, SlotMode

SUMMARY_PREFIX = "Summary of the earlier conversation: "


def focused_view(messages: Sequence[Message], config: FocusedConfig) -> list[Message]:
    """The first system message (if ``keep_system``), then the summary override as one
    system message (if set), then the last ``recent_messages`` non-system messages.

    The window never starts on a tool result: it widens back to the assistant message that
    made the call, because providers reject a tool result whose call is missing.
    """
    view: list[Message] = []
    if config.keep_system:
        first_system = next((m for m in messages if m.role == "system"), None)
        if first_system is not None:
            view.append(first_system)
    if config.summary_override:
        view.append(Message.system(SUMMARY_PREFIX + config.summary_override))
    if config.recent_messages > 0:
        rest = [m for m in messages if m.role != "system"]
        start = max(0, len(rest) - config.recent_messages)
        while start > 0 and rest[start].role == "tool":
            start -= 1
        view.extend(rest[start:])
    return view


def slot_view(messages: Sequence[Message], config: SlotConfig) -> list[Message]:
    """Apply the slot's mode: focused slots filter, full and readonly slots see everything."""
    if config.mode is SlotMode.FOCUSED:
        return focused_view(messages, config.focused)
    return list(messages)
