"""Where an Anthropic request marks the prefix its prompt cache may keep (``cache_control``).

https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching: a request may mark up to
four blocks; the cache is read up to the longest marked prefix it holds. slotmagic marks the
last message (which alone caches everything before it), the system side and the tool
definitions, within what the user's own marks (in ``params``) leave of the four.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MOST_CACHE_MARKS", "cache_breakpoints", "cache_marks"]

_EPHEMERAL = {"type": "ephemeral"}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


MOST_CACHE_MARKS = 4  # "A maximum of 4 blocks with cache_control" (Anthropic's prompt caching docs)


def cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark the prefix Anthropic may cache (it caches up to each block marked): the
    conversation through its last message, the system side and the tool definitions, so the
    next turn, whose request starts with the same bytes, reads all of it from the cache
    (Anthropic finds an earlier breakpoint's entry by itself). The API takes at most four marks
    in a request: the ones the user put in ``params`` (server tools, a system of blocks) count
    first, and slotmagic's fill what is left, the most useful first (the last message's mark
    alone caches the whole prefix)."""
    room = MOST_CACHE_MARKS - cache_marks(body)
    for mark in (_mark_last_message, _mark_system, _mark_tools):
        if room <= 0:
            return
        room -= mark(body)


def cache_marks(body: Mapping[str, Any]) -> int:
    """How many blocks of ``body`` carry a ``cache_control``."""
    return sum(1 for block in _markable(body) if "cache_control" in block)


def _markable(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every block of ``body`` a ``cache_control`` may sit on: tools, system blocks, content blocks."""
    for tool in body.get("tools") or ():
        if isinstance(tool, Mapping):
            yield tool
    system = body.get("system")
    for block in system if isinstance(system, list) else ():
        if isinstance(block, Mapping):
            yield block
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping):
                yield block


def _mark_last_message(body: dict[str, Any]) -> bool:
    messages = body["messages"]
    if not messages:
        return False
    blocks = messages[-1]["content"]
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index].get("type") not in _UNMARKABLE:
            if "cache_control" in blocks[index]:
                return False
            blocks[index] = {**blocks[index], "cache_control": _EPHEMERAL}
            return True
    return False


def _mark_system(body: dict[str, Any]) -> bool:
    system = body.get("system")
    if isinstance(system, str):
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
        return True
    if isinstance(system, list) and system and isinstance(system[-1], dict) and "cache_control" not in system[-1]:
        system[-1] = {**system[-1], "cache_control": _EPHEMERAL}
        return True
    return False


def _mark_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    if not tools or "cache_control" in tools[-1]:
        return False
    tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
    return True
