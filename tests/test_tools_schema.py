"""@slotmagic.tool: a function's JSON schema from its type hints and docstring, refused in one
line where there is none, and the function still callable as before."""

from __future__ import annotations

import asyncio
import enum
import inspect
import warnings
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Optional, Union

import pytest

import slotmagic
from slotmagic import ConfigError, Tool, ToolRegistry, default_registry, tool
from slotmagic.providers import ToolSpec
from slotmagic.tools._schema import parse_docstring


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry()


@pytest.fixture
def clean_default() -> Iterator[None]:
    """Tests that decorate into the process's default registry leave it as they found it."""
    before = set(default_registry.own())
    yield
    for name in set(default_registry.own()) - before:
        default_registry.remove(name)


def schema_of(function: Any) -> dict[str, Any]:
    return dict(Tool.from_function(function).parameters)


def prop(annotation: Any) -> dict[str, Any]:
    """The schema of one required parameter annotated ``annotation``."""

    def f(x):  # type: ignore[no-untyped-def]
        pass

    f.__annotations__ = {"x": annotation}
    return schema_of(f)["properties"]["x"]  # type: ignore[no-any-return]


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (Literal["c", "f"], {"type": "string", "enum": ["c", "f"]}),
        (Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]}),
        (Literal["auto", 0], {"enum": ["auto", 0]}),
        (Unit, {"type": "string", "enum": ["c", "f"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict, {"type": "object", "additionalProperties": {}}),
        (str | None, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045 (the old spelling, on purpose)
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
        (
            list[dict[str, list[int]]],
            {
                "type": "array",
                "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
            },
        ),
        (Annotated[str, "The city's name"], {"description": "The city's name", "type": "string"}),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_each_kind_of_annotation(annotation: Any, schema: dict[str, Any]) -> None:
    assert prop(annotation) == schema


def test_defaults_are_not_required_and_are_shown() -> None:
    def search(query: str, limit: int = 10, unit: Unit = Unit.C, tags: list[str] | None = None, *, exact: bool = False):  # type: ignore[no-untyped-def]
        pass

    assert schema_of(search) == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_a_none_default_admits_null() -> None:
    def f(n: int = None):  # type: ignore[assignment, no-untyped-def]  # noqa: RUF013 (the sloppy spelling, on purpose)
        pass

    assert schema_of(f)["properties"]["n"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}


def test_no_parameters() -> None:
    def now() -> str:
        """The time."""
        return "noon"

    made = Tool.from_function(now)
    assert made.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert made.spec() == ToolSpec("now", "The time.", made.parameters)


# -- docstrings --------------------------------------------------------------------------------------


def test_the_first_paragraph_describes_and_args_describe_the_parameters() -> None:
    def get_weather(city: str, unit: Literal["c", "f"] = "c", days: int = 1) -> str:
        """Current weather for a city,
        or a forecast.

        Uses the national weather service.

        Args:
            city: The city's name,
                e.g. "Oslo".
            unit (str): Degrees Celsius or
                Fahrenheit.

            days: How many days ahead.

        Returns:
            A one-line report.
        """
        return ""

    made = Tool.from_function(get_weather)
    assert made.description == "Current weather for a city, or a forecast."
    assert made.parameters["properties"] == {
        "city": {"description": 'The city\'s name, e.g. "Oslo".', "type": "string"},
        "unit": {"description": "Degrees Celsius or Fahrenheit.", "type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"description": "How many days ahead.", "type": "integer", "default": 1},
    }


@pytest.mark.parametrize(
    ("doc", "summary", "args"),
    [
        (None, "", {}),
        ("One line.", "One line.", {}),
        ("Args:\n    x: The x.", "", {"x": "The x."}),
        (
            "Do it.\n\nArguments:\n    x (int, optional): The x.\nRaises:\n    ValueError: never",
            "Do it.",
            {"x": "The x."},
        ),
        ("Do it.\n\nArgs:\n    *items: Things.\n    **extra: More.", "Do it.", {"items": "Things.", "extra": "More."}),
        ("Do it.\n\nArgs:\n    x: The x.\n\nMore prose after.", "Do it.", {"x": "The x."}),
    ],
)
def test_docstrings(doc: str | None, summary: str, args: dict[str, str]) -> None:
    assert parse_docstring(doc) == (summary, args)


def test_description_and_name_given() -> None:
    @tool(name="weather-now", description="Weather, now.", registry=ToolRegistry())
    def get_weather(city: str) -> str:
        """Docstring text."""
        return city

    assert (get_weather.name, get_weather.description) == ("weather-now", "Weather, now.")


# -- refused, in one line ------------------------------------------------------------------------------


class Point:
    pass


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x): pass", "parameter 'x' has no type annotation; annotate it, e.g. x: str"),
        ("def f(*xs: int): pass", "parameter 'xs': *xs cannot be described to a model"),
        ("def f(**kw: int): pass", "parameter 'kw': **kw cannot be described to a model"),
        ("def f(p: Point): pass", "parameter 'p': Point is not supported; use str, int"),
        ("def f(d: dict[int, str]): pass", "JSON object keys are strings: write dict[str, T]"),
        ("def f(t: tuple[int, str]): pass", "write tuple[T, ...] or list[T]"),
        ("def f(s: set[int]): pass", "parameter 's': set[int] is not supported"),
        ("def f(m: Mixed): pass", "the Enum Mixed (its values must all be strings, or all whole numbers)"),
        ("def f(x: int):\n    '''Args:\n        y: a typo'''", "its docstring's Args section describes 'y'"),
        ("def f(x: 'Missing'): pass", "its type hints cannot be read (NameError"),
    ],
)
def test_unsupported_functions_are_refused_at_decoration(source: str, message: str) -> None:
    class Mixed(enum.Enum):
        A = "a"
        B = 2

    namespace: dict[str, Any] = {"Point": Point, "Mixed": Mixed}
    exec(source, namespace)
    with pytest.raises(ConfigError) as caught:
        tool(registry=ToolRegistry())(namespace["f"])
    text = str(caught.value)
    assert message in text and "\n" not in text and text.startswith("tool 'f'")


@pytest.mark.parametrize("name", ["has space", "", "x" * 65, "dotted.name"])
def test_names_both_apis_refuse(name: str) -> None:
    with pytest.raises(ConfigError, match="must be 1-64 letters, digits"):
        tool(name=name, registry=ToolRegistry())(lambda: None)


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ConfigError, match=r"'<lambda>' must be .*pass name="):
        tool(registry=ToolRegistry())(lambda: None)
    made = tool(name="noop", registry=ToolRegistry())(lambda: None)
    assert made.name == "noop"


def test_generators_are_refused() -> None:
    def numbers() -> Iterator[int]:
        yield 1

    with pytest.raises(ConfigError, match="a generator cannot be a tool"):
        tool(registry=ToolRegistry())(numbers)


# -- the decorator ------------------------------------------------------------------------------------


def test_the_function_stays_callable_as_before(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    @tool(registry=registry)
    async def later(x: str) -> str:
        """Echo, later."""
        await asyncio.sleep(0)
        return x

    assert add(1) == 3 and add(1, b=5) == 6
    assert asyncio.run(later("hi")) == "hi"
    assert (add.__name__, add.__doc__, add.__wrapped__.__name__) == ("add", "Add two numbers.", "add")  # type: ignore[attr-defined]
    assert str(inspect.signature(add, eval_str=True)) == "(a: int, b: int = 2) -> int"
    assert (add.is_async, later.is_async) == (False, True)
    assert repr(add) == "<tool add(a: int, b: int = 2) -> int>" and repr(later).startswith("<async tool later(")
    assert registry.names() == ("add", "later")


@pytest.mark.usefixtures("clean_default")
def test_decorating_is_all_it_takes_and_a_rerun_cell_replaces_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @slotmagic.tool
        def lookup_word(word: str) -> str:
            """First version."""
            return "1"

        first = default_registry.get("lookup_word")

        @slotmagic.tool
        def lookup_word(word: str, lang: str = "en") -> str:  # type: ignore[no-redef]  # noqa: F811 (the cell, run again)
            """Second version."""
            return "2"

    assert first is not default_registry.get("lookup_word")
    assert default_registry.get("lookup_word").description == "Second version."
    assert default_registry.names().count("lookup_word") == 1
    assert capsys.readouterr() == ("", "")


def test_a_tool_decorated_again_takes_the_new_name(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    def ping() -> str:
        """Ping."""
        return "pong"

    renamed = tool(name="ping2", registry=registry)(ping)
    assert renamed.name == "ping2" and renamed() == "pong" and registry.names() == ("ping", "ping2")


def test_importing_slotmagic_does_not_load_asyncio() -> None:
    """The tools load asyncio when a call needs it, not with the package."""
    import subprocess
    import sys

    code = "import sys, slotmagic; print('asyncio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
