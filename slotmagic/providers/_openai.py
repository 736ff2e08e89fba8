"""OpenAI-compatible chat completions: OpenAI itself, and with another base URL Ollama, vLLM,
llama.cpp's server, LM Studio, OpenRouter and the like.

Request: ``POST {base}/chat/completions`` with ``stream: true`` and
``stream_options: {"include_usage": true}``, so the last chunk before ``data: [DONE]`` carries
the token counts. Tool calls arrive as ``delta.tool_calls`` fragments keyed by ``index``: the
first fragment has the call's ``id`` and ``function.name``, later ones add pieces of
``function.arguments`` (a JSON text). A reply is complete only once ``[DONE]`` arrives. A chunk
of a shape the API does not send is a :class:`~slotmagic._errors.MalformedReply`, never a raw
exception.

**The wire rules**, kept by construction in :func:`request_body` and checked once more by
:func:`violations` before anything is sent (a request that would still break one is refused in
one line). Sources: the Chat Completions reference
https://platform.openai.com/docs/api-reference/chat/create, function calling
https://platform.openai.com/docs/guides/function-calling, reasoning models
https://platform.openai.com/docs/guides/reasoning, and the API's own 400 messages:

- every assistant tool call answered by a ``tool`` message right after its message, and no
  ``tool`` message without its call before it ("messages with role 'tool' must be a response to
  a preceeding message with 'tool_calls'"): :func:`~slotmagic._core.repair.repair_tool_pairs`;
- every call id once in the request, at most 40 characters (OpenAI, Azure):
  :func:`~slotmagic._core.repair.wire_call_id`;
- ``function.arguments`` the JSON text of an object, on every path (Ollama answers anything
  else with 400 "invalid tool call arguments"): :func:`~slotmagic.providers._wire.json_arguments`;
- no empty or whitespace-only message (an assistant message with calls sends ``content: null``);
- ``tools`` present whenever the history holds tool calls: a turn without tools sends the
  history's tools as bare definitions with ``tool_choice: "none"``
  (:func:`~slotmagic.providers._wire.bare_tools`);
- reasoning models (o1, o3, o4, gpt-5 and their variants, or what the
  ``openai_reasoning_models`` setting names), decided by the model's name since Azure and
  proxies serve them too, get the system prompt as a ``developer`` message and
  ``max_completion_tokens``; a temperature goes only when the turn sets one (GPT-5.1 with its
  default ``reasoning_effort: "none"`` takes it, the others answer a 400 naming it). Ollama is
  never treated as OpenAI's reasoning models, whatever a model is named there: it gets
  ``system`` and ``max_tokens``, which its templates know.

Another provider's reasoning (Anthropic's thinking and kept blocks) is left out.

The fixes that change what is counted (tool pairs, blank messages, the bare tool definitions)
are steps of the view pipeline too (``_engine/steps/``), so a preview and the budget hold what is
sent; here they are the safety net for requests made without it, and change nothing on a view.
What stays here alone changes no counted content: call ids mapped, a system prompt sent as a
``developer`` message, ``max_tokens`` under the name a server takes, another provider's
reasoning left out (it is not counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from httpx_sse import ServerSentEvent

from .._core.images import Image
from .._core.messages import Message, ToolCall
from .._core.repair import OPENAI_MAX_ID, repair_tool_pairs, wire_call_id
from .._core.request import ChatRequest, ToolSpec
from .._core.usage import Usage
from .._errors import MalformedReply, StreamInterrupted
from . import _wire as wire
from ._base import Completion, StreamEvent, TextDelta
from ._endpoint import Endpoint
from ._model_names import DEFAULT_OPENAI_REASONING_MODELS, matches_model, model_patterns
from ._registry import DEFAULT_OPENAI_BASE_URL
from ._responses import ResponsesAssembler, responses_body, responses_only
from ._sse import parse_event_json, stream_error
from ._structured import response_format
from ._transport import HTTPProvider, SSECall
from ._wire import bare_tools, json_arguments, refuse

REASONING_SETTING = "openai_reasoning_models"
RESPONSES_SETTING = "openai_responses_models"


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
                    "content": m.content if m.content.strip() else None,  # null, not "", beside tool calls
                    "tool_calls": [
                        {
                            "id": wire_call_id(c.id, OPENAI_MAX_ID),
                            "type": "function",
                            "function": {"name": c.name, "arguments": json_arguments(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif not m.content.strip() and not m.images:
            continue  # an empty message says nothing, and some servers refuse it
        elif m.role == "system" and developer:
            wire.append({"role": "developer", "content": m.content})
        elif m.images:
            wire.append({"role": m.role, "content": content_parts(m)})
        else:
            wire.append({"role": m.role, "content": m.content})  # thinking from another API is left out
    return wire


def content_parts(m: Message) -> list[dict[str, Any]]:
    """Structured content as ``text`` and ``image_url`` parts, an image as a base64 data URL
    (https://platform.openai.com/docs/guides/images-vision; Ollama's /v1 takes the same, base64
    only: https://github.com/ollama/ollama/blob/main/docs/openai.md)."""
    out: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, Image):
            out.append({"type": "image_url", "image_url": {"url": part.data_url()}})
        elif part.text.strip():
            out.append({"type": "text", "text": part.text})
    return out


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


def request_body(
    request: ChatRequest,
    endpoint: Endpoint,
    *,
    reasoning: bool | None = None,
    label: str = "openai",
    strict: bool = True,
) -> dict[str, Any]:
    """The request body, every wire rule kept; ``reasoning`` None decides by the model's name
    with the default patterns. :class:`~slotmagic._errors.RequestRefused` when it would still
    break a rule."""
    if reasoning is None:
        reasoning = is_reasoning_model(request.model)
    messages = wire_messages(request.messages, developer=reasoning)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = wire_tools(request.tools)
    elif any(m.get("tool_calls") for m in messages):  # what _engine/steps/bare_tools.py counted for a view
        body["tools"] = wire_tools(bare_tools(request.messages))
        body["tool_choice"] = "none"
    if request.temperature is not None:  # only when set: some reasoning models take one, some do not
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        # OpenAI's newer models refuse the older name, wherever they are served; other
        # compatible servers mostly know only the older one.
        official = endpoint.base_url == DEFAULT_OPENAI_BASE_URL
        body["max_completion_tokens" if official or reasoning else "max_tokens"] = request.max_tokens
    if request.schema is not None:  # structured output (providers/_structured.py); strict but on Ollama
        body["response_format"] = response_format(request.schema, strict=strict)
    body.update(request.params)  # provider-specific parameters pass through as given
    body["stream"] = True  # not overridable: everything here reads a stream
    refuse(label, violations(body))
    return body


def violations(body: Mapping[str, Any]) -> list[str]:
    """The wire rules (module docstring) ``body`` breaks, each in a few words; [] when none."""
    found: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["the request holds no message"]
    seen: set[str] = set()
    open_calls: list[str] = []
    for n, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                found.append(f"message {n}: a tool result whose call is not just before it")
            else:
                open_calls.remove(m.get("tool_call_id"))
            continue
        if open_calls:
            found.append(f"message {n}: calls {open_calls} have no result before it")
            open_calls = []
        content = m.get("content")
        calls = m.get("tool_calls") or []
        if not calls and not _has_content(content):
            found.append(f"message {n} is empty")
        for c in calls:
            call_id = c.get("id")
            if not isinstance(call_id, str) or not call_id or len(call_id) > OPENAI_MAX_ID or call_id in seen:
                found.append(f"call id {call_id!r} is used twice, empty or longer than {OPENAI_MAX_ID}")
            seen.add(call_id)
            open_calls.append(call_id)
            arguments = (c.get("function") or {}).get("arguments")
            if not isinstance(arguments, str) or json_arguments(arguments) != arguments:
                found.append(f"call {call_id!r}: arguments are not the JSON text of an object")
    if open_calls:
        found.append(f"calls {open_calls} have no result")
    if seen and not body.get("tools"):
        found.append("tool calls are sent without tools")
    return found


def _has_content(content: object) -> bool:
    """Non-blank text, or parts of which each is a text or an image (and one at least)."""
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list) or not content:
        return False
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and not str(part.get("text", "")).strip():
            return False
        if kind == "image_url" and not str((part.get("image_url") or {}).get("url", "")).startswith("data:image/"):
            return False
        if kind not in ("text", "image_url"):
            return False
    return True


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAssembler:
    """Builds one reply from ``chat.completion.chunk`` events. A chunk of a shape the API does
    not send (a field of the wrong type, counts that are not whole numbers, JSON nested past
    Python's limit) is a :class:`MalformedReply`, never a raw exception."""

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
        try:
            return self._feed(chunk)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError):
            raise MalformedReply(
                f"{self.label}: a chunk of the reply has a shape the chat completions API does not send; "
                f"the partial reply was discarded"
            ) from None

    def _feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        model = chunk.get("model")
        self._model = wire.text(model) or self._model
        usage = chunk.get("usage")
        if usage is not None:  # the usage chunk (choices: []), or Ollama's last chunk
            self._usage = _usage(wire.mapping(usage))
        out: list[StreamEvent] = []
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise TypeError("choices is not a list")
        for choice in choices or ():
            choice = wire.mapping(choice)
            if wire.index(choice.get("index", 0)) != 0:
                continue  # n > 1 is not supported: only the first choice is kept
            delta = wire.mapping(choice.get("delta"))
            for key in ("content", "refusal"):
                text = wire.text(delta.get(key))
                if text:
                    self._text.append(text)
                    out.append(TextDelta(text))
            fragments = delta.get("tool_calls")
            if fragments is not None and not isinstance(fragments, list):
                raise TypeError("tool_calls is not a list")
            for position, fragment in enumerate(fragments or ()):
                self._add_call_fragment(position, wire.mapping(fragment))
            reason = wire.text(choice.get("finish_reason"))
            if reason:
                self._finish_reason = reason
        return out

    def _add_call_fragment(self, position: int, fragment: Mapping[str, Any]) -> None:
        index = wire.index(fragment.get("index", position))  # a few servers leave out the index
        call = self._calls.setdefault(index, _PartialCall())
        function = wire.mapping(fragment.get("function"))
        # Some servers repeat id and name in every fragment: keep the first, add only arguments.
        call.id = call.id or wire.text(fragment.get("id")) or ""
        call.name = call.name or wire.text(function.get("name")) or ""
        arguments = wire.text(function.get("arguments"))
        if arguments:
            call.arguments.append(arguments)

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


def _usage(raw: Mapping[str, Any]) -> Usage:
    details = wire.mapping(raw.get("prompt_tokens_details"))
    return Usage(
        input_tokens=wire.count(raw.get("prompt_tokens")),
        output_tokens=wire.count(raw.get("completion_tokens")),
        cached_tokens=wire.count(details.get("cached_tokens")),
    )


class OpenAIProvider(HTTPProvider):
    """``openai:MODEL``, or ``ollama:MODEL`` with ``name="ollama"`` (Ollama's /v1 endpoint)."""

    name = "openai"

    def call(self, request: ChatRequest) -> SSECall:
        endpoint = self.endpoint()
        headers = {"authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        label = f"{self.name} ({endpoint.host})"
        reasoning = self.reasoning(request.model)
        if self.responses(request.model):  # providers/_responses.py
            return SSECall(endpoint, "/responses", responses_body(request, reasoning=reasoning), headers)
        body = request_body(request, endpoint, reasoning=reasoning, label=label, strict=self.name != "ollama")
        return SSECall(endpoint, "/chat/completions", body, headers)

    def reasoning(self, model: str) -> bool:
        """Whether ``model`` is a reasoning model, by the ``openai_reasoning_models`` setting
        (or its environment variable) now, else by the default patterns. Never on Ollama:
        its models are not OpenAI's, whatever they are named there."""
        if self.name == "ollama":
            return False
        found = self.registry.value(self.settings, REASONING_SETTING)
        return is_reasoning_model(model, *found) if found else is_reasoning_model(model)

    def responses(self, model: str) -> bool:
        """Whether ``model`` goes to the Responses API: the ``openai_responses_models`` setting
        (or its environment variable) when set, else whether only that API serves it. Never on Ollama."""
        if self.name == "ollama":
            return False
        found = self.registry.value(self.settings, RESPONSES_SETTING)
        return matches_model(model, model_patterns(*found)) if found else responses_only(model)

    def assembler(self, call: SSECall) -> ChunkAssembler | ResponsesAssembler:
        if call.path.split("?", 1)[0].endswith("/responses"):
            return ResponsesAssembler(call.label, call.endpoint.secrets)
        return ChunkAssembler(call.label, call.endpoint.secrets)
