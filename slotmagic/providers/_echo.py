"""``echo``: an offline, deterministic stand-in for a model.

It replies with what it was sent: how many messages, the first line of the system prompt,
and the last user message. Tutorials and tests run on it; it is not a real model.

Asked for a compaction summary (a request whose system prompt starts with slotmagic's
compaction marker), it answers in the requested format with a summary made from the
transcript's user messages, so compaction works offline end to end.

It calls tools when asked in so many words: each line of the last user message that reads
``call NAME`` or ``call NAME {"json": "arguments"}`` becomes a tool call when the request offers
any tools (several lines: calls in parallel). After the results come back it replies with
what each tool returned. So the tool loop can be shown and tested offline.

Asked for a reply of a schema (structured output), it answers with a value of that shape: each
string the first words of the last user message, numbers 0, booleans false, one item in each
list, an enum's first value.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from .._core.compaction import COMPACTION_MARKER
from .._core.images import Image, Part
from .._core.messages import Message, ToolCall
from .._core.request import ChatRequest
from .._core.tokens import estimate_message_tokens, estimate_text_tokens
from .._core.usage import Usage
from ._base import Completion, StreamEvent, TextDelta

_PIECES = re.compile(r"\S+\s*|\s+")


def echo_summary(transcript: str) -> str:
    """A summary in the compaction format: the user's questions as topics."""
    lines = transcript.splitlines()
    questions = [line[len("[user] ") :] for line in lines if line.startswith("[user] ")]
    earlier = next(
        (line[len("[earlier key points] ") :] for line in lines if line.startswith("[earlier key points] ")), None
    )
    topics = list(json.loads(earlier).get("topics", [])) if earlier else []
    topics = [*topics, *(" ".join(q.split()[:8]) for q in questions)][-6:]  # the latest few
    card = {"topics": topics, "decisions": [], "open_questions": topics[-1:], "facts": []}
    text = f"The user asked {len(questions)} question{'s' if len(questions) != 1 else ''}"
    text += f", the last about {topics[-1]!r}." if topics else "."
    return f"<card>{json.dumps(card, ensure_ascii=False)}</card>\n<summary>{text}</summary>"


_CALL = re.compile(r"^\s*call\s+([A-Za-z0-9_-]{1,64})\s*(\{.*\})?\s*$")


def echo_calls(request: ChatRequest) -> tuple[ToolCall, ...]:
    """The tool calls the last user message asks for, when it is the last message."""
    if not request.tools or not request.messages or request.messages[-1].role != "user":
        return ()
    calls: list[ToolCall] = []
    for line in request.messages[-1].content.splitlines():
        found = _CALL.match(line)
        if found:  # a tool the request does not offer too: real models make such calls
            calls.append(ToolCall(f"echo_{len(request.messages)}_{len(calls)}", found[1], found[2] or "{}"))
    return tuple(calls)


def echo_results(messages: tuple[Message, ...] | list[Message]) -> str | None:
    """A reply to tool results that just came back, naming what each returned."""
    results = []
    for m in reversed(messages):
        if m.role != "tool":
            break
        results.append(m)
    if not results:
        return None
    lines = [f"- {m.name or 'tool'}: {' '.join(m.content.split())[:200]}" for m in reversed(results)]
    return (
        f"**echo** (offline test model) got {len(results)} tool result{'s' if len(results) != 1 else ''}:\n"
        + "\n".join(lines)
    )


def echo_reply(messages: tuple[Message, ...] | list[Message]) -> str:
    after_tools = echo_results(messages)
    if after_tools is not None:
        return after_tools
    if messages and messages[0].role == "system" and messages[0].content.startswith(COMPACTION_MARKER):
        return echo_summary(messages[-1].content)
    system = next((m.content for m in messages if m.role == "system"), None)
    user = next((m for m in reversed(messages) if m.role == "user"), None)
    last_user = user.content if user is not None else None
    first_line = system.strip().splitlines()[0] if system and system.strip() else None
    count = len(messages)
    text = (
        f"**echo** (offline test model) received {count} message{'s' if count != 1 else ''}.\n"
        f"- system prompt: {first_line if first_line is not None else '(none)'}\n"
        f"- last user message: {last_user if last_user is not None else '(none)'}"
    )
    if user is not None and user.images:
        text += "\n- its parts: " + ", ".join(_describe(part) for part in user.parts)
    return text


def _describe(part: Part) -> str:
    """What echo says it received of one part: ``text (120 characters)``,
    ``image fig (image/png 640x480, 12,345 bytes)``."""
    if isinstance(part, Image):
        return f"image {part.label + ' ' if part.label else ''}({part.describe()})"
    return f"text ({len(part.text):,} characters)"


def echo_value(schema: Any, root: Mapping[str, Any], words: str, depth: int = 0) -> Any:
    """A value of ``schema``'s shape (see the module docstring); ``$ref`` read from ``root``."""
    if not isinstance(schema, Mapping) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        found: Any = root
        for key in ref[2:].split("/"):
            found = found.get(key, {}) if isinstance(found, Mapping) else {}
        return echo_value({**found, **{k: v for k, v in schema.items() if k != "$ref"}}, root, words, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            chosen = next((o for o in options if isinstance(o, Mapping) and o.get("type") != "null"), options[0])
            return echo_value(chosen, root, words, depth + 1)
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: echo_value(sub, root, words, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        return [echo_value(schema.get("items", {}), root, words, depth + 1)]
    return {"string": words, "integer": 0, "number": 0, "boolean": False}.get(str(kind))


class EchoProvider:
    name = "echo"

    def __init__(self, settings: object = None, *, name: str = "echo", registry: object = None) -> None:
        self.name = name  # settings and registry are taken, as by every registered provider, and unused

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        calls = echo_calls(request)
        if calls:
            usage = Usage(sum(m.tokens or estimate_message_tokens(m) for m in request.messages), 10 * len(calls))
            yield Completion(Message.assistant("", calls), usage, "tool_calls", "echo")
            return
        text = echo_reply(request.messages)
        if request.schema is not None:
            user = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            words = " ".join(user.split()[:8])
            text = json.dumps(echo_value(request.schema.schema, request.schema.schema, words), ensure_ascii=False)
        for piece in _PIECES.findall(text):  # word by word, like a real stream
            yield TextDelta(piece)
        usage = Usage(
            input_tokens=sum(m.tokens or estimate_message_tokens(m) for m in request.messages),
            output_tokens=estimate_text_tokens(text),
        )
        yield Completion(Message.assistant(text), usage, "stop", "echo")

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self.stream(request):
            yield event

    def close(self) -> None:
        pass
