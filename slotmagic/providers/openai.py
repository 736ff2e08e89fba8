"""OpenAI-compatible chat completions: OpenAI itself, and with another base URL Ollama, vLLM,
llama.cpp's server, LM Studio, OpenRouter and the like.

Request: ``POST {base}/chat/completions`` with ``stream: true`` and
``stream_options: {"include_usage": true}``, so the last chunk before ``data: [DONE]`` carries
the token counts. Tool calls arrive as ``delta.tool_calls`` fragments keyed by ``index``: the
first fragment has the call's ``id`` and ``function.name``, later ones add pieces of
``function.arguments`` (a JSON text). A reply is complete only once ``[DONE]`` arrives.

Every request goes through :func:`~slotmagic.core.repair.repair_tool_pairs` (no tool call
without its ``tool`` messages) and its call ids through
:func:`~slotmagic.core.repair.wire_call_id` (at most 40 characters, as OpenAI and Azure
require); another provider's reasoning (Anthropic's thinking blocks) is left out.

Reasoning models (o1, o3, o4, gpt-5 and their variants, or what the
``openai_reasoning_models`` setting names) are decided by the model's name, not by the base
URL, since Azure and proxies serve them too: they get the system prompt as a ``developer``
message and ``max_completion_tokens``. A temperature is sent only when the turn sets one (they
accept no other value than the default, and say so in a 400).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from httpx_sse import ServerSentEvent

from ..core.messages import Message, ToolCall
from ..core.repair import OPENAI_MAX_ID, repair_tool_pairs, wire_call_id
from ..errors import StreamInterrupted
from .base import ChatRequest, Completion, StreamEvent, TextDelta, ToolSpec, Usage
from .endpoint import Endpoint
from .registry import DEFAULT_OPENAI_BASE_URL, DEFAULT_OPENAI_REASONING_MODELS, matches_model, model_patterns
from .transport import HTTPProvider, SSECall, parse_event_json, stream_error

REASONING_SETTING = "openai_reasoning_models"


def wire_messages(messages: Sequence[Message], *, developer: bool = False) -> list[dict[str, Any]]:
    """Core messages as chat-completions messages; ``developer``: system messages go as
    ``developer`` messages (reasoning models)."""
    wire: list[dict[str, Any]] = []
    for m in repair_tool_pairs(messages):
        if m.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": wire_call_id(m.tool_call_id or "", OPENAI_MAX_ID),
                    "content": m.content,
                }
            )
        elif m.role == "assistant" and m.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": m.content or None,  # the API wants null, not "", beside tool calls
                    "tool_calls": [
                        {
                            "id": wire_call_id(c.id, OPENAI_MAX_ID),
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments or "{}"},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.role == "system" and developer:
            wire.append({"role": "developer", "content": m.content})
        else:
            wire.append({"role": m.role, "content": m.content})  # thinking from another API is left out
    return wire


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for t in tools:
        function: dict[str, Any] = {"name": t.name}
        if t.description:
            function["description"] = t.description
        function["parameters"] = dict(t.parameters)
        wire.append({"type": "function", "function": function})
    return wire


def is_reasoning_model(model: str, patterns: str | None = None, source: str = REASONING_SETTING) -> bool:
    """Whether ``model`` is a reasoning model: its name matches one of ``patterns`` (the
    ``openai_reasoning_models`` setting: comma-separated, ``*`` wildcards, ``none``), by
    default o1*, o3*, o4* and gpt-5*."""
    return matches_model(model, model_patterns(patterns or DEFAULT_OPENAI_REASONING_MODELS, source))


def request_body(request: ChatRequest, endpoint: Endpoint, *, reasoning: bool | None = None) -> dict[str, Any]:
    """The request body; ``reasoning`` None decides by the model's name with the default patterns."""
    if reasoning is None:
        reasoning = is_reasoning_model(request.model)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": wire_messages(request.messages, developer=reasoning),
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = wire_tools(request.tools)
    if request.temperature is not None:  # only when set: reasoning models refuse all but their default
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        # OpenAI's newer models refuse the older name, wherever they are served; other
        # compatible servers mostly know only the older one.
        official = endpoint.base_url == DEFAULT_OPENAI_BASE_URL
        body["max_completion_tokens" if official or reasoning else "max_tokens"] = request.max_tokens
    body.update(request.params)  # provider-specific parameters pass through as given
    body["stream"] = True  # not overridable: everything here reads a stream
    return body


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAssembler:
    """Builds one reply from ``chat.completion.chunk`` events."""

    def __init__(self, label: str, secrets: tuple[str, ...] = ()) -> None:
        self.label = label
        self.secrets = secrets
        self.done = False
        self._text: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._usage = Usage()
        self._finish_reason: str | None = None
        self._model: str | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        if event.data.strip() == "[DONE]":
            self.done = True
            return []
        chunk = parse_event_json(self.label, event)
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:  # an error after the stream began (OpenAI, OpenRouter)
            raise stream_error(self.label, chunk["error"], self.secrets)
        self._model = chunk.get("model") or self._model
        if isinstance(chunk.get("usage"), dict):  # the usage chunk (choices: []), or Ollama's last chunk
            self._usage = _usage(chunk["usage"])
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is not supported: only the first choice is kept
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    self._text.append(text)
                    out.append(TextDelta(text))
            for position, fragment in enumerate(delta.get("tool_calls") or ()):
                self._add_call_fragment(position, fragment)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return out

    def _add_call_fragment(self, position: int, fragment: dict[str, Any]) -> None:
        index = fragment.get("index", position)  # a few servers leave out the index
        call = self._calls.setdefault(index, _PartialCall())
        function = fragment.get("function") or {}
        # Some servers repeat id and name in every fragment: keep the first, add only arguments.
        call.id = call.id or fragment.get("id") or ""
        call.name = call.name or function.get("name") or ""
        if function.get("arguments"):
            call.arguments.append(function["arguments"])

    def finish(self) -> Completion:
        if not self.done:
            raise StreamInterrupted(
                f"{self.label}: the reply stream ended without its final [DONE] event; the partial reply was discarded"
            )
        calls = tuple(
            ToolCall(c.id or f"call_{i}", c.name, "".join(c.arguments) or "{}") for i, c in sorted(self._calls.items())
        )
        message = Message.assistant("".join(self._text), calls)
        return Completion(message, self._usage, self._finish_reason, self._model)


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
    )


class OpenAIProvider(HTTPProvider):
    """``openai:MODEL``, or ``ollama:MODEL`` with ``name="ollama"`` (Ollama's /v1 endpoint)."""

    name = "openai"

    def call(self, request: ChatRequest) -> SSECall:
        endpoint = self.endpoint()
        headers = {"authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        body = request_body(request, endpoint, reasoning=self.reasoning(request.model))
        return SSECall(endpoint, "/chat/completions", body, headers)

    def reasoning(self, model: str) -> bool:
        """Whether ``model`` is a reasoning model, by the ``openai_reasoning_models`` setting
        (or its environment variable) now, else by the default patterns."""
        found = self.registry.value(self.settings, REASONING_SETTING)
        return is_reasoning_model(model, *found) if found else is_reasoning_model(model)

    def assembler(self, call: SSECall) -> ChunkAssembler:
        return ChunkAssembler(call.label, call.endpoint.secrets)
