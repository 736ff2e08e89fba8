"""Tool calls and results paired the way both APIs require, whatever the history holds.

OpenAI wants every assistant tool call answered by a ``tool`` message right after the
assistant message ("tool_calls must be followed by tool messages responding to each
'tool_call_id'"); Anthropic wants a ``tool_result`` block for every ``tool_use`` in the next
user message ("tool_use ids were found without tool_result blocks"), and both refuse a result
whose call is not just before it. A stored history can break that: a turn cut between a call
and its result, tools switched off, a focused view that starts after a call. So a step of
the view pipeline repairs what a request is made of (``_engine/steps/tool_pairs.py``, through
:func:`repair_plan`), and the preview and the budget show and count the same messages; the
wire modules repair again what they are sent, for requests made without the pipeline (a tool
round, a summary, a provider called directly): on repaired messages that changes nothing.

- a call no result answers gets a synthetic one that says it was not run (``is_error``),
  after the results that are there, right after its assistant message;
- a result whose call is not in the assistant message just before it becomes a plain user
  message that says so (its text is kept: the model may have relied on it since);
- a second result for the same call is treated the same way, except that a result that
  follows a "not run" answer of the call (a turn that could not run it: no tools were offered)
  takes that answer's place: that is how a tool result is supplied by hand
  (``session.append([Message.tool(call.id, "...", call.name)])`` right after such a turn);
- calls without an id, or sharing one, get distinct ids (their results, in order, follow);
  so does a call whose id an earlier message already used (Kimi on OpenRouter numbers its
  calls "0", "1" … again in every reply), since both APIs want every id once per request.

:func:`wire_call_id` maps a call id to what an API accepts (Anthropic: ``^[a-zA-Z0-9_-]+$``;
OpenAI: at most 40 characters), the same way for a call and its result, so a conversation can
switch provider midway.
"""

from __future__ import annotations

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
    ``note`` is the text of the synthetic results. Repairing a repaired list changes nothing."""
    plan = repair_plan(messages, note)
    return tuple(messages) if plan is None else tuple(m for m, _ in plan)


def repair_plan(messages: Sequence[Message], note: str = NOT_RUN) -> tuple[tuple[Message, int | None], ...] | None:
    """What :func:`repair_tool_pairs` makes of ``messages``, each with the index of the message
    it stands for (None for a synthetic "not run" result); None when nothing needed repair.
    The view pipeline uses it to keep each repaired message's place and origin."""
    for m in messages:  # a loop, not any() over a generator: it runs for every request
        if m.tool_calls or m.role == "tool":
            break
    else:
        return None  # most requests: no tool exchange at all
    out: list[tuple[Message, int | None]] = []
    used: set[str] = set()  # call ids of earlier messages
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            out.append((orphan_as_text(message), i - 1))  # no assistant tool call just before it
            continue
        if message.role != "assistant" or not message.tool_calls:
            out.append((message, i - 1))
            continue
        calls, pending = _distinct_ids(message.tool_calls, used)
        used.update(c.id for c in calls)
        out.append((message if calls == message.tool_calls else replace(message, tool_calls=calls), i - 1))
        stood_for = {original: list(ids) for original, ids in pending.items()}
        answers: dict[str, tuple[Message, int]] = {}
        strays: list[int] = []
        while i < n and messages[i].role == "tool":
            result = messages[i]
            i += 1
            queue = pending.get(result.tool_call_id or "")
            if queue:
                call_id = queue.pop(0)
            else:  # a second result: it replaces a "not run" answer, else it is told apart
                ids = stood_for.get(result.tool_call_id or "", [])
                call_id = next((c for c in ids if c in answers and is_not_run(answers[c][0])), "")
                if not call_id:
                    strays.append(i - 1)
                    continue
            answer = result if result.tool_call_id == call_id else replace(result, tool_call_id=call_id)
            answers[call_id] = (answer, i - 1)
        out.extend(answers.values())  # as they came; a hand-supplied result where its "not run" was
        out.extend((Message.tool(c.id, note, c.name, is_error=True), None) for c in calls if c.id not in answers)
        out.extend((orphan_as_text(messages[k], "which was answered above"), k) for k in strays)
    if len(out) == n and all(k == j and m is messages[j] for j, (m, k) in enumerate(out)):
        return None
    return tuple(out)


def orphan_as_text(result: Message, why: str = "whose call is not in this conversation") -> Message:
    """A tool result whose call is not before it (or was answered already), as a user message
    saying what it is."""
    tool = f"tool {result.name!r}" if result.name else "a tool"
    return Message.user(f"(the result of {tool}, call {result.tool_call_id}, {why})\n{result.content}")


def is_not_run(message: Message) -> bool:
    """Whether a tool message is a "not run" answer: the call was never run (no tools were
    offered, the round limit, a turn cut short), so a real result may take its place."""
    return message.role == "tool" and message.is_error and "the call was not run" in message.content


def _distinct_ids(
    calls: tuple[ToolCall, ...], used: set[str] | frozenset[str] = frozenset()
) -> tuple[tuple[ToolCall, ...], dict[str, list[str]]]:
    """The calls with an id each of its own (none of them in ``used``, the ids of earlier
    messages), and for each original id the ids its results (in order) now answer."""
    taken = {c.id for c in calls if c.id} | set(used)
    seen: set[str] = set(used)
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
    import hashlib  # here: OpenSSL's module loads in ~3 ms, at the first digest

    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    clean = _NOT_ID.sub("_", call_id)[: max_length - len(digest) - 1].rstrip("_")
    return f"{clean or 'call'}_{digest}"
