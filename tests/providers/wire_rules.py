"""The providers' documented request rules, as a validator the tests run on every request body.

Written apart from the code it checks (slotmagic/providers/_anthropic.py and _openai.py build
requests that keep these rules): each rule is one function, with the source that states it.
:func:`check` answers the list of rules a body breaks; :class:`~.wire_server.WireServer`
runs it on every body its loopback server receives on either wire format, and the ``wire``
fixture fails a test whose requests broke any.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

Body = dict[str, Any]
Rule = Callable[[Body], Iterator[str]]

# -- Anthropic Messages API --------------------------------------------------------------------

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
THINKING = ("thinking", "redacted_thinking")


def _blocks(message: Body) -> list[Body]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, dict)]


def an_roles_alternate(body: Body) -> Iterator[str]:
    """Turns alternate user / assistant, starting with the user.
    https://docs.anthropic.com/en/api/messages ("Our models are trained to operate on
    alternating user and assistant conversational turns")."""
    for n, message in enumerate(body["messages"]):
        expected = "user" if n % 2 == 0 else "assistant"
        if message.get("role") != expected:
            yield f"messages[{n}] is {message.get('role')!r}, expected {expected!r}"


def an_text_not_blank(body: Body) -> Iterator[str]:
    """No empty or whitespace-only text block: "text content blocks must contain non-whitespace
    text" / "text content blocks must be non-empty".
    https://github.com/anthropics/claude-code/issues/23440,
    https://github.com/LibreChat-AI/agents/pull/124 (the API's answers, shape by shape)."""
    for n, message in enumerate(body["messages"]):
        for b in _blocks(message):
            if b.get("type") == "text" and not str(b.get("text", "")).strip():
                yield f"messages[{n}] holds a blank text block"
    for b in body.get("system") if isinstance(body.get("system"), list) else ():
        if not str(b.get("text", "")).strip():
            yield "system holds a blank text block"


def an_tool_ids_unique(body: Body) -> Iterator[str]:
    """Every tool_use id once in the request, matching ^[a-zA-Z0-9_-]+$: "tool_use ids must be
    unique". https://github.com/anthropics/claude-code/issues/28515,
    https://docs.anthropic.com/en/api/messages (tool_use id pattern)."""
    seen: set[str] = set()
    for n, message in enumerate(body["messages"]):
        for b in _blocks(message):
            if b.get("type") in ("tool_use", "server_tool_use"):
                if b.get("id") in seen:
                    yield f"messages[{n}]: tool_use id {b.get('id')!r} used twice"
                seen.add(b.get("id"))
                if b.get("type") == "tool_use" and not ANTHROPIC_ID.match(str(b.get("id"))):
                    yield f"messages[{n}]: tool_use id {b.get('id')!r} does not match the pattern"
                if not isinstance(b.get("input"), dict):
                    yield f"messages[{n}]: tool_use input is not an object"


def an_tool_results_pair(body: Body) -> Iterator[str]:
    """Each tool_use answered by a tool_result in the next (user) message, the results first
    in it, and no result without its call just before: "tool_use ids were found without
    tool_result blocks immediately after", "Did not find 1 tool_result block(s) at the
    beginning of this message". https://github.com/anthropics/claude-code/issues/3512,
    https://github.com/anthropics/anthropic-sdk-typescript/issues/653,
    https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use"""
    messages = body["messages"]
    for n, message in enumerate(messages):
        blocks = _blocks(message)
        results = [b for b in blocks if b.get("type") == "tool_result"]
        previous = _blocks(messages[n - 1]) if n and messages[n - 1].get("role") == "assistant" else []
        calls = [b.get("id") for b in previous if b.get("type") == "tool_use"]
        if message.get("role") == "user" and sorted(map(str, calls)) != sorted(
            str(r.get("tool_use_id")) for r in results
        ):
            yield f"messages[{n}]: results {[r.get('tool_use_id') for r in results]} for calls {calls}"
        if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
            yield f"messages[{n}]: tool_result blocks are not first"


def an_tools_defined(body: Body) -> Iterator[str]:
    """Tool blocks need tools: "Requests which include tool_use or tool_result blocks must
    define tools". https://github.com/anthropics/anthropic-sdk-python/issues/494"""
    kinds = {b.get("type") for m in body["messages"] for b in _blocks(m)}
    if kinds & {"tool_use", "tool_result"} and not body.get("tools"):
        yield "tool blocks without tools"


def an_thinking(body: Body) -> Iterator[str]:
    """Extended thinking: budget_tokens >= 1024 and below max_tokens; an assistant message
    never ends with thinking; with thinking off the final assistant message holds none; with
    it on, the assistant message of the tool round the request ends in starts with thinking;
    no temperature or top_k beside it.
    https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking"""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            yield f"budget_tokens {budget!r} below 1024"
        elif body.get("max_tokens", 0) <= budget:
            yield f"max_tokens {body.get('max_tokens')} not above budget_tokens {budget}"
    messages = body["messages"]
    for n, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "assistant" and blocks and blocks[-1].get("type") in THINKING:
            yield f"messages[{n}] ends with a thinking block"
    last = messages[-1]
    if last.get("role") == "assistant" and not kind and any(b.get("type") in THINKING for b in _blocks(last)):
        yield "thinking in the final assistant message with thinking off"
    if kind == "enabled" and len(messages) > 1 and any(b.get("type") == "tool_result" for b in _blocks(last)):
        first = (_blocks(messages[-2]) or [{}])[0]
        if first.get("type") not in THINKING:
            yield "the assistant message before the final tool results does not start with thinking"
    if kind in ("enabled", "adaptive") and ("temperature" in body or "top_k" in body):
        yield "temperature or top_k beside thinking"


def an_sampling(body: Body) -> Iterator[str]:
    """Claude 4.7 and later refuse sampling parameters: "`temperature` is deprecated for this
    model". https://github.com/sipeed/picoclaw/issues/2939,
    https://github.com/Comfy-Org/ComfyUI/issues/13923"""
    found = re.search(r"claude-(?:[a-z]+-)?(\d+)(?:-(\d)(?!\d))?", str(body.get("model")))
    if found and (int(found.group(1)), int(found.group(2) or 0)) >= (4, 7):
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                yield f"{name} sent to {body.get('model')}"


def an_json(body: Body) -> Iterator[str]:
    """The body is JSON a server can parse: no NaN or Infinity (RFC 8259, section 6)."""
    try:
        json.dumps(body, allow_nan=False)
    except ValueError as exc:
        yield f"not JSON: {exc}"
    yield from ()


def an_images(body: Body) -> Iterator[str]:
    """An image is an ``image`` block with a base64 source of a supported type, in a user
    message. https://docs.anthropic.com/en/docs/build-with-claude/vision ("base64-encoded
    image"; image/jpeg, image/png, image/gif, image/webp)."""
    for n, message in enumerate(body["messages"]):
        for b in _blocks(message):
            if b.get("type") != "image":
                continue
            source = b.get("source") or {}
            if message.get("role") != "user":
                yield f"messages[{n}]: an image outside a user message"
            if source.get("type") != "base64" or source.get("media_type") not in IMAGE_TYPES:
                yield f"messages[{n}]: image source {source.get('type')!r} / {source.get('media_type')!r}"
            elif not _base64(source.get("data")):
                yield f"messages[{n}]: image data is not base64"


IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def an_cache_marks(body: Body) -> Iterator[str]:
    """At most four blocks carry ``cache_control``, in tools, system blocks and message content.
    https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching ("up to 4 cache breakpoints")."""
    blocks = [*(body.get("tools") or [])]
    blocks += body["system"] if isinstance(body.get("system"), list) else []
    blocks += [b for m in body["messages"] for b in _blocks(m)]
    marks = sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)
    if marks > 4:
        yield f"{marks} blocks carry cache_control (at most 4)"


def _base64(data: object) -> bool:
    import base64
    import binascii

    if not isinstance(data, str) or not data:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


ANTHROPIC_RULES: tuple[Rule, ...] = (
    an_roles_alternate,
    an_text_not_blank,
    an_tool_ids_unique,
    an_tool_results_pair,
    an_tools_defined,
    an_thinking,
    an_sampling,
    an_images,
    an_cache_marks,
    an_json,
)

# -- OpenAI chat completions ------------------------------------------------------------------


def oa_tool_messages_follow_calls(body: Body) -> Iterator[str]:
    """Every call answered by a tool message right after its assistant message, and no tool
    message without its call: "An assistant message with 'tool_calls' must be followed by tool
    messages responding to each 'tool_call_id'".
    https://platform.openai.com/docs/guides/function-calling,
    https://github.com/agno-agi/agno/issues/3105"""
    open_calls: list[str] = []
    for n, message in enumerate(body["messages"]):
        if message.get("role") == "tool":
            if message.get("tool_call_id") in open_calls:
                open_calls.remove(message["tool_call_id"])
            else:
                yield f"messages[{n}]: tool message for {message.get('tool_call_id')!r} without its call"
            continue
        if open_calls:
            yield f"messages[{n}]: calls {open_calls} unanswered"
        open_calls = [c.get("id") for c in message.get("tool_calls") or ()]
    if open_calls:
        yield f"calls {open_calls} unanswered at the end"


def oa_call_ids(body: Body) -> Iterator[str]:
    """Call ids unique and at most 40 characters: "string too long. Expected a string with
    maximum length 40" (OpenAI, Azure).
    https://platform.openai.com/docs/api-reference/chat/create"""
    seen: set[str] = set()
    for message in body["messages"]:
        for c in message.get("tool_calls") or ():
            call_id = c.get("id")
            if not isinstance(call_id, str) or not call_id or len(call_id) > 40 or call_id in seen:
                yield f"call id {call_id!r} empty, too long or used twice"
            seen.add(call_id)


def oa_arguments_object(body: Body) -> Iterator[str]:
    """``function.arguments`` is the JSON text of an object (the API's type is a string;
    Ollama parses it into an object and refuses anything else).
    https://platform.openai.com/docs/api-reference/chat/create,
    https://github.com/ollama/ollama/issues/6155"""
    for message in body["messages"]:
        for c in message.get("tool_calls") or ():
            arguments = (c.get("function") or {}).get("arguments")
            try:
                value = json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError:
                value = None
            if not isinstance(value, dict):
                yield f"call {c.get('id')!r}: arguments {arguments!r:.60} are not a JSON object"


def oa_no_blank_messages(body: Body) -> Iterator[str]:
    """No message without content (an assistant message with calls has content null or text);
    a user message's content may be an array of parts, none of them a blank text.
    https://platform.openai.com/docs/api-reference/chat/create"""
    for n, message in enumerate(body["messages"]):
        if message.get("role") == "tool" or message.get("tool_calls"):
            continue
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list) and content:
            if any(p.get("type") == "text" and not str(p.get("text", "")).strip() for p in content):
                yield f"messages[{n}] holds a blank text part"
            continue
        if not isinstance(content, str) or not content.strip():
            yield f"messages[{n}] is empty"


def oa_content_parts(body: Body) -> Iterator[str]:
    """Content parts are ``text`` ({"type": "text", "text": ...}) or ``image_url`` whose url is
    a base64 data URL of a supported type (OpenAI takes http URLs too; Ollama's /v1 only base64),
    and only in user messages here.
    https://platform.openai.com/docs/guides/images-vision ("Base64 encoded image"),
    https://github.com/ollama/ollama/blob/main/docs/openai.md (vision: base64 only)."""
    for n, message in enumerate(body["messages"]):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        if message.get("role") != "user":
            yield f"messages[{n}]: content parts in a {message.get('role')} message"
        for p in content:
            kind = p.get("type")
            if kind == "text":
                continue
            if kind != "image_url":
                yield f"messages[{n}]: unknown part type {kind!r}"
                continue
            url = str((p.get("image_url") or {}).get("url", ""))
            head, _, data = url.partition(",")
            if head not in tuple(f"data:{t};base64" for t in IMAGE_TYPES) or not _base64(data):
                yield f"messages[{n}]: image_url is not a base64 data URL of a supported type"


def oa_tools_defined(body: Body) -> Iterator[str]:
    """Tool calls in the history come with ``tools`` (``tool_choice: "none"`` when the turn
    offers none), as strict servers ask; the same rule as Anthropic's.
    https://github.com/aws-samples/bedrock-access-gateway/pull/239"""
    if any(m.get("tool_calls") for m in body["messages"]) and not body.get("tools"):
        yield "tool calls without tools"


OPENAI_RULES: tuple[Rule, ...] = (
    oa_tool_messages_follow_calls,
    oa_call_ids,
    oa_arguments_object,
    oa_no_blank_messages,
    oa_content_parts,
    oa_tools_defined,
    an_json,
)


def check(path: str, body: Any) -> list[str]:
    """The rules ``body`` (sent to ``path``) breaks; [] for a valid body, or a path that is
    neither wire format."""
    if path.endswith("/v1/messages"):
        rules = ANTHROPIC_RULES
    elif path.endswith("/chat/completions"):
        rules = OPENAI_RULES
    else:
        return []
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return ["no messages"]
    return [f"{rule.__name__}: {problem}" for rule in rules for problem in rule(body)]
