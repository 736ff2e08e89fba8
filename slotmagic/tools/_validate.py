"""Checking a tool call's arguments against its JSON schema, saying in one line what is wrong.

The keywords checked are the ones :mod:`.schema` writes, which are also what hand-written tool
schemas mostly use: ``type`` (one or a list), ``enum``, ``const``, ``anyOf``/``oneOf``,
``properties``, ``required``, ``additionalProperties`` (``false`` or a schema) and ``items``.
Other keywords (``minimum``, ``pattern``, ``format`` ...) are not checked: the function sees the
value and may refuse it itself. A whole validator library (jsonschema and its dependencies)
would check those too, for a tool schema slotmagic mostly writes itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TYPE_NAMES = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "array": "a list",
    "object": "an object",
}


_MAX_DEPTH = 32  # levels of nested schemas a tool's parameters may have


def schema_problem(parameters: object) -> str | None:
    """What is wrong with a tool's parameters schema, in one line (None: nothing): what both
    APIs take (a JSON object schema, sent as JSON) and what :func:`errors_of` reads (each
    keyword of its own shape). A schema written by hand is checked when the tool is made, not
    when a turn fails on it."""
    if not isinstance(parameters, Mapping):
        return f"the parameters must be a JSON schema dict, not {type(parameters).__name__}"
    try:
        json.dumps(parameters, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the parameters must be plain JSON (dicts, lists, strings, finite numbers, booleans, null): {exc}"
    if parameters.get("type") != "object":
        return f'the parameters\' type must be "object" (both APIs require it), not {parameters.get("type")!r}'
    return _subschema_problem(parameters, "parameters", 0)


def _subschema_problem(schema: object, where: str, depth: int) -> str | None:
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, Mapping):
        return f"{where} must be a schema (a dict), not {type(schema).__name__}"
    if depth > _MAX_DEPTH:
        return f"{where} nests more than {_MAX_DEPTH} levels deep"
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        unknown = [k for k in kinds if k not in _TYPE_NAMES]
        if not kinds or unknown:
            shown = repr(unknown[0]) if unknown else "[]"
            return f"{where}: type {shown} is not a JSON schema type ({', '.join(_TYPE_NAMES)})"
    for key in ("enum", "anyOf", "oneOf", "allOf"):
        if key in schema and (not isinstance(schema[key], list) or not schema[key]):
            return f"{where}: {key} must be a non-empty list"
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return f"{where}: properties must be a dict of schemas, not {type(properties).__name__}"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"{where}: required must be a list of property names"
    missing = [r for r in required if r not in properties] if "properties" in schema else []
    if missing:
        return f"{where}: required names {missing[0]!r}, which is not among its properties"
    parts: list[tuple[object, str]] = [(v, f"{where}[{k!r}]") for k, v in properties.items()]
    for key in ("anyOf", "oneOf", "allOf"):
        parts += [(option, f"{where}.{key}[{i}]") for i, option in enumerate(schema.get(key) or ())]
    for key in ("items", "additionalProperties"):
        if key in schema:
            parts.append((schema[key], f"{where}.{key}"))
    for part, there in parts:
        found = _subschema_problem(part, there, depth + 1)
        if found:
            return found
    return None


def errors_of(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """What makes ``value`` invalid against ``schema`` (empty when it is valid); each error
    names where, as ``path`` (``'city'``, ``'cities'[2]``) when there is one."""
    if not isinstance(schema, Mapping):  # `true` / `false` schemas
        return [] if schema is not False else [f"{_where(path)}is not allowed"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            per_option = [errors_of(value, option, path) for option in options]
            if all(per_option):
                # the option of the value's own type says best what is wrong inside it
                same = [f for f, o in zip(per_option, options, strict=True) if _of_type(value, o)]
                if len(same) == 1:
                    return same[0]
                expected = " or ".join(_expected(option) for option in options)
                return [f"{_where(path)}must be {expected}, not {_shown(value)}"]
    kind = schema.get("type")
    if kind is not None:
        kinds: list[str] = kind if isinstance(kind, list) else [kind]
        if not any(_is(value, k) for k in kinds):
            return [f"{_where(path)}must be {' or '.join(_TYPE_NAMES.get(k, k) for k in kinds)}, not {_shown(value)}"]
    if "const" in schema and not _equal(value, schema["const"]):
        return [f"{_where(path)}must be {schema['const']!r}, not {_shown(value)}"]
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        options = ", ".join(_json_repr(o) for o in schema["enum"])
        return [f"{_where(path)}must be one of {options}, not {_shown(value)}"]
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            found = errors_of(item, schema["items"], f"{path or 'item'}[{i}]")
            if found:
                return found
    if isinstance(value, dict):
        return _object_errors(value, schema, path)
    return []


def _object_errors(value: dict[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    top = not path
    missing = [name for name in schema.get("required") or () if name not in value]
    if missing:
        what = "argument" if top else f"key in {path}"
        return [f"missing required {what}{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"]
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = f"argument {name!r}" if top else f"{path}[{name!r}]"
        if name in properties:
            found = errors_of(item, properties[name], where)
        elif extra is False:
            known = ", ".join(properties) or "none"
            what = "argument" if top else f"key in {path}"
            return [f"unknown {what} {name!r} (the {'arguments' if top else 'keys'} are: {known})"]
        elif isinstance(extra, Mapping):
            found = errors_of(item, extra, where)
        else:
            found = []
        if found:
            return found
    return []


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True  # a type this checker does not know: not its to refuse


def _of_type(value: Any, schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    kinds: list[str] = kind if isinstance(kind, list) else [kind] if kind else []
    return any(_is(value, k) for k in kinds)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _expected(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "anything"
    if "enum" in schema:
        return "one of " + ", ".join(_json_repr(o) for o in schema["enum"])
    kind = schema.get("type")
    kinds: list[str] = kind if isinstance(kind, list) else [kind] if kind else []
    return " or ".join(_TYPE_NAMES.get(k, k) for k in kinds) or "a value of another shape"


def _where(path: str) -> str:
    return f"{path} " if path else ""


def _shown(value: Any) -> str:
    text = _json_repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _json_repr(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)
