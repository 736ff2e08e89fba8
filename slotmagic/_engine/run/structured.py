"""Reading a reply against its schema (structured output): the value, or one line saying what
does not match. A reply a provider gave as its forced tool's call (Anthropic) is made the reply's
text first, so it is stored, shown and replayed like any other."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..._core.schema import ResponseSchema
from ...providers._base import Completion
from ...tools._validate import errors_of

__all__ = ["answered", "read_reply"]


def answered(completion: Completion, schema: ResponseSchema | None) -> Completion:
    """``completion`` with a call of the schema's tool (how Anthropic answers a forced tool)
    made its text: the arguments are the answer. Other calls beside it are dropped (the answer
    ends the turn)."""
    if schema is None:
        return completion
    message = completion.message
    call = next((c for c in message.tool_calls if c.name == schema.name), None)
    if call is None:
        return completion
    text = call.arguments.strip() or "{}"  # the answer alone: text before it was the model thinking aloud
    return replace(completion, message=replace(message, content=text, tool_calls=()))


def read_reply(text: str, schema: ResponseSchema | None) -> tuple[Any, str | None]:
    """(the value, None), or (None, what does not match: one line)."""
    if schema is None:
        return None, None
    body = _json_part(text)
    if schema.model is not None:
        try:
            return schema.model.model_validate_json(body), None
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            errors = getattr(exc, "errors", None)
            first = errors()[0] if callable(errors) and errors() else None
            if first is not None:
                where = ".".join(str(p) for p in first.get("loc", ())) or "the reply"
                return None, _line(schema, f"{where}: {first.get('msg', 'invalid')}")
            return None, _line(schema, str(exc).splitlines()[0])
    try:
        value = json.loads(body)
    except ValueError as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return None, _line(schema, f"it is not JSON ({detail})")
    problems = errors_of(value, schema.schema)
    if problems:  # said of a tool's arguments: here it is the reply's
        first = problems[0]
        return None, _line(schema, first[len("argument ") :] if first.startswith("argument ") else first)
    return value, None


def _json_part(text: str) -> str:
    """The JSON of a reply: as it is, or inside the one fenced block a model wrapped it in."""
    stripped = text.strip()
    if stripped.startswith("```"):
        inner = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return inner.rsplit("```", 1)[0].strip()
    return stripped


def _line(schema: ResponseSchema, what: str) -> str:
    what = " ".join(what.split())
    return f"the reply does not match schema {schema.name}: {what[:300]}; reply.parsed is None, the reply is stored"
