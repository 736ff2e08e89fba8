"""Reading Anthropic's Messages API reply stream into one reply.

The stream: ``message_start`` (input token counts), per content block ``content_block_start``,
``content_block_delta`` (``text_delta`` text or ``input_json_delta`` pieces of a tool call's
input JSON) and ``content_block_stop``, then ``message_delta`` (stop reason, output token
count) and ``message_stop``, which alone makes the reply complete. ``ping`` events come any
time; an ``error`` event (e.g. ``overloaded_error``) ends the reply as a failure. An event of
the wrong shape is a :class:`~slotmagic._errors.MalformedReply`, never a raw exception.

Extended thinking (``params={"thinking": {"type": "enabled", "budget_tokens": N}}``): a reply
opens with ``thinking`` blocks (``thinking_delta`` text, then one ``signature_delta``) or
``redacted_thinking`` blocks (their opaque ``data`` whole in ``content_block_start``). They are
kept on the assistant message (:class:`~slotmagic._core.messages.Thinking`), not in its text,
and sent back unchanged and first in that message's content. Every other block the API
returns beside text and tool calls (``server_tool_use`` and ``web_search_tool_result`` of a
server tool, ``compaction``) is kept whole the same way, where it came in the reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from httpx_sse import ServerSentEvent

from .._core.messages import Message, Thinking, ToolCall
from .._core.usage import Usage
from .._errors import MalformedReply, StreamInterrupted
from . import _wire as wire
from ._base import Completion, StreamEvent, TextDelta
from ._sse import parse_event_json, stream_error
from ._wire import json_object


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    initial_input: Any = None
    parts: list[str] = field(default_factory=list)
    signature: str | None = None  # a thinking block's
    data: str | None = None  # a redacted_thinking block's
    raw: dict[str, Any] | None = None  # any other block, as content_block_start had it


class EventAssembler:
    """Builds one reply from Messages API stream events. An event of a shape the API does not
    send (a field of the wrong type, numbers past any range, JSON nested past Python's limit)
    is a :class:`MalformedReply`, never a raw exception."""

    def __init__(self, label: str, secrets: tuple[str, ...] = ()) -> None:
        self.label = label
        self.secrets = secrets
        self.done = False
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._model: str | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        data = parse_event_json(self.label, event)
        if not isinstance(data, dict):
            return []
        try:
            return self._feed(event, data)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError):
            raise self._malformed(data) from None

    def _malformed(self, data: Any) -> MalformedReply:
        kind = data.get("type") if isinstance(data, dict) else None
        shown = kind if isinstance(kind, str) and len(kind) < 40 else "an"
        return MalformedReply(
            f"{self.label}: {shown} event in the reply has a shape the Messages API does not send; "
            f"the partial reply was discarded"
        )

    def _feed(self, event: ServerSentEvent, data: dict[str, Any]) -> list[StreamEvent]:
        kind = data.get("type") or event.event
        if kind == "error":
            raise stream_error(self.label, data.get("error"), self.secrets)
        if kind == "message_start":
            message = wire.mapping(data.get("message"))
            self._model = wire.text(message.get("model"))
            self._add_usage(message.get("usage"))
        elif kind == "content_block_start":
            block = wire.mapping(data.get("content_block"))
            index = wire.index(data.get("index", len(self._blocks)))
            started = _Block(
                _str(block.get("type", "")), _str(block.get("id", "")), _str(block.get("name", "")), block.get("input")
            )
            self._blocks[index] = started
            if started.type == "thinking":
                started.signature = wire.text(block.get("signature")) or None  # "" until its signature_delta
                if block.get("thinking"):
                    started.parts.append(_str(block["thinking"]))
            elif started.type == "redacted_thinking":
                started.data = wire.text(block.get("data"))
            elif started.type == "text":
                if block.get("text"):
                    return self._add_text(index, _str(block["text"]))
            elif started.type != "tool_use":
                started.raw = dict(block)
                json.dumps(started.raw, allow_nan=False)  # it is sent back as it came: it must be JSON
        elif kind == "content_block_delta":
            delta = wire.mapping(data.get("delta"))
            index = wire.index(data.get("index", 0))
            delta_type = delta.get("type")
            if delta_type == "text_delta" and delta.get("text"):
                return self._add_text(index, _str(delta["text"]))
            if delta_type == "input_json_delta" and delta.get("partial_json"):
                self._blocks.setdefault(index, _Block("tool_use")).parts.append(_str(delta["partial_json"]))
            elif delta_type == "thinking_delta" and delta.get("thinking"):
                self._blocks.setdefault(index, _Block("thinking")).parts.append(_str(delta["thinking"]))
            elif delta_type == "signature_delta" and isinstance(delta.get("signature"), str):
                # one per block in practice; like Anthropic's SDK, the last one is the signature
                self._blocks.setdefault(index, _Block("thinking")).signature = delta["signature"]
            elif delta_type == "compaction_delta" and delta.get("content"):
                self._blocks.setdefault(index, _Block("compaction", raw={"type": "compaction"})).parts.append(
                    _str(delta["content"])
                )
            # citations_delta and delta types added later: not part of the stored reply
        elif kind == "message_delta":
            stop = wire.mapping(data.get("delta")).get("stop_reason")
            self._stop_reason = wire.text(stop) or self._stop_reason
            self._add_usage(data.get("usage"))  # cumulative counts: later values replace earlier ones
        elif kind == "message_stop":
            self.done = True
        # ping, content_block_stop and event types added later need nothing
        return []

    def _add_text(self, index: int, text: str) -> list[StreamEvent]:
        self._blocks.setdefault(index, _Block("text")).parts.append(text)
        return [TextDelta(text)]

    def _add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key, value in wire.mapping(usage).items():
            if isinstance(value, int) and not isinstance(value, bool):
                if not 0 <= value < 2**53:
                    raise ValueError(f"usage {key} out of range")
                self._usage[key] = value
            elif isinstance(value, float):
                raise ValueError(f"usage {key} is not a whole number")

    def finish(self) -> Completion:
        if not self.done:
            raise StreamInterrupted(
                f"{self.label}: the reply stream ended without its final message_stop event; "
                f"the partial reply was discarded"
            )
        try:
            return self._finish()
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError):
            raise self._malformed({"type": "content_block"}) from None

    def _finish(self) -> Completion:
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        text: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[Thinking] = []
        names: dict[str, str] = {}  # server tool use id -> its tool's name
        for b in blocks:
            if b.type == "text":
                text.append("".join(b.parts))
            elif b.type == "tool_use":
                arguments = "".join(b.parts) or json.dumps(b.initial_input or {}, allow_nan=False)
                calls.append(ToolCall(b.id or f"toolu_{len(calls) + 1}", b.name, arguments))
            elif b.type == "thinking":
                thinking.append(Thinking("thinking", "".join(b.parts), b.signature, after_calls=len(calls)))
            elif b.type == "redacted_thinking":
                thinking.append(Thinking("redacted_thinking", data=b.data or "", after_calls=len(calls)))
            else:
                raw = dict(b.raw or {"type": b.type})
                if b.type == "server_tool_use":
                    raw["input"] = json_object("".join(b.parts)) if b.parts else wire.mapping(raw.get("input"))
                    names[_str(raw.get("id", ""))] = _str(raw.get("name", ""))
                elif b.type == "compaction" and b.parts:
                    raw["content"] = "".join(b.parts)
                shown = block_text(raw, names)
                at = sum(len(t) for t in text)
                thinking.append(
                    Thinking("block", shown, data=json.dumps(raw, ensure_ascii=False), after_calls=len(calls), at=at)
                )
        u = self._usage
        cached = u.get("cache_read_input_tokens", 0)
        usage = Usage(
            # Anthropic counts cache reads and writes apart from input_tokens; ours is the total.
            input_tokens=u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + cached,
            output_tokens=u.get("output_tokens", 0),
            cached_tokens=cached,
        )
        message = Message.assistant("".join(text), calls, thinking)
        return Completion(message, usage, self._stop_reason, self._model)


def block_text(block: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """What a kept block says, for a person and for a request that cannot take the block
    back: a server tool's call, its results (a web search's titles and links), a compaction's
    summary."""
    kind = str(block.get("type", ""))
    if kind == "server_tool_use":
        return f"[{block.get('name')} {json.dumps(block.get('input') or {}, ensure_ascii=False)}]"
    if kind == "compaction":
        content = block.get("content")
        return f"[summary of the conversation before this point]\n{content}" if isinstance(content, str) else ""
    if kind.endswith("_tool_result"):
        tool = (names or {}).get(str(block.get("tool_use_id", "")), kind.removesuffix("_tool_result"))
        content = block.get("content")
        if isinstance(content, list):
            lines = [
                f"- {item.get('title') or item.get('url')} <{item.get('url')}>"
                for item in content
                if isinstance(item, Mapping) and item.get("url")
            ]
            return f"[{tool} results]\n" + "\n".join(lines) if lines else f"[{tool}: no results]"
        if isinstance(content, Mapping):
            error = content.get("error_code")
            if error:
                return f"[{tool} failed: {error}]"
            if content.get("url"):
                return f"[{tool} result] <{content.get('url')}>"
        return f"[{tool} result]"
    return ""


def _str(value: Any) -> str:
    found = wire.text(value)
    if found is None:
        raise TypeError("not a string")
    return found
