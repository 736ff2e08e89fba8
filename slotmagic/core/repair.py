"""Tool calls and results paired the way both APIs require, whatever the history holds.

OpenAI wants every assistant tool call answered by a ``tool`` message right after the
assistant message ("tool_calls must be followed by tool messages responding to each
'tool_call_id'"); Anthropic wants a ``tool_result`` block for every ``tool_use`` in the next
user message ("tool_use ids were found without tool_result blocks"), and both refuse a result
whose call is not just before it. A stored history can break that: a turn cut between a call
and its result, tools switched off, a focused view that starts after a call. So the wire
modules send :func:`repair_tool_pairs` of a request's messages, and the engine can show the
same in previews:

- a call no result answers gets a synthetic one that says it was not run (``is_error``),
  after the results that are there, right after its assistant message;
- a result whose call is not in the assistant message just before it becomes a plain user
  message that says so (its text is kept: the model may have relied on it since);
- a second result for the same call is treated the same way;
- calls without an id, or sharing one, get distinct ids (their results, in order, follow).

:func:`wire_call_id` maps a call id to what an API accepts (Anthropic: ``^[a-zA-Z0-9_-]+$``;
OpenAI: at most 40 characters), the same way for a call and its result, so a conversation can
switch provider midway.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace

from .messages import Message, ToolCall

NOT_RUN = "the call was not run: the conversation went on without its result"

ANTHROPIC_MAX_ID = 64
OPENAI_MAX_ID = 40  # "string too long. Expected a string with maximum length 40" (OpenAI, Azure)

_ID = re.compile(r"[A-Za-z0-9_-]+\Z")
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")


def repair_tool_pairs(messages: Sequence[Message], note: str = NOT_RUN) -> tuple[Message, ...]:
    """``messages`` with every tool call answered right after it and every result after its
    call (see the module docstring); the messages themselves when nothing needed repair.
    ``note`` is the text of the synthetic results."""
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            out.append(orphan_as_text(message))  # no assistant tool call just before it
            continue
        if message.role != "assistant" or not message.tool_calls:
            out.append(message)
            continue
        calls, pending = _distinct_ids(message.tool_calls)
        out.append(message if calls == message.tool_calls else replace(message, tool_calls=calls))
        answered: set[str] = set()
        strays: list[Message] = []
        while i < n and messages[i].role == "tool":
            result = messages[i]
            i += 1
            queue = pending.get(result.tool_call_id or "")
            if not queue:
                strays.append(result)
                continue
            call_id = queue.pop(0)
            answered.add(call_id)
            out.append(result if result.tool_call_id == call_id else replace(result, tool_call_id=call_id))
        for call in calls:
            if call.id not in answered:
                out.append(Message.tool(call.id, note, call.name, is_error=True))
        out.extend(orphan_as_text(stray) for stray in strays)
    if len(out) == n and all(a is b for a, b in zip(out, messages, strict=True)):
        return tuple(messages)
    return tuple(out)


def orphan_as_text(result: Message) -> Message:
    """A tool result whose call is not before it, as a user message saying what it is."""
    tool = f"tool {result.name!r}" if result.name else "a tool"
    return Message.user(
        f"(the result of {tool}, call {result.tool_call_id}, whose call is not in this conversation)\n{result.content}"
    )


def _distinct_ids(calls: tuple[ToolCall, ...]) -> tuple[tuple[ToolCall, ...], dict[str, list[str]]]:
    """The calls with an id each of its own, and for each original id the ids its results
    (in order) now answer."""
    taken = {c.id for c in calls if c.id}
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    pending: dict[str, list[str]] = {}
    for k, call in enumerate(calls, 1):
        call_id = call.id
        if not call_id or call_id in seen:
            base = f"{call.id or 'call'}_{k}"
            call_id, extra = base, 1
            while call_id in taken or call_id in seen:
                extra += 1
                call_id = f"{base}_{extra}"
        seen.add(call_id)
        pending.setdefault(call.id, []).append(call_id)
        fixed.append(call if call_id == call.id else replace(call, id=call_id))
    return tuple(fixed), pending


def wire_call_id(call_id: str, max_length: int) -> str:
    """``call_id`` as an id made of letters, digits, ``_`` and ``-``, at most ``max_length``
    long. One that already is such an id is kept; another is cleaned and given a short hash of
    the original, so distinct ids stay distinct and the same id always maps to the same."""
    if call_id and len(call_id) <= max_length and _ID.match(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    clean = _NOT_ID.sub("_", call_id)[: max_length - len(digest) - 1].rstrip("_")
    return f"{clean or 'call'}_{digest}"
