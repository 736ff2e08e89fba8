"""OpenAI's Responses API (``POST /v1/responses``) as a wire of the ``openai`` provider.

Chosen for the models only it serves (:data:`~._responses_models.RESPONSES_ONLY`, from the
official SDK's model list: ``o3-pro``, ``gpt-5-pro``, the deep-research models …) or for any
model the ``openai_responses_models`` setting names (``OPENAI_RESPONSES_MODELS``: patterns, or
``*`` for all). slotmagic keeps the history, so every request is ``store: false`` and carries the
whole conversation as input items:

- system messages as ``developer`` (reasoning models) or ``system`` messages, user messages with
  ``input_text`` and ``input_image`` parts (images as base64 data URLs), assistant text as
  ``assistant`` messages;
- a tool call as a ``function_call`` item and its result as ``function_call_output``;
- a reasoning model's ``reasoning`` items, kept with the turn as
  :class:`~slotmagic._core.messages.Thinking` (provider ``openai-responses``, the item's JSON in
  ``data``, its summary in ``text``) and sent back in front of the assistant message that made
  them, with their ``encrypted_content`` (``include: ["reasoning.encrypted_content"]``), as
  the API requires of a conversation that is not stored.

The stream is read from its documented events: ``response.output_text.delta`` (and
``refusal.delta``) for text, ``response.output_item.done`` for whole function calls and
reasoning items, ``response.completed`` / ``response.incomplete`` for usage and the end,
``response.failed`` and ``error`` for failures.
Docs: https://platform.openai.com/docs/api-reference/responses-streaming
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from httpx_sse import ServerSentEvent

from .._core.images import Image
from .._core.messages import Message, Thinking, ToolCall
from .._core.request import ChatRequest, ToolSpec
from .._core.usage import Usage
from .._errors import MalformedReply, StreamInterrupted
from . import _wire as wire
from ._base import Completion, StreamEvent, TextDelta
from ._responses_models import RESPONSES_ONLY
from ._sse import parse_event_json, stream_error
from ._wire import bare_tools

__all__ = ["RESPONSES", "ResponsesAssembler", "responses_body", "responses_only"]

RESPONSES = "openai-responses"  # Thinking.provider of the reasoning items this wire keeps
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def responses_only(model: str) -> bool:
    """Whether only the Responses API serves ``model`` (its last ``/`` part, any case)."""
    return model.strip().lower().rsplit("/", 1)[-1] in RESPONSES_ONLY


def responses_body(request: ChatRequest, *, reasoning: bool) -> dict[str, Any]:
    """The request body for ``POST /responses``."""
    body: dict[str, Any] = {"model": request.model, "input": input_items(request.messages, developer=reasoning)}
    if request.tools:
        body["tools"] = function_tools(request.tools)
    elif any(m.tool_calls for m in request.messages):  # history with calls, none offered now
        body["tools"] = function_tools(bare_tools(request.messages))
        body["tool_choice"] = "none"
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.schema is not None:
        fmt: dict[str, Any] = {"type": "json_schema", "name": request.schema.name, "schema": request.schema.strict()}
        if request.schema.description:
            fmt["description"] = request.schema.description
        body["text"] = {"format": {**fmt, "strict": True}}
    body["store"] = False  # slotmagic keeps the history; params may say otherwise
    if reasoning:
        body["include"] = ["reasoning.encrypted_content"]  # what a conversation not stored must send back
    body.update(request.params)
    body["stream"] = True
    return body


def function_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        made: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            made["description"] = tool.description
        made["parameters"] = dict(tool.parameters)
        made["strict"] = False  # a hand-written or server's schema need not be strict-ready
        out.append(made)
    return out


def input_items(messages: Sequence[Message], *, developer: bool) -> list[dict[str, Any]]:
    """The conversation as Responses input items (see the module docstring)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if m.content.strip():
                items.append({"role": "developer" if developer else "system", "content": m.content})
        elif m.role == "user":
            items.append(
                {"role": "user", "content": _user_parts(m)} if m.images else {"role": "user", "content": m.content}
            )
        elif m.role == "assistant":
            items.extend(_assistant_items(m))
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
    return items


def _user_parts(m: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, Image):
            parts.append({"type": "input_image", "image_url": part.data_url(), "detail": "auto"})
        elif part.text.strip():
            parts.append({"type": "input_text", "text": part.text})
    return parts


def _assistant_items(m: Message) -> list[dict[str, Any]]:
    """Its reasoning items (this wire's own, whole), its text, then its calls, in reply order."""
    kept = [t for t in m.thinking if t.provider == RESPONSES and t.data]
    items: list[dict[str, Any]] = []
    for thinking in (t for t in kept if t.after_calls == 0):
        items.append(json.loads(thinking.data or "{}"))
    if m.content.strip():
        items.append({"role": "assistant", "content": m.content})
    for n, call in enumerate(m.tool_calls, 1):
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments})
        items.extend(json.loads(t.data or "{}") for t in kept if t.after_calls == n)
    return items


class ResponsesAssembler:
    """Builds one reply from a Responses stream. An event of a shape the API does not send is a
    :class:`MalformedReply`, never a raw exception."""

    def __init__(self, label: str, secrets: tuple[str, ...] = ()) -> None:
        self.label = label
        self.secrets = secrets
        self.done = False
        self._text: list[str] = []
        self._calls: list[ToolCall] = []
        self._thinking: list[Thinking] = []
        self._usage = Usage()
        self._finish: str | None = None
        self._model: str | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        data = parse_event_json(self.label, event)
        if not isinstance(data, dict):
            return []
        kind = data.get("type")
        if kind == "error":
            raise stream_error(self.label, data, self.secrets)
        if kind == "response.failed":
            error = wire.mapping(wire.mapping(data.get("response")).get("error"))
            raise stream_error(self.label, {"type": error.get("code"), "message": error.get("message")}, self.secrets)
        try:
            return self._feed(str(kind), data)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError):
            raise MalformedReply(
                f"{self.label}: an event of the reply has a shape the Responses API does not send; "
                "the partial reply was discarded"
            ) from None

    def _feed(self, kind: str, data: Mapping[str, Any]) -> list[StreamEvent]:
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            text = wire.text(data.get("delta"))
            if text:
                self._text.append(text)
                return [TextDelta(text)]
        elif kind == "response.output_item.done":
            self._item(wire.mapping(data.get("item")))
        elif kind in ("response.completed", "response.incomplete"):
            response = wire.mapping(data.get("response"))
            self._model = wire.text(response.get("model")) or self._model
            self._usage = _usage(wire.mapping(response.get("usage")))
            reason = wire.text(wire.mapping(response.get("incomplete_details")).get("reason"))
            self._finish = _FINISH.get(reason or "", reason) if kind == "response.incomplete" else None
            self.done = True
        return []

    def _item(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if kind == "function_call":
            call_id = wire.text(item.get("call_id")) or wire.text(item.get("id")) or ""
            name = wire.text(item.get("name")) or ""
            self._calls.append(ToolCall(call_id, name, wire.text(item.get("arguments")) or "{}"))
        elif kind == "reasoning":
            summary = [wire.text(wire.mapping(s).get("text")) or "" for s in item.get("summary") or ()]
            kept = {k: v for k, v in item.items() if k != "status"}  # sent back as it came, less its status
            text = "\n\n".join(s for s in summary if s)
            self._thinking.append(
                Thinking("thinking", text, data=json.dumps(kept), provider=RESPONSES, after_calls=len(self._calls))
            )

    def finish(self) -> Completion:
        if not self.done:
            raise StreamInterrupted(
                f"{self.label}: the reply stream ended without its response.completed event; the partial reply "
                "was discarded"
            )
        finish = self._finish or ("tool_calls" if self._calls else "stop")
        message = Message.assistant("".join(self._text), self._calls, self._thinking)
        return Completion(message, self._usage, finish, self._model)


def _usage(raw: Mapping[str, Any]) -> Usage:
    details = wire.mapping(raw.get("input_tokens_details"))
    return Usage(
        input_tokens=wire.count(raw.get("input_tokens")),
        output_tokens=wire.count(raw.get("output_tokens")),
        cached_tokens=wire.count(details.get("cached_tokens")),
    )
