"""A function's JSON schema, from its type hints and its docstring.

Each parameter's annotation becomes a :class:`Shape`: the JSON schema the model is shown and
a converter that turns a validated JSON value into what the function expects (an ``Enum``
member, a ``tuple``, an ``int`` from ``3.0``). Supported:

    str, int, float, bool, None, Any
    Literal["a", "b", 1]                  {"enum": [...]} (with "type" when all share one)
    an Enum (str or int values)            {"type": "string", "enum": [values]}
    list[T], tuple[T, ...]                 {"type": "array", "items": T}
    dict[str, T]                           {"type": "object", "additionalProperties": T}
    T | None, Optional[T], T | U           {"anyOf": [T, U]}
    Annotated[T, "a description"]          T, described

A parameter with a default is not required (its default shown when it is JSON); one without
is. The docstring's first paragraph describes the tool; its Google-style ``Args:`` section
describes the parameters. Anything else is refused with one ``ConfigError`` saying which
parameter and what to write instead.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError

SUPPORTED = "str, int, float, bool, Literal[...], an Enum, list[T], dict[str, T], T | None or Any"

Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Shape:
    """What a parameter's annotation means on the wire: a JSON schema, and how to turn a value
    valid against it into the Python value the function takes."""

    schema: dict[str, Any]
    convert: Convert = _same
    description: str | None = None  # from Annotated[T, "..."]


class Unsupported(Exception):
    """An annotation with no JSON schema here; the message says which part."""


_NULL: dict[str, Any] = {"type": "null"}
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def shape_of(annotation: Any) -> Shape:
    """The :class:`Shape` of a type annotation, or ``Unsupported``."""
    if annotation is Any:
        return Shape({})
    if annotation is None or annotation is type(None):
        return Shape(dict(_NULL))
    if annotation in _SCALARS:
        kind = _SCALARS[annotation]
        if annotation is int:
            return Shape({"type": kind}, int)  # 3.0 is a valid integer on the wire
        if annotation is float:
            return Shape({"type": kind}, float)
        return Shape({"type": kind})
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_shape(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = shape_of(args[0])
        text = next((a for a in args[1:] if isinstance(a, str)), None)
        return Shape(inner.schema, inner.convert, text.strip() if text else inner.description)
    if origin is typing.Literal:
        return _literal_shape(args)
    if origin is typing.Union or origin is types.UnionType:
        return _union_shape(args)
    if annotation is list or origin is list:
        return _list_shape(args[0] if args else Any, list)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _list_shape(args[0], tuple)
        raise Unsupported(f"{_name(annotation)} (write tuple[T, ...] or list[T])")
    if annotation is dict or origin is dict or origin is Mapping:
        key, value = args if args else (str, Any)
        if key is not str:
            raise Unsupported(f"{_name(annotation)} (JSON object keys are strings: write dict[str, T])")
        inner = shape_of(value)
        return Shape(
            {"type": "object", "additionalProperties": inner.schema},
            lambda v: {k: inner.convert(x) for k, x in v.items()},
        )
    raise Unsupported(_name(annotation))


def _enum_shape(cls: type[enum.Enum]) -> Shape:
    values = [m.value for m in cls]
    kinds = {_JSON_TYPES.get(type(v)) for v in values}
    if not values or None in kinds or len(kinds) != 1 or kinds & {"boolean", "number"}:
        raise Unsupported(f"the Enum {cls.__name__} (its values must all be strings, or all whole numbers)")
    return Shape({"type": kinds.pop(), "enum": values}, cls)


def _literal_shape(values: tuple[Any, ...]) -> Shape:
    kinds = set()
    for v in values:
        if v is not None and type(v) not in _JSON_TYPES:
            raise Unsupported(f"Literal[{', '.join(map(repr, values))}] (its values must be str, int, float or bool)")
        kinds.add("null" if v is None else _JSON_TYPES[type(v)])
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return Shape(schema)


def _union_shape(members: tuple[Any, ...]) -> Shape:
    shapes = [shape_of(m) for m in members if m is not type(None)]
    nullable = len(shapes) < len(members)
    schemas = [s.schema for s in shapes] + ([dict(_NULL)] if nullable else [])
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    description = next((s.description for s in shapes if s.description), None)
    if all(s.convert is _same for s in shapes):
        return Shape(schema, _same, description)
    from ._validate import errors_of  # the member a value fits says how to convert it

    def convert(value: Any) -> Any:
        if value is None and nullable:
            return None
        for shape in shapes:
            if not errors_of(value, shape.schema):
                return shape.convert(value)
        return value

    return Shape(schema, convert, description)


def _list_shape(item: Any, container: Callable[[Any], Any]) -> Shape:
    inner = shape_of(item)
    schema = {"type": "array", "items": inner.schema} if inner.schema else {"type": "array"}
    return Shape(schema, lambda v: container(inner.convert(x) for x in v))


def _name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


# -- a whole function --------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    name: str
    shape: Shape
    required: bool
    positional_only: bool
    default: Any = None  # when not required


@dataclass(frozen=True)
class FunctionSchema:
    """What :func:`function_schema` reads from a function."""

    description: str
    parameters: dict[str, Any]  # the JSON schema of its arguments: an object
    params: tuple[Parameter, ...]


def function_schema(function: Callable[..., Any], tool_name: str) -> FunctionSchema:
    """The description and the JSON schema of ``function``'s parameters; ``ConfigError`` (one
    line, naming ``tool_name`` and the parameter) for anything that has none."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        raise ConfigError(f"tool {tool_name!r}: cannot read the parameters of {function!r}") from None
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, and the like
        raise ConfigError(f"tool {tool_name!r}: its type hints cannot be read ({type(exc).__name__}: {exc})") from None
    summary, documented = parse_docstring(inspect.getdoc(function))
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Parameter] = []
    for p in signature.parameters.values():
        where = f"tool {tool_name!r}, parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise ConfigError(f"{where}: {star}{p.name} cannot be described to a model; name each parameter")
        if p.name not in hints:
            raise ConfigError(f"{where} has no type annotation; annotate it, e.g. {p.name}: str ({SUPPORTED})")
        try:
            shape = shape_of(hints[p.name])
        except Unsupported as exc:
            raise ConfigError(f"{where}: {exc} is not supported; use {SUPPORTED}") from None
        schema = dict(shape.schema)
        has_default = p.default is not p.empty
        if has_default and p.default is None and not _admits_null(schema):
            shape = _nullable(shape)  # `x: int = None`: null means "not given"
            schema = dict(shape.schema)
        description = documented.pop(p.name, None) or shape.description
        if description:
            schema = {"description": description, **schema}
        if has_default:
            shown = p.default.value if isinstance(p.default, enum.Enum) else p.default
            if _is_json(shown):
                schema["default"] = shown
        else:
            required.append(p.name)
        properties[p.name] = schema
        default = p.default if has_default else None
        params.append(Parameter(p.name, shape, not has_default, p.kind is p.POSITIONAL_ONLY, default))
    if documented:
        names = ", ".join(repr(n) for n in documented)
        raise ConfigError(
            f"tool {tool_name!r}: its docstring's Args section describes {names}, which the function does not take"
        )
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    return FunctionSchema(summary, parameters, tuple(params))


def _admits_null(schema: Mapping[str, Any]) -> bool:
    if not schema or schema.get("type") == "null":
        return True
    if None in schema.get("enum", ()):
        return True
    return any(_admits_null(s) for s in schema.get("anyOf", ()))


def _nullable(shape: Shape) -> Shape:
    schema = {"anyOf": [*shape.schema["anyOf"], dict(_NULL)]} if "anyOf" in shape.schema else None
    schema = schema or {"anyOf": [shape.schema, dict(_NULL)]}
    convert = shape.convert
    return Shape(schema, lambda v: None if v is None else convert(v), shape.description)


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# -- docstrings --------------------------------------------------------------------------------

_SECTION = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|"
    r"Examples?|Notes?|Attributes|Todo|Warnings?|See Also|References)\s*:\s*\Z"
)
_ARGS = ("Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments")
_ENTRY = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)\Z")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(the first paragraph, on one line; {parameter: description} from Google-style ``Args:``
    sections). ``doc`` is as :func:`inspect.getdoc` gives it: dedented."""
    if not doc:
        return "", {}
    lines = doc.expandtabs().splitlines()
    paragraph: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        paragraph.append(line.strip())
    described: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _SECTION.match(lines[i].strip())
        # a docstring that opens with its header (Args: on the first line) has
        # its entries dedented to the header's level by inspect.getdoc
        indent = _indent(lines[i]) if i else -1
        i += 1
        if not header or header.group(1) not in _ARGS:
            continue
        entry_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            depth = _indent(line)
            if depth <= indent:
                break  # the section ended: another header, or prose
            if entry_indent is None:
                entry_indent = depth
            entry = _ENTRY.match(line.strip()) if depth <= entry_indent else None
            if entry:
                current = entry.group(1)
                described[current] = entry.group(2).strip()
            elif current is not None:
                described[current] = f"{described[current]} {line.strip()}".strip()
            i += 1
    return " ".join(paragraph), described


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
