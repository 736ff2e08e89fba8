"""A reply's schema (structured output): what the model's reply must be, as a JSON schema.

``submit_turn(..., schema=Answer)`` takes a pydantic model class, a JSON schema (a dict whose
root is an object) or a :class:`ResponseSchema`. Each wire sends it its own way (OpenAI's
``response_format`` of type ``json_schema``, strict; Anthropic's forced tool; Ollama's ``format``
through its OpenAI-compatible endpoint), and the engine reads the reply against it
(:mod:`slotmagic._engine.run.structured`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigError

__all__ = ["ResponseSchema", "strict_schema"]

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")


@dataclass(frozen=True, eq=False)
class ResponseSchema:
    """``name`` (what the APIs call it), ``schema`` (its JSON schema, an object at the root),
    and the pydantic ``model`` it was made from, if any, which reads the reply into an instance."""

    name: str
    schema: Mapping[str, Any]
    description: str = ""
    model: Any = field(default=None, repr=False)

    @classmethod
    def of(cls, value: object) -> ResponseSchema:
        """A pydantic model class, a JSON schema dict or a ``ResponseSchema`` as one; ConfigError
        in one line for anything else, or a schema whose root is not an object."""
        if isinstance(value, ResponseSchema):
            return value
        if isinstance(value, type) and callable(getattr(value, "model_json_schema", None)):
            schema = value.model_json_schema()  # type: ignore[attr-defined]
            doc = (value.__doc__ or "").strip()
            return cls(_name(value.__name__), _object(schema, value.__name__), doc.split("\n\n")[0], value)
        if isinstance(value, Mapping):
            try:
                schema = json.loads(json.dumps(value, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"schema must be plain JSON (dicts, lists, strings, numbers): {exc}") from None
            title = schema.get("title")
            name = _name(title) if isinstance(title, str) and title.strip() else "reply"
            description = schema.get("description") if isinstance(schema.get("description"), str) else ""
            return cls(name, _object(schema, name), description)
        raise ConfigError(
            f"schema must be a pydantic model class or a JSON schema dict, not {type(value).__name__} {value!r:.60}"
        )

    def strict(self) -> dict[str, Any]:
        """The schema in the form OpenAI's strict mode takes (see :func:`strict_schema`)."""
        return strict_schema(self.schema)

    def digest(self) -> str:
        """What changes when the model would be asked for something else (replay compares it)."""
        import hashlib

        text = json.dumps({"name": self.name, "schema": self.schema}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResponseSchema) and self.digest() == other.digest()

    def __hash__(self) -> int:
        return hash(self.digest())


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as OpenAI's strict structured outputs take it: every object closed
    (``additionalProperties: false`` unless it says otherwise) with every property required (a
    property with a default becomes required: the model states it), in ``$defs`` too; a
    ``default`` of null dropped, a ``$ref`` with other keywords beside it resolved in place and
    a single ``allOf`` merged (the API takes neither)."""
    root = copy.deepcopy(dict(schema))

    def strict(node: dict[str, Any]) -> dict[str, Any]:
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                node[key] = {name: strict(d) if isinstance(d, dict) else d for name, d in node[key].items()}
        if node.get("type") == "object" and "additionalProperties" not in node:
            node["additionalProperties"] = False
        if isinstance(node.get("properties"), dict):
            node["required"] = list(node["properties"])
            node["properties"] = {k: strict(v) if isinstance(v, dict) else v for k, v in node["properties"].items()}
        if isinstance(node.get("items"), dict):
            node["items"] = strict(node["items"])
        if isinstance(node.get("anyOf"), list):
            node["anyOf"] = [strict(v) if isinstance(v, dict) else v for v in node["anyOf"]]
        if isinstance(node.get("allOf"), list):
            if len(node["allOf"]) == 1 and isinstance(node["allOf"][0], dict):
                node.update(strict(node.pop("allOf")[0]))
            else:
                node["allOf"] = [strict(v) if isinstance(v, dict) else v for v in node["allOf"]]
        if "default" in node and node["default"] is None:
            del node["default"]
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:
            resolved = _resolve(root, ref)
            node.update({**resolved, **node})
            del node["$ref"]
            return strict(node)
        return node

    return strict(root)


def _resolve(root: Mapping[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ConfigError(f"schema: a $ref must point inside the schema (#/$defs/...), not {ref!r:.60}")
    found: Any = root
    for key in ref[2:].split("/"):
        found = found.get(key) if isinstance(found, Mapping) else None
    if not isinstance(found, Mapping):
        raise ConfigError(f"schema: $ref {ref!r:.60} points at nothing")
    return copy.deepcopy(dict(found))


def _name(text: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", text.strip())[:64] or "reply"
    return name if _NAME.match(name) else "reply"


def _object(schema: Any, name: str) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ConfigError(
            f"schema {name!r}: its root must be an object ({{'type': 'object', 'properties': ...}}), as the APIs "
            "require; wrap a list or a value in an object with one property"
        )
    return schema
