"""What both wire formats share: on the way out, tool-call arguments as a JSON object any API
(and ``json.dumps``) takes, the bare tool definitions a request without tools carries beside a
history's tool calls (:func:`bare_tools`), Anthropic's opening user message before a history
that starts with a reply (:data:`EARLIER`) and the one-line refusal of a request that would
still break a rule; on the way in, the shape checks of a reply's fields (:func:`mapping`, :func:`text`,
:func:`index`, :func:`count`), which raise ``TypeError``/``ValueError`` that the parsers turn
into one :class:`~slotmagic._errors.MalformedReply`.

Arguments are stored as the model wrote them. On the way out they are read as JSON with every
value a JSON text may hold but JSON cannot send kept as text instead: ``NaN``, ``Infinity``
and numbers past a float's range (``1e400``) become the strings they were written as, so a
call holding them no longer breaks every later request of its slot ("Out of range float values
are not JSON compliant"). Arguments that are not a JSON object (another provider's call, a
server that sent a list, text cut short) or nest deeper than :data:`MAX_DEPTH` are sent as
``{}``, which every API accepts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.checks import deeper_than
from .._core.messages import Message, Thinking
from .._core.request import ToolSpec
from .._errors import RequestRefused

MAX_DEPTH = 200  # levels of nesting kept in arguments sent back; deeper ones are sent as {}


def json_object(text: str | None) -> dict[str, Any]:
    """``text`` as a JSON object safe to send (see the module docstring)."""
    try:
        value = json.loads(text or "{}", parse_constant=str, parse_float=_finite_or_text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(value, dict) or deeper_than(value, MAX_DEPTH):
        return {}
    return value


def json_arguments(text: str | None) -> str:
    """``text`` as the JSON text of an object (OpenAI-compatible servers parse it; Ollama
    refuses anything else with a 400)."""
    return json.dumps(json_object(text), ensure_ascii=False, allow_nan=False)


# The user message Anthropic's API wants first, before a history that starts with a reply (a
# focused view, a compaction's cut): the view pipeline adds it (_engine/steps/user_first.py),
# the Anthropic wire module for a request made without it.
EARLIER = "(the conversation so far, from an earlier point)"
BARE_SCHEMA: Mapping[str, Any] = {"type": "object"}


def bare_tools(messages: Sequence[Message]) -> tuple[ToolSpec, ...]:
    """The tool definitions a request offering no tools carries beside ``messages``' tool calls
    (both APIs refuse tool calls or results without tools): each tool called, once, in the order
    first called, by its name alone. The wire modules send them with a tool choice of none, so
    the model calls none of them; the view pipeline counts them (_engine/steps/bare_tools.py)."""
    names = dict.fromkeys(call.name for m in messages for call in m.tool_calls)
    return tuple(ToolSpec(name, "", BARE_SCHEMA) for name in names)


def refuse(label: str, violations: Sequence[str]) -> None:
    """Raise :class:`RequestRefused` naming the first broken rule, if any."""
    if violations:
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise RequestRefused(
            f"{label}: the request would break the API's rules, so it was not sent: {violations[0]}{more}"
        )


def _finite_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


# -- the shape of a reply's fields ----------------------------------------------------------------


def mapping(value: Any) -> Mapping[str, Any]:
    """A JSON object field (absent or null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError("not an object")
    return value


def text(value: Any) -> str | None:
    """A string field, or None when it is absent or null."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError("not a string")


def index(value: Any) -> int:
    """A block or choice index."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1_000_000:
        raise TypeError("not an index")
    return value


def count(value: Any) -> int:
    """A token count: a whole number >= 0 (absent or null: 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        raise ValueError("not a token count")
    return value


def sends_nothing(message: Message, wire: str | None = None) -> bool:
    """Whether ``message`` sends nothing to a model whose provider speaks ``wire``: blank text,
    no image, tool call or result, and no reasoning that format sends alone (chat completions
    send none; Anthropic's Messages API sends only a kept server-tool or compaction block, as
    thinking cannot end an assistant message; a provider of its own format, any)."""
    content = message.content
    if (content and not content.isspace()) or message.role == "tool" or message.images or message.tool_calls:
        return False
    return not any(_sent_alone(t, wire) for t in message.thinking)


def _sent_alone(thinking: Thinking, wire: str | None) -> bool:
    if wire == "openai":
        return False
    if wire == "anthropic":
        return thinking.provider == "anthropic" and thinking.kind == "block"
    return True
