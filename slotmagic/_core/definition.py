"""Comparing slot definitions, so re-running "create this slot" can tell a repeat from a clash."""

from __future__ import annotations

from .slots import SlotConfig, SlotMode


def _describe_source(config: SlotConfig) -> str:
    source = config.source
    if source.kind == "derived":
        how = "focused" if source.strategy is not None and source.strategy.kind == "focused" else "full"
        return f"derived ({how}) from {source.parent_id!r}"
    return "a new slot" if source.kind == "new" else "a static slot"


def describe_difference(existing: SlotConfig, wanted: SlotConfig) -> str | None:
    """The first way ``existing`` differs from ``wanted`` in words, or None if they define the
    same slot. Only what a user chooses when making a slot counts (origin, mode, focus, system
    prompt); the fork point and the budget do not."""
    if _describe_source(existing) != _describe_source(wanted):
        return f"it is {_describe_source(existing)}, not {_describe_source(wanted)}"
    if existing.mode is not wanted.mode:
        return f"its mode is {existing.mode.value!r}, not {wanted.mode.value!r}"
    if existing.mode is SlotMode.FOCUSED:
        have, want = existing.focused, wanted.focused
        if have.recent_messages != want.recent_messages:
            return f"it keeps the last {have.recent_messages} messages, not {want.recent_messages}"
        if have.keep_system != want.keep_system:
            return f"it {'keeps' if have.keep_system else 'drops'} the system prompt"
        if have.summary_override != want.summary_override:
            return f"its summary is {have.summary_override!r}, not {want.summary_override!r}"
    if existing.system != wanted.system:
        return f"its system prompt is {existing.system!r}, not {wanted.system!r}"
    return None
