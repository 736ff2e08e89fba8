"""Anthropic's Messages API.

Request: ``POST {base}/v1/messages`` with ``stream: true``, the key in ``x-api-key`` and an
``anthropic-version`` header. The wire format differs from chat completions: system messages
go to the top-level ``system`` field; an assistant's tool calls are ``tool_use`` content blocks
(``input`` is a JSON object); tool results are ``tool_result`` blocks inside a *user* message,
and consecutive messages of one role are merged into one, as the API wants roles to alternate.

The stream: ``message_start`` (input token counts), per content block ``content_block_start``,
``content_block_delta`` (``text_delta`` text or ``input_json_delta`` pieces of a tool call's
input JSON) and ``content_block_stop``, then ``message_delta`` (stop reason, output token
count) and ``message_stop``, which alone makes the reply complete. ``ping`` events come any
time; an ``error`` event (e.g. ``overloaded_error``) ends the reply as a failure.

Extended thinking (``params={"thinking": {"type": "enabled", "budget_tokens": N}}``): a reply
opens with ``thinking`` blocks (``thinking_delta`` text, then one ``signature_delta``) or
``redacted_thinking`` blocks (their opaque ``data`` whole in ``content_block_start``). They are
kept on the assistant message (:class:`~slotmagic.core.messages.Thinking`), not in its text,
and sent back unchanged and first in that message's content: with tools the API refuses an
assistant message that lost them ("Expected thinking or redacted_thinking, but found
tool_use"). More rules of the API are kept: an assistant message may not end with a
thinking block; without thinking enabled the final message, when it is the assistant's, may
not hold any; with thinking enabled, a request that ends with tool results for calls another
provider made (so without thinking) has that last round told as text instead.

Every request goes through :func:`~slotmagic.core.repair.repair_tool_pairs` (no tool call
without its result) and its call ids through :func:`~slotmagic.core.repair.wire_call_id`
(``^[a-zA-Z0-9_-]+$``), so a conversation begun with another provider is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from httpx_sse import ServerSentEvent

from ..core.messages import Message, Thinking, ToolCall
from ..core.repair import ANTHROPIC_MAX_ID, repair_tool_pairs, wire_call_id
from ..errors import StreamInterrupted
from .base import ChatRequest, Completion, StreamEvent, TextDelta, ToolSpec, Usage
from .transport import HTTPProvider, SSECall, parse_event_json, stream_error

API_VERSION = "2023-06-01"
# The API requires max_tokens; every Claude model can produce at least this many.
DEFAULT_MAX_TOKENS = 4096


def wire_messages(messages: Sequence[Message], *, thinking: bool = False) -> tuple[str | None, list[dict[str, Any]]]:
    """Core messages as (the ``system`` text, Messages API messages). ``thinking``: whether
    the request enables extended thinking."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for m in repair_tool_pairs(messages):
        if m.role == "system":
            system.append(m.content)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if m.role == "tool":
            blocks = [_tool_result(m)]
        elif m.role == "assistant":
            blocks = _assistant_blocks(m)
        else:
            blocks = [{"type": "text", "text": m.content}] if m.content else []  # the API refuses empty text
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if wire and wire[-1]["role"] == "assistant" and not thinking:
        # "When thinking is disabled, an assistant message in the final position cannot contain thinking"
        wire[-1]["content"] = [b for b in wire[-1]["content"] if b["type"] not in _THINKING]
        if not wire[-1]["content"]:
            wire.pop()
    if thinking and len(wire) > 1 and _unsigned_tool_round(wire[-2], wire[-1]):
        _round_as_text(wire[-2], wire[-1])
    return ("\n\n".join(system) if system else None), wire


_THINKING = ("thinking", "redacted_thinking")


def _unsigned_tool_round(assistant: dict[str, Any], user: dict[str, Any]) -> bool:
    """Whether the request ends with tool results for calls another provider made (no
    thinking before them, ids not Anthropic's ``toolu_``): with thinking on the API refuses
    that ("a final assistant message must start with a thinking block"). Claude's own calls
    are left alone even without thinking (adaptive thinking may skip it)."""
    blocks = assistant["content"]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    return (
        assistant["role"] == "assistant"
        and bool(uses)
        and blocks[0]["type"] not in _THINKING
        and not any(b["id"].startswith("toolu_") for b in uses)
        and any(b["type"] == "tool_result" for b in user["content"])
    )


def _round_as_text(assistant: dict[str, Any], user: dict[str, Any]) -> None:
    """That last tool round told as text, which the API takes without thinking."""
    names: dict[str, str] = {}
    told: list[dict[str, Any]] = []
    for b in assistant["content"]:
        if b["type"] == "tool_use":
            names[b["id"]] = b["name"]
            b = {"type": "text", "text": f"[tool call {b['name']}({json.dumps(b['input'], ensure_ascii=False)})]"}
        told.append(b)
    assistant["content"] = told
    answers: list[dict[str, Any]] = []
    for b in user["content"]:
        if b["type"] == "tool_result":
            kind = "tool error" if b.get("is_error") else "tool result"
            b = {"type": "text", "text": f"[{kind} {names.get(b['tool_use_id'], 'unknown')}: {b.get('content', '')}]"}
        answers.append(b)
    user["content"] = answers


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    """An assistant message's blocks: its thinking first (and any that came between its tool
    calls, where it came), then its text, then its tool calls."""
    thinking = [t for t in m.thinking if t.provider == "anthropic"]  # another API's reasoning: left out
    blocks = [_thinking_block(t) for t in thinking if t.after_calls <= 0]
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    for k, call in enumerate(m.tool_calls, 1):
        blocks.append(
            {
                "type": "tool_use",
                "id": wire_call_id(call.id, ANTHROPIC_MAX_ID),
                "name": call.name,
                "input": _json_object(call.arguments),
            }
        )
        blocks += [_thinking_block(t) for t in thinking if t.after_calls == k]
    blocks += [_thinking_block(t) for t in thinking if t.after_calls > len(m.tool_calls)]
    while blocks and blocks[-1]["type"] in _THINKING:
        blocks.pop()  # "The final block in an assistant message cannot be thinking" (a reply cut short)
    return blocks


def _thinking_block(t: Thinking) -> dict[str, Any]:
    if t.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": t.data or ""}
    block: dict[str, Any] = {"type": "thinking", "thinking": t.text}
    if t.signature is not None:
        block["signature"] = t.signature
    return block


def _tool_result(m: Message) -> dict[str, Any]:
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": wire_call_id(m.tool_call_id or "", ANTHROPIC_MAX_ID),
    }
    if m.content:
        result["content"] = m.content
    if m.is_error:
        result["is_error"] = True
    return result


def thinking_enabled(params: Mapping[str, Any]) -> bool:
    """Whether a request's ``params`` turn extended thinking on (``enabled``, ``adaptive``)."""
    config = params.get("thinking")
    return isinstance(config, Mapping) and config.get("type") not in (None, "disabled")


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {"name": t.name}
        if t.description:
            tool["description"] = t.description
        tool["input_schema"] = dict(t.parameters)
        wire.append(tool)
    return wire


def request_body(request: ChatRequest) -> dict[str, Any]:
    system, messages = wire_messages(request.messages, thinking=thinking_enabled(request.params))
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    if system is not None:
        body["system"] = system
    if request.tools:
        body["tools"] = wire_tools(request.tools)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.prompt_cache:
        cache_breakpoints(body)
    body.update(request.params)  # provider-specific parameters pass through as given
    body["stream"] = True
    return body


_EPHEMERAL = {"type": "ephemeral"}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark the prefix Anthropic may cache (it caches up to each block marked, at most four):
    the tool definitions, the system side, and the conversation through its last message, so
    the next turn, whose request starts with the same bytes, reads all of it from the cache
    (Anthropic finds an earlier breakpoint's entry by itself)."""
    if body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": _EPHEMERAL}
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": _EPHEMERAL}]
    messages = body["messages"]
    if messages:
        blocks = messages[-1]["content"]
        for index in range(len(blocks) - 1, -1, -1):
            if blocks[index].get("type") not in _UNMARKABLE:
                blocks[index] = {**blocks[index], "cache_control": _EPHEMERAL}
                break


def _json_object(text: str) -> dict[str, Any]:
    # A call made by another provider may carry arguments that are not a JSON object; the
    # API accepts only objects, and an empty one keeps the conversation sendable.
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    initial_input: Any = None
    parts: list[str] = field(default_factory=list)
    signature: str | None = None  # a thinking block's
    data: str | None = None  # a redacted_thinking block's


class EventAssembler:
    """Builds one reply from Messages API stream events."""

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
        kind = data.get("type") or event.event
        if kind == "error":
            raise stream_error(self.label, data.get("error"), self.secrets)
        if kind == "message_start":
            message = data.get("message") or {}
            self._model = message.get("model")
            self._add_usage(message.get("usage"))
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            started = _Block(block.get("type", ""), block.get("id", ""), block.get("name", ""), block.get("input"))
            self._blocks[data.get("index", len(self._blocks))] = started
            if started.type == "thinking":
                started.signature = block.get("signature") or None  # "" until its signature_delta
                if block.get("thinking"):
                    started.parts.append(block["thinking"])
            elif started.type == "redacted_thinking":
                started.data = block.get("data")
            elif started.type == "text" and block.get("text"):
                return self._add_text(data.get("index", 0), block["text"])
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            index = data.get("index", 0)
            delta_type = delta.get("type")
            if delta_type == "text_delta" and delta.get("text"):
                return self._add_text(index, delta["text"])
            if delta_type == "input_json_delta" and delta.get("partial_json"):
                self._blocks.setdefault(index, _Block("tool_use")).parts.append(delta["partial_json"])
            elif delta_type == "thinking_delta" and delta.get("thinking"):
                self._blocks.setdefault(index, _Block("thinking")).parts.append(delta["thinking"])
            elif delta_type == "signature_delta" and isinstance(delta.get("signature"), str):
                # one per block in practice; like Anthropic's SDK, the last one is the signature
                self._blocks.setdefault(index, _Block("thinking")).signature = delta["signature"]
            # citations_delta and delta types added later: not part of the stored reply
        elif kind == "message_delta":
            self._stop_reason = (data.get("delta") or {}).get("stop_reason") or self._stop_reason
            self._add_usage(data.get("usage"))  # cumulative counts: later values replace earlier ones
        elif kind == "message_stop":
            self.done = True
        # ping, content_block_stop and event types added later need nothing
        return []

    def _add_text(self, index: int, text: str) -> list[StreamEvent]:
        self._blocks.setdefault(index, _Block("text")).parts.append(text)
        return [TextDelta(text)]

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def finish(self) -> Completion:
        if not self.done:
            raise StreamInterrupted(
                f"{self.label}: the reply stream ended without its final message_stop event; "
                f"the partial reply was discarded"
            )
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        text = "".join("".join(b.parts) for b in blocks if b.type == "text")
        calls: list[ToolCall] = []
        thinking: list[Thinking] = []
        for b in blocks:
            if b.type == "tool_use":
                arguments = "".join(b.parts) or json.dumps(b.initial_input or {})
                calls.append(ToolCall(b.id or f"toolu_{len(calls) + 1}", b.name, arguments))
            elif b.type == "thinking":
                thinking.append(Thinking("thinking", "".join(b.parts), b.signature, after_calls=len(calls)))
            elif b.type == "redacted_thinking":
                thinking.append(Thinking("redacted_thinking", data=b.data or "", after_calls=len(calls)))
        u = self._usage
        cached = u.get("cache_read_input_tokens", 0)
        usage = Usage(
            # Anthropic counts cache reads and writes apart from input_tokens; ours is the total.
            input_tokens=u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + cached,
            output_tokens=u.get("output_tokens", 0),
            cached_tokens=cached,
        )
        return Completion(Message.assistant(text, calls, thinking), usage, self._stop_reason, self._model)


class AnthropicProvider(HTTPProvider):
    """``anthropic:MODEL``."""

    name = "anthropic"

    def call(self, request: ChatRequest) -> SSECall:
        endpoint = self.endpoint()
        headers = {"anthropic-version": API_VERSION}
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
        return SSECall(endpoint, "/v1/messages", request_body(request), headers)

    def assembler(self, call: SSECall) -> EventAssembler:
        return EventAssembler(call.label, call.endpoint.secrets)
