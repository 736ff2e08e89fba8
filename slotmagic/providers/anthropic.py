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
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from httpx_sse import ServerSentEvent

from ..core.messages import Message, ToolCall
from ..errors import StreamInterrupted
from .base import ChatRequest, Completion, StreamEvent, TextDelta, ToolSpec, Usage
from .transport import HTTPProvider, SSECall, parse_event_json, stream_error

API_VERSION = "2023-06-01"
# The API requires max_tokens; every Claude model can produce at least this many.
DEFAULT_MAX_TOKENS = 4096


def wire_messages(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Core messages as (the ``system`` text, Messages API messages)."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.append(m.content)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if m.role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
            if m.content:
                result["content"] = m.content
            blocks.append(result)
        elif m.content:  # the API refuses empty text blocks
            blocks.append({"type": "text", "text": m.content})
        for call in m.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _json_object(call.arguments)})
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), wire


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in tools]


def request_body(request: ChatRequest) -> dict[str, Any]:
    system, messages = wire_messages(request.messages)
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
    body.update(request.params)  # provider-specific parameters pass through as given
    body["stream"] = True
    return body


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
            self._blocks[data.get("index", len(self._blocks))] = _Block(
                block.get("type", ""), block.get("id", ""), block.get("name", ""), block.get("input")
            )
            if block.get("type") == "text" and block.get("text"):
                return self._add_text(data.get("index", 0), block["text"])
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            index = data.get("index", 0)
            if delta.get("type") == "text_delta" and delta.get("text"):
                return self._add_text(index, delta["text"])
            if delta.get("type") == "input_json_delta" and delta.get("partial_json"):
                self._blocks.setdefault(index, _Block("tool_use")).parts.append(delta["partial_json"])
            # thinking_delta, signature_delta, citations_delta: not part of the stored reply
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
        calls = tuple(
            ToolCall(b.id, b.name, "".join(b.parts) or json.dumps(b.initial_input or {}))
            for b in blocks
            if b.type == "tool_use"
        )
        u = self._usage
        cached = u.get("cache_read_input_tokens", 0)
        usage = Usage(
            # Anthropic counts cache reads and writes apart from input_tokens; ours is the total.
            input_tokens=u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + cached,
            output_tokens=u.get("output_tokens", 0),
            cached_tokens=cached,
        )
        return Completion(Message.assistant(text, calls), usage, self._stop_reason, self._model)


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
