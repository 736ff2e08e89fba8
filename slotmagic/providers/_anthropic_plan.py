"""What a request's ``params`` change in what Anthropic's Messages API is sent: the
:class:`RequestPlan` they make, and the rewrites as text it calls for: a server tool's blocks a
request cannot take back (:func:`blocks_as_text`), and with thinking on, a last tool round made
without it (:func:`round_as_text`). On core messages, without the wire's framing, so the view
pipeline makes the same rewrites (``_engine/steps/blocks_as_text.py``, ``round_as_text.py``)
and a preview holds what the turn sends; the wire module (:mod:`._anthropic`) makes them for a
request made without the pipeline, and on messages the pipeline rewrote they change nothing.
No HTTP here: the view pipeline imports it when the package is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._core.messages import Message, Thinking
from .._core.repair import ANTHROPIC_MAX_ID, wire_call_id
from ._wire import json_object, sends_nothing

# claude-opus-4-7, claude-sonnet-5, claude-fable-5-1, claude-3-5-sonnet: (major, minor)
_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?")


def refuses_sampling(model: str) -> bool:
    """Whether a Claude model refuses ``temperature``, ``top_p`` and ``top_k`` (and thinking
    budgets): Claude 4.7 and later. No model database says so (genai-prices has no such
    field), so it is read from the model's version."""
    found = _VERSION.search(model.lower())
    if found is None:
        return False
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version >= (4, 7) and version[0] < 100  # not a date read as a version


@dataclass(frozen=True)
class RequestPlan:
    """What a request's ``params`` turn on that changes what is sent: extended ``thinking``
    ("enabled", "adaptive", or None), its ``budget``, the ``server_tools`` offered (by name) and
    server-side ``compaction`` (``context_management``). Read by :func:`build` and by the view
    pipeline's Anthropic steps (``_engine/steps/blocks_as_text.py``, ``round_as_text.py``), so a
    preview made with a turn's params holds what the turn sends."""

    thinking: str | None = None
    budget: int | None = None
    server_tools: frozenset[str] = frozenset()
    compaction: bool = False


def request_plan(model: str, params: Mapping[str, Any]) -> RequestPlan:
    """The plan of a request to ``model`` with ``params`` (a malformed part of them plans
    nothing: :func:`build` refuses it in one line when the request is made)."""
    thinking = params.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) and thinking.get("type") != "disabled" else None
    budget = thinking.get("budget_tokens") if isinstance(thinking, Mapping) else None
    if kind == "enabled" and refuses_sampling(model):
        kind, budget = "adaptive", None  # 4.7+: sent as adaptive, without a budget (see build)
    tools = params.get("tools")
    offered = tools if isinstance(tools, (list, tuple)) else ()
    return RequestPlan(
        kind if isinstance(kind, str) else None,
        budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
        frozenset(
            str(t["name"]) for t in offered if isinstance(t, Mapping) and "type" in t and isinstance(t.get("name"), str)
        ),
        isinstance(params.get("context_management"), Mapping),
    )


# -- what a request's params make the wire tell as text ------------------------------------------


def blocks_as_text(message: Message, plan: RequestPlan) -> Message:
    """``message`` with each kept block (a server tool's call or result, a compaction) that the
    request cannot take back told as its text, on a line of its own where it came in the reply:
    a block goes back whole only to a request that offers its server tool, a compaction only
    with ``context_management`` set (the API refuses it otherwise). A block that came after a
    tool call is told after the text (a message's text comes before its calls)."""
    told = {
        id(t) for t in message.thinking if t.provider == "anthropic" and t.kind == "block" and not _takes_back(t, plan)
    }
    if not told:
        return message
    content = message.content
    placed = sorted(
        (k for k, t in enumerate(message.thinking) if t.kind == "block" and t.after_calls <= 0),
        key=lambda k: message.thinking[k].at,
    )
    out, done, wrap = "", 0, False  # wrap: a told text ends ``out``; the text after it starts a line

    def add(text: str) -> None:
        nonlocal out, wrap
        if text:
            out += ("\n" if wrap and not text.startswith("\n") else "") + text
            wrap = False

    def tell(text: str) -> None:
        nonlocal out, wrap
        if text.strip():
            out += ("\n" if out and not out.endswith("\n") else "") + text
            wrap = True

    moved: dict[int, int] = {}  # a block kept whole: where it now comes in the text
    for k in placed:
        t = message.thinking[k]
        cut = min(max(t.at, done), len(content))
        add(content[done:cut])
        done = cut
        if id(t) in told:
            tell(t.text)
        else:
            moved[k] = len(out)
    add(content[done:])
    for t in message.thinking:
        if id(t) in told and t.after_calls > 0:
            tell(t.text)
    kept = tuple(
        replace(t, at=moved[k]) if k in moved else t for k, t in enumerate(message.thinking) if id(t) not in told
    )
    return replace(message, content=out, thinking=kept)


def _joined(*pieces: str) -> str:
    """Texts in order, on lines of their own (blank ones left out)."""
    return "\n".join(p for p in pieces if p.strip())


def _takes_back(t: Thinking, plan: RequestPlan) -> bool:
    """Whether a request made with ``plan`` takes the kept block ``t`` back whole."""
    block = t.block()
    if block is None:
        return False
    if block.get("type") == "compaction":
        return plan.compaction
    return block.get("name", _result_tool(block)) in plan.server_tools


def round_as_text(messages: Sequence[Message], plan: RequestPlan) -> list[Message]:
    """``messages`` with their last tool round told as text when thinking is on and that
    round's assistant message does not open with thinking (another provider's calls, or a
    round made while thinking was off): the API refuses such a round ("Expected thinking or
    redacted_thinking, but found tool_use") and takes the same calls and results as text. With
    ``adaptive`` thinking Claude's own calls (``toolu_`` ids) may come without it, and are left
    alone. The round is what the wire sends as its last two messages: the assistant's (the
    messages of that role merged) and the user's after it, which holds the results."""
    out = list(messages)
    if not plan.thinking:
        return out
    sent = [i for i, m in enumerate(out) if m.role != "system" and not sends_nothing(m, "anthropic")]
    end = len(sent)
    while end and out[sent[end - 1]].role != "assistant":
        end -= 1
    answers = [i for i in sent[end:] if out[i].role == "tool"]
    start = end
    while start and out[sent[start - 1]].role == "assistant":
        start -= 1
    round_ = sent[start:end]
    calls = [c for i in round_ for c in out[i].tool_calls]
    if not answers or not calls or _opens_with_thinking(out[round_[0]]):
        return out
    if plan.thinking != "enabled" and all(wire_call_id(c.id, ANTHROPIC_MAX_ID).startswith("toolu_") for c in calls):
        return out
    names = {c.id: c.name for c in calls}
    for i in round_:
        m = out[i]
        if m.tool_calls:
            said = [
                f"[tool call {c.name}({json.dumps(json_object(c.arguments), ensure_ascii=False)})]"
                for c in m.tool_calls
            ]
            out[i] = replace(m, content=_joined(m.content, *said), tool_calls=())
    for i in answers:
        m = out[i]
        kind = "tool error" if m.is_error else "tool result"
        out[i] = Message.user(f"[{kind} {names.get(m.tool_call_id or '', m.name or 'unknown')}: {m.content}]")
    return out


def _opens_with_thinking(m: Message) -> bool:
    return any(t.provider == "anthropic" and t.kind != "block" and t.after_calls <= 0 for t in m.thinking)


def _result_tool(block: dict[str, Any]) -> str:
    """The server tool a ``*_tool_result`` block answers: ``web_search_tool_result`` → ``web_search``."""
    kind = str(block.get("type", ""))
    return kind.removesuffix("_tool_result") if kind.endswith("_tool_result") else ""
