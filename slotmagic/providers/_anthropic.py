"""Anthropic's Messages API.

Request: ``POST {base}/v1/messages`` with ``stream: true``, the key in ``x-api-key`` and an
``anthropic-version`` header. The wire format differs from chat completions: system messages
go to the top-level ``system`` field; an assistant's tool calls are ``tool_use`` content blocks
(``input`` is a JSON object); tool results are ``tool_result`` blocks inside a *user* message,
and consecutive messages of one role are merged into one, as the API wants roles to alternate.
The reply's event stream is read by :mod:`._anthropic_stream` (:class:`EventAssembler`).

**The wire rules**, kept by construction in :func:`request_body` and checked once more by
:func:`violations` before anything is sent (a request that would still break one is refused
in one line, :class:`~slotmagic._errors.RequestRefused`). Sources: the Messages API reference
https://docs.anthropic.com/en/api/messages, tool use
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use, extended
thinking https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking, and the API's
own 400 messages quoted below.

- roles alternate and the first message is the user's (a history that starts with the
  assistant gets a short user message before it, :data:`~slotmagic.providers._wire.EARLIER`);
- no empty or whitespace-only text ("text content blocks must contain non-whitespace text"),
  and no trailing whitespace at the end of a final assistant message;
- every ``tool_use`` id once in the whole request ("tool_use ids must be unique"), matching
  ``^[a-zA-Z0-9_-]+$`` (:func:`~slotmagic._core.repair.repair_tool_pairs`,
  :func:`~slotmagic._core.repair.wire_call_id`);
- each ``tool_use`` answered by a ``tool_result`` in the next user message, first in it, and no
  ``tool_result`` without its ``tool_use`` just before;
- ``tools`` present whenever tool blocks are ("Requests which include tool_use or tool_result
  blocks must define tools"): a turn without tools sends the history's tools as bare
  definitions with ``tool_choice: none`` (:func:`~slotmagic.providers._wire.bare_tools`);
- thinking: an assistant message never ends with a thinking block; without thinking a final
  assistant message holds none; with thinking on, a request that ends in a tool round whose
  assistant message has no thinking before it (another provider's calls, or a round made
  while thinking was off) has that round told as text; ``max_tokens`` above
  ``budget_tokens`` (the default reply is raised to ``budget_tokens + 4096``) and
  ``budget_tokens`` at least 1,024; no ``temperature``/``top_k`` beside thinking;
- sampling parameters (``temperature``, ``top_p``, ``top_k``) left out for the models that
  refuse them, Claude 4.7 and later ("`temperature` is deprecated for this model"), which
  take only adaptive thinking: an ``enabled`` thinking request is sent as ``adaptive``;
- a server tool's blocks are passed back only when the request offers that server tool
  (``params={"tools": [{"type": "web_search_20250305", "name": "web_search"}]}``, added to
  the function tools), a ``compaction`` block only with ``context_management`` set; otherwise
  they are told as text.

``params={"betas": [...]}`` is sent as the ``anthropic-beta`` header (compaction, for one).

**What the view pipeline does first.** A fix that changes what is counted (a message added,
removed or rewritten, a tool definition added) is a step of the view pipeline for the models
whose provider speaks this format (``ProviderSpec.wire``), so a preview and the budget hold
what is sent: tool pairs (``_engine/steps/tool_pairs.py``), blank messages (``blank.py``), the
user message first (``user_first.py``), the bare tool definitions (``bare_tools.py``), and what
the request's ``params`` make this API take only as text (:mod:`._anthropic_plan`: a server
tool's blocks a request that does not offer the tool cannot take back, ``blocks_as_text.py``;
with thinking on, a last tool round made without it, ``round_as_text.py``; a preview knows the
params when given them, ``Session.preview(params=...)``, and a turn's view always does). They
stay here too, as a safety net for requests made without the pipeline (a tool round, a summary,
a provider called directly); on a view the steps mended they change nothing. What stays here
alone changes no counted content:

- system messages joined into the ``system`` field, tool results put in user messages, and
  consecutive messages of one role merged: the same text in the same order, only the framing
  between messages differs (and one view entry per stored message is what lets a preview show
  each one's position, pin or exclusion);
- call ids mapped to what the API takes: ids are not counted;
- thinking blocks left out of a final assistant message when thinking is off (thinking is not
  counted: the API drops it from earlier turns), sampling parameters dropped,
  ``max_tokens`` defaulted for the reply;
- trailing whitespace cut from a final assistant message (a request that ends with the
  assistant's message: never a turn's, which ends with the new user message);
- cache breakpoints, which mark the request without changing it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.images import Image
from .._core.messages import Message, Thinking
from .._core.repair import ANTHROPIC_MAX_ID, repair_tool_pairs, wire_call_id
from .._core.request import ChatRequest, ToolSpec
from .._errors import RequestRefused
from ._anthropic_cache import cache_breakpoints
from ._anthropic_plan import RequestPlan, blocks_as_text, refuses_sampling, request_plan, round_as_text
from ._anthropic_stream import EventAssembler
from ._limits import output_limit
from ._structured import anthropic_schema_tool, anthropic_tool_choice
from ._transport import HTTPProvider, SSECall
from ._wire import BARE_SCHEMA, EARLIER, bare_tools, json_object, refuse

API_VERSION = "2023-06-01"
# The API requires max_tokens; every Claude model can produce at least this many.
DEFAULT_MAX_TOKENS = 4096
MIN_THINKING_BUDGET = 1024

_THINKING = ("thinking", "redacted_thinking")
_ID = re.compile(r"[A-Za-z0-9_-]+\Z")


def request_body(request: ChatRequest) -> dict[str, Any]:
    """The request body, every wire rule kept (see the module docstring)."""
    return build(request)[0]


def build(request: ChatRequest, label: str = "anthropic") -> tuple[dict[str, Any], tuple[str, ...]]:
    """(the request body, the ``anthropic-beta`` values); :class:`RequestRefused` when the
    request would still break a rule."""
    params = dict(request.params)
    betas = _betas(params.pop("betas", None), label)
    server = _server_tools(params.get("tools"), label)
    plan = request_plan(request.model, params)
    params.pop("tools", None)
    refuses = refuses_sampling(request.model)
    thinking = params.get("thinking")
    if refuses and isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        params["thinking"] = {"type": "adaptive"}  # 4.7+: adaptive only, no budget
    kind = plan.thinking
    mended = _mended(request.messages, plan)
    system, messages = _wire_messages(mended, plan)
    max_tokens = request.max_tokens
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS + (plan.budget or 0)
        most = output_limit(f"anthropic:{request.model}")
        if most is not None:  # a thinking budget near the model's maximum output
            max_tokens = min(max_tokens, most[0])
    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "messages": messages}
    if system is not None:
        body["system"] = system
    tools = wire_tools(request.tools) + server
    if request.schema is not None:  # structured output: a forced tool (providers/_structured.py)
        body["tool_choice"] = anthropic_tool_choice(request.schema, others=bool(tools), thinking=thinking)
        tools.append(anthropic_schema_tool(request.schema))
    if tools:
        body["tools"] = tools
    elif _tool_blocks(messages):  # what _engine/steps/bare_tools.py counted for a view
        body["tools"] = wire_tools(bare_tools(mended)) or [{"name": "tool", "input_schema": BARE_SCHEMA}]
        body["tool_choice"] = {"type": "none"}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(params)  # provider-specific parameters pass through as given
    if request.prompt_cache:  # after them: the marks a user put there count first
        cache_breakpoints(body)
    for name in ("temperature", "top_p", "top_k") if refuses else ("temperature", "top_k") if kind else ():
        body.pop(name, None)  # the model refuses them (4.7+), or thinking does
    body["stream"] = True
    refuse(label, violations(body))
    return body, betas


def _betas(value: Any, label: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RequestRefused(f"{label}: params betas must be a list of beta names, e.g. ['compact-2026-01-12']")
    return tuple(v.strip() for v in value)


def _server_tools(value: Any, label: str) -> list[dict[str, Any]]:
    """Tools given in ``params`` (server tools such as web search), added to the function tools."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, Mapping) for t in value):
        raise RequestRefused(
            f"{label}: params tools must be a list of tool definitions, "
            "e.g. [{'type': 'web_search_20250305', 'name': 'web_search'}]"
        )
    return [dict(t) for t in value]


def wire_messages(messages: Sequence[Message], *, thinking: bool = False) -> tuple[str | None, list[dict[str, Any]]]:
    """Core messages as (the ``system`` text, Messages API messages). ``thinking``: whether
    the request enables extended thinking."""
    plan = RequestPlan("enabled" if thinking else None)
    return _wire_messages(_mended(messages, plan), plan)


def _mended(messages: Sequence[Message], plan: RequestPlan) -> list[Message]:
    """``messages`` as the wire sends them: tool pairs repaired, then what ``plan`` rewrites as
    text (the view pipeline made the same rewrites already for a turn's request, see
    :func:`blocks_as_text` and :func:`round_as_text`: on such a list they change nothing)."""
    repaired = [blocks_as_text(m, plan) if m.thinking else m for m in repair_tool_pairs(messages)]
    return round_as_text(repaired, plan)


def _wire_messages(messages: Sequence[Message], plan: RequestPlan) -> tuple[str | None, list[dict[str, Any]]]:
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if m.content.strip():
                system.append(m.content)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if m.role == "tool":
            blocks = [_tool_result(m)]
        elif m.role == "assistant":
            blocks = _assistant_blocks(m)
        elif m.images:
            blocks = _content_blocks(m)
        else:
            blocks = _text(m.content)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if wire and wire[0]["role"] == "assistant":
        wire.insert(0, {"role": "user", "content": _text(EARLIER)})
    if wire and wire[-1]["role"] == "assistant" and not plan.thinking:
        # "When thinking is disabled, an assistant message in the final position cannot contain thinking"
        wire[-1]["content"] = [b for b in wire[-1]["content"] if b["type"] not in _THINKING]
        if not wire[-1]["content"]:
            wire.pop()
    if wire and wire[-1]["role"] == "assistant":
        _strip_final(wire[-1])
    return ("\n\n".join(system) if system else None), wire


def _content_blocks(m: Message) -> list[dict[str, Any]]:
    """Structured content as text and ``image`` blocks with a base64 source
    (https://docs.anthropic.com/en/docs/build-with-claude/vision)."""
    blocks: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, Image):
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
            blocks.append({"type": "image", "source": source})
        else:
            blocks += _text(part.text)
    return blocks


def _text(text: str) -> list[dict[str, Any]]:
    """A text block, or none for empty or whitespace-only text (which the API refuses)."""
    return [{"type": "text", "text": text}] if text.strip() else []


def _strip_final(message: dict[str, Any]) -> None:
    """ "final assistant content cannot end with trailing whitespace"."""
    blocks = message["content"]
    if blocks and blocks[-1]["type"] == "text":
        blocks[-1] = {**blocks[-1], "text": blocks[-1]["text"].rstrip()}


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    """An assistant message's blocks in the order the reply had them: its thinking first,
    then its text with the kept blocks where they came in it, then its tool calls (thinking
    and blocks that came between calls where they came)."""
    kept = [t for t in m.thinking if t.provider == "anthropic"]  # another API's reasoning: left out
    blocks = [_thinking_block(t) for t in kept if t.kind != "block" and t.after_calls <= 0]
    at = 0
    for t in sorted((t for t in kept if t.kind == "block" and t.after_calls <= 0), key=lambda t: t.at):
        cut = min(max(t.at, at), len(m.content))
        blocks += _text(m.content[at:cut])
        blocks += _kept_block(t)
        at = cut
    blocks += _text(m.content[at:])
    for k, call in enumerate(m.tool_calls, 1):
        blocks.append(
            {
                "type": "tool_use",
                "id": wire_call_id(call.id, ANTHROPIC_MAX_ID),
                "name": call.name,
                "input": json_object(call.arguments),
            }
        )
        for t in kept:
            if t.after_calls == k:
                blocks += _kept_block(t) if t.kind == "block" else [_thinking_block(t)]
    for t in kept:
        if t.after_calls > len(m.tool_calls):
            blocks += _kept_block(t) if t.kind == "block" else [_thinking_block(t)]
    while blocks and blocks[-1]["type"] in _THINKING:
        blocks.pop()  # "The final block in an assistant message cannot be thinking" (a reply cut short)
    return blocks


def _kept_block(t: Thinking) -> list[dict[str, Any]]:
    """A kept block as the API sent it (:func:`blocks_as_text` told as text those the request
    cannot take back)."""
    block = t.block()
    return [block] if block is not None else _text(t.text)


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
    if m.content.strip():
        result["content"] = m.content
    if m.is_error:
        result["is_error"] = True
    return result


def _tool_blocks(messages: list[dict[str, Any]]) -> bool:
    return any(b["type"] in ("tool_use", "tool_result") for m in messages for b in m["content"])


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {"name": t.name}
        if t.description:
            tool["description"] = t.description
        tool["input_schema"] = dict(t.parameters)
        wire.append(tool)
    return wire


def _uses(message: Mapping[str, Any]) -> list[Any]:
    blocks = message.get("content")
    return [b.get("id") for b in blocks if b.get("type") == "tool_use"] if isinstance(blocks, list) else []


def violations(body: Mapping[str, Any]) -> list[str]:
    """The wire rules (module docstring) ``body`` breaks, each in a few words; [] when none."""
    found: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["the request holds no message"]
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) and thinking.get("type") != "disabled" else None
    seen: set[str] = set()
    tool_blocks = False
    previous: dict[str, Any] | None = None
    for n, message in enumerate(messages):
        role, blocks = message.get("role"), message.get("content")
        expected = "user" if n % 2 == 0 else "assistant"
        if role != expected:
            found.append(f"message {n} is the {role}'s where the {expected}'s must be")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if not isinstance(blocks, list) or not blocks:
            found.append(f"message {n} is empty")
            previous = message
            continue
        for b in blocks:
            if b.get("type") == "text" and not str(b.get("text", "")).strip():
                found.append(f"message {n} holds an empty or whitespace-only text block")
            if b.get("type") == "tool_use":
                tool_blocks = True
                if b.get("id") in seen or not _ID.match(str(b.get("id"))):
                    found.append(f"tool_use id {b.get('id')!r} is used twice or is not a valid id")
                seen.add(b.get("id"))
                if not isinstance(b.get("input"), dict):
                    found.append(f"tool_use {b.get('id')!r} has input that is not an object")
        if role == "assistant" and blocks[-1].get("type") in _THINKING:
            found.append(f"assistant message {n} ends with a thinking block")
        uses = _uses(previous) if previous is not None and previous.get("role") == "assistant" else []
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if results:
            tool_blocks = True
            if [b.get("type") for b in blocks[: len(results)]] != ["tool_result"] * len(results):
                found.append(f"message {n}: tool_result blocks must come first")
        if role == "user" and sorted(map(str, results)) != sorted(map(str, uses)):
            found.append(f"message {n}: tool results do not answer the calls just before them")
        previous = message
    final = messages[-1]
    if final.get("role") == "assistant" and not kind and any(b.get("type") in _THINKING for b in final["content"]):
        found.append("the final assistant message holds thinking while thinking is off")
    if tool_blocks and not body.get("tools"):
        found.append("tool blocks are sent without tools")
    if kind == "enabled":
        budget = thinking.get("budget_tokens") if isinstance(thinking, Mapping) else None
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            found.append(f"thinking budget_tokens must be a whole number >= {MIN_THINKING_BUDGET}, not {budget!r}")
        elif not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= budget:
            found.append(
                f"max_tokens ({body.get('max_tokens')}) must be above the thinking budget ({budget}): "
                "raise max_tokens= or lower budget_tokens"
            )
        last = messages[-1]
        if len(messages) > 1 and any(b.get("type") == "tool_result" for b in last.get("content") or ()):
            first = (messages[-2].get("content") or [{}])[0]
            if first.get("type") not in _THINKING:
                found.append(
                    "with thinking on, the assistant message before the last tool results must start with thinking"
                )
    if kind and ("temperature" in body or "top_k" in body):
        found.append("temperature and top_k cannot be sent with thinking")
    if refuses_sampling(str(body.get("model", ""))) and any(k in body for k in ("temperature", "top_p", "top_k")):
        found.append(f"{body.get('model')} refuses temperature, top_p and top_k")
    return found


class AnthropicProvider(HTTPProvider):
    """``anthropic:MODEL``."""

    name = "anthropic"

    def call(self, request: ChatRequest) -> SSECall:
        endpoint = self.endpoint()
        body, betas = build(request, f"{self.name} ({endpoint.host})")
        headers = {"anthropic-version": API_VERSION}
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
        return SSECall(endpoint, "/v1/messages", body, headers)

    def assembler(self, call: SSECall) -> EventAssembler:
        return EventAssembler(call.label, call.endpoint.secrets)
