"""A reply's schema on each wire (structured output, :mod:`slotmagic._core.schema`).

- OpenAI Chat Completions: ``response_format: {"type": "json_schema", "json_schema": {"name",
  "schema", "strict": true}}``, the schema in its strict form;
- Ollama, through its OpenAI-compatible endpoint: the same field, not strict (Ollama hands the
  schema to its ``format``, which constrains decoding);
- Anthropic Messages: a tool named after the schema whose input is the answer, forced with
  ``tool_choice: {"type": "tool"}`` (``{"type": "any"}`` when other tools are offered, so the
  model may call them first; ``auto`` with extended thinking, which refuses a forced choice).
  The engine makes that tool's call the reply's text (``_engine/run/structured.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.schema import ResponseSchema

__all__ = ["anthropic_schema_tool", "anthropic_tool_choice", "response_format"]


def response_format(schema: ResponseSchema, *, strict: bool = True) -> dict[str, Any]:
    """Chat Completions' ``response_format`` for ``schema``."""
    made: dict[str, Any] = {"name": schema.name, "schema": schema.strict() if strict else dict(schema.schema)}
    if schema.description:
        made["description"] = schema.description
    made["strict"] = strict
    return {"type": "json_schema", "json_schema": made}


def anthropic_schema_tool(schema: ResponseSchema) -> dict[str, Any]:
    """The tool whose input is the answer."""
    description = schema.description or f"Give your answer as {schema.name}."
    return {"name": schema.name, "description": description, "input_schema": dict(schema.schema)}


def anthropic_tool_choice(schema: ResponseSchema, *, others: bool, thinking: Any) -> dict[str, Any]:
    """Forced to the schema's tool; ``any`` beside other tools; ``auto`` with thinking on."""
    if isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive"):
        return {"type": "auto"}
    return {"type": "any"} if others else {"type": "tool", "name": schema.name}
