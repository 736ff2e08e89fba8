"""Running tool calls: arguments checked against the schema, exceptions and refusals as error
results the model reads, return values as text, sync tools off the event loop, async tools
from sync code, interrupts never swallowed; and registries scoped session / slot / turn."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import math
import os
import re
import signal
import sys
import threading
import time
from typing import Any, Literal

import pytest

from slotmagic import ConfigError, Message, Tool, ToolCall, ToolRegistry, ToolResult, tool
from slotmagic.providers import ToolSpec


class Unit(enum.Enum):
    C = "c"
    F = "f"


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry(label="test")
    calls: list[Any] = []

    @tool(registry=registry)
    def get_weather(city: str, unit: Unit = Unit.C, days: list[int] | None = None) -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: The city's name.
            unit: Celsius or Fahrenheit.
            days: Days ahead.
        """
        calls.append((city, unit, days))
        if city == "Atlantis":
            raise LookupError("no such city:\n  'Atlantis'")
        return {"city": city, "unit": unit.value, "days": days}

    @tool(registry=registry)
    async def slow_echo(text: str, delay: float = 0.0) -> str:
        """Echo text after a delay."""
        await asyncio.sleep(delay)
        return text

    registry.calls = calls  # type: ignore[attr-defined]
    return registry


def call(name: str, arguments: str = "{}", call_id: str = "call_1") -> ToolCall:
    return ToolCall(call_id, name, arguments)


DEEP = "the arguments nest lists and objects more than 100 levels deep"


def run_both(registry: ToolRegistry, c: ToolCall) -> ToolResult:
    """The result through run_sync, checked to be the same through await run."""
    result = registry.run_sync(c)
    assert asyncio.run(registry.run(c)) == result
    return result


# -- arguments ---------------------------------------------------------------------------------------


def test_a_valid_call(registry: ToolRegistry) -> None:
    result = run_both(registry, call("get_weather", '{"city": "Oslo", "unit": "f", "days": [1, 2.0]}'))
    assert result == ToolResult("call_1", "get_weather", '{"city": "Oslo", "unit": "f", "days": [1, 2]}')
    assert registry.calls[-1] == ("Oslo", Unit.F, [1, 2])  # type: ignore[attr-defined]  # an Enum, ints


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ('{"city": 3}', "argument 'city' must be a string, not 3"),
        ("{}", "missing required argument 'city'"),
        ('{"city": "Oslo", "town": "Oslo"}', "unknown argument 'town' (the arguments are: city, unit, days)"),
        ('{"city": "Oslo", "unit": "k"}', 'argument \'unit\' must be one of "c", "f", not "k"'),
        ('{"city": "Oslo", "days": [1, "two"]}', "argument 'days'[1] must be a whole number, not \"two\""),
        ('{"city": "Oslo", "days": 1.5}', "argument 'days' must be a list or null, not 1.5"),
        ('{"city": "Oslo"', "the arguments are not valid JSON (Expecting ',' delimiter)"),
        ('["Oslo"]', "the arguments must be a JSON object, not list"),
        ('{"city": true}', "argument 'city' must be a string, not true"),
        # nested deeper than Python's parser goes, or than checking them can
        pytest.param('{"city": ' + "[" * 100_000 + "]" * 100_000 + "}", DEEP, id="nested-100000"),
        pytest.param('{"city": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}", DEEP, id="nested-500"),
    ],
)
def test_arguments_that_do_not_fit_are_refused(registry: ToolRegistry, arguments: str, why: str) -> None:
    result = run_both(registry, call("get_weather", arguments))
    assert result.is_error and result.content == f"error: get_weather was not run: {why}"
    assert registry.calls == []  # type: ignore[attr-defined]  # the function was not called


def test_empty_arguments_mean_none(registry: ToolRegistry) -> None:
    assert (
        run_both(registry, call("slow_echo", "")).content
        == "error: slow_echo was not run: missing required argument 'text'"
    )

    @tool(registry=registry)
    def now() -> str:
        """The time."""
        return "noon"

    assert run_both(registry, call("now", "")) == ToolResult("call_1", "now", "noon")


def test_a_hand_written_schema() -> None:
    def total(numbers: list[float]) -> float:
        return sum(numbers)

    schema = {
        "type": "object",
        "properties": {"numbers": {"type": "array", "items": {"type": "number"}, "minItems": 1}},
        "required": ["numbers"],
    }
    registry = ToolRegistry([Tool("sum", "Add numbers up.", schema, total)])
    assert registry.specs() == [ToolSpec("sum", "Add numbers up.", schema)]
    assert run_both(registry, call("sum", '{"numbers": [1, 2.5]}')).content == "3.5"
    assert run_both(registry, call("sum", '{"numbers": ["x"]}')).content == (
        "error: sum was not run: argument 'numbers'[0] must be a number, not \"x\""
    )


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"x": schema}}


@pytest.mark.parametrize(
    ("parameters", "why"),
    [
        (["city"], "must be a JSON schema dict, not list"),
        ("{'type': 'object'}", "must be a JSON schema dict, not str"),
        ({"properties": {"city": {"type": "string"}}}, 'type must be "object"'),
        ({"type": "array"}, 'type must be "object"'),
        ({"type": "object", "properties": ["city"]}, "properties must be a dict of schemas"),
        ({"type": "object", "properties": {"city": "string"}}, "parameters['city'] must be a schema"),
        ({"type": "object", "properties": {"city": {"type": "strng"}}}, "type 'strng' is not a JSON schema type"),
        ({"type": "object", "properties": {"n": {"type": 5}}}, "type 5 is not a JSON schema type"),
        ({"type": "object", "properties": {}, "required": "city"}, "required must be a list of property names"),
        ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "required names 'b'"),
        ({"type": "object", "properties": {"u": {"enum": "c"}}}, "enum must be a non-empty list"),
        ({"type": "object", "properties": {"u": {"anyOf": {"type": "string"}}}}, "anyOf must be a non-empty list"),
        ({"type": "object", "properties": {"x": {"type": "number", "maximum": math.inf}}}, "must be plain JSON"),
        ({"type": "object", "properties": {"x": {"default": {1, 2}}}}, "must be plain JSON"),
        ({"type": "object", "properties": {"x": {"type": "array", "items": "string"}}}, "items must be a schema"),
        (deep(40), "nests more than 32 levels deep"),
    ],
)
def test_a_hand_written_schema_that_no_turn_could_use_is_refused_when_made(parameters: Any, why: str) -> None:
    """Such a schema was taken as it was, and the first turn offering the tool failed raw
    (TypeError, ValueError: not JSON compliant) or was refused by the API."""
    with pytest.raises(ConfigError, match=re.escape(why)) as raised:
        Tool("lookup", "Looks things up.", parameters, lambda **kwargs: "found")
    assert str(raised.value).startswith("tool 'lookup': ") and "\n" not in str(raised.value)
    with pytest.raises(ConfigError, match="the description must be a string"):
        Tool("lookup", None, {"type": "object"}, lambda: "found")  # type: ignore[arg-type]


def test_positional_only_parameters(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    def power(base: float, exponent: int = 2, /) -> float:
        """base ** exponent."""
        return base**exponent

    assert run_both(registry, call("power", '{"base": 3}')).content == "9.0"
    assert run_both(registry, call("power", '{"base": 2, "exponent": 3}')).content == "8.0"

    @tool(registry=registry)
    def span(start: int = 0, stop: int = 10, /, step: int = 1) -> list[int]:
        """range(start, stop, step)."""
        return list(range(start, stop, step))

    assert run_both(registry, call("span", '{"stop": 3}')).content == "[0, 1, 2]"  # start: its default
    assert run_both(registry, call("span", '{"step": 4}')).content == "[0, 4, 8]"


# -- what comes back -----------------------------------------------------------------------------------


def test_an_exception_is_an_error_result_on_one_line(registry: ToolRegistry) -> None:
    result = run_both(registry, call("get_weather", '{"city": "Atlantis"}'))
    assert result == ToolResult(
        "call_1", "get_weather", "error: get_weather raised LookupError: no such city: 'Atlantis'", is_error=True
    )
    assert "Traceback" not in result.content


def test_a_long_error_message_is_cut(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    def chatty() -> None:
        """Fails at length."""
        raise RuntimeError("x" * 5000)

    content = run_both(registry, call("chatty")).content
    assert content.startswith("error: chatty raised RuntimeError: xxx") and len(content) < 600


class MessageRaises(Exception):
    def __str__(self) -> str:
        raise ValueError("no message")


class OwnBaseException(BaseException):
    pass


def raise_(exception: BaseException) -> Any:
    raise exception


@pytest.mark.parametrize(
    ("exception", "content"),
    [
        (StopIteration("the end"), "error: raiser raised StopIteration: the end"),
        (StopAsyncIteration(), "error: raiser raised StopAsyncIteration: (no message)"),
        (GeneratorExit("closed"), "error: raiser raised GeneratorExit: closed"),
        (OwnBaseException("mine"), "error: raiser raised OwnBaseException: mine"),
        (MessageRaises(), "error: raiser raised MessageRaises: (its message cannot be shown: ValueError)"),
        (ValueError("lone \ud800 surrogate"), "error: raiser raised ValueError: lone \\ud800 surrogate"),
    ],
)
def test_whatever_a_tool_raises_is_an_error_result(exception: BaseException, content: str) -> None:
    """Sync and async tools, run from sync and async code: each comes back as the same error
    result, never raised, and never a hang (an asyncio future refuses a StopIteration: the
    task awaiting a sync tool's thread waited forever)."""

    def raiser() -> str:
        raise exception

    async def araiser() -> str:
        raise exception

    for function in (raiser, araiser):
        registry = ToolRegistry([Tool.from_function(function, name="raiser")])
        c = call("raiser")
        expected = ToolResult("call_1", "raiser", content, is_error=True)
        if function is araiser and isinstance(exception, StopIteration):  # a coroutine may not raise it
            expected = ToolResult(
                "call_1", "raiser", "error: raiser raised RuntimeError: coroutine raised StopIteration", True
            )
        assert registry.run_sync(c) == expected
        assert asyncio.run(asyncio.wait_for(registry.run(c), 10)) == expected
        Message.tool(c.id, expected.content, "raiser", is_error=True)  # it can be stored


def test_a_lone_surrogate_in_a_result_is_an_error_result(registry: ToolRegistry) -> None:
    registry.add(lambda: "caf\udce9 au lait", name="decoded", description="Decoded with surrogateescape.")
    registry.add(lambda: {"name": "\ud83d"}, name="halved", description="An emoji cut in half.")
    first = run_both(registry, call("decoded"))
    assert first.is_error and first.content.startswith(
        "error: decoded returned text that is not valid Unicode: a lone surrogate '\\udce9' at character 3 "
    )
    assert run_both(registry, call("halved")).content.startswith(
        "error: halved returned text that is not valid Unicode: a lone surrogate '\\ud83d' at character 10 "
    )


def test_an_unknown_tool_is_an_error_result(registry: ToolRegistry) -> None:
    result = run_both(registry, call("get_wether"))
    assert result == ToolResult(
        "call_1", "get_wether", "error: there is no tool 'get_wether'; the tools are: get_weather, slow_echo", True
    )
    assert run_both(ToolRegistry(), call("x")).content == "error: there is no tool 'x'; no tools are available"


@dataclasses.dataclass
class Reading:
    city: str
    when: datetime.date


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text\nkept as is", "plain text\nkept as is"),
        ({"a": [1, 2.5, None, True]}, '{"a": [1, 2.5, null, true]}'),
        (["Grüße", "世界"], '["Grüße", "世界"]'),
        (42, "42"),
        (None, "null"),
        (Reading("Oslo", datetime.date(2025, 1, 2)), '{"city": "Oslo", "when": "2025-01-02"}'),
        (Unit.F, '"f"'),
        ({3, 1, 2}, "[1, 2, 3]"),
        (Opaque(), "<Opaque thing>"),
        (b"\x00", "b'\\x00'"),
    ],
)
def test_return_values_as_text(registry: ToolRegistry, value: Any, text: str) -> None:
    registry.add(lambda: value, name="give", description="Gives a value.")
    assert run_both(registry, call("give")) == ToolResult("call_1", "give", text)


def test_a_value_that_cannot_be_shown(registry: ToolRegistry) -> None:
    class Broken:
        def __repr__(self) -> str:
            raise ValueError("no repr")

    registry.add(lambda: Broken(), name="broken", description="Breaks.")
    result = run_both(registry, call("broken"))
    assert (
        result.is_error and result.content == "error: broken returned a Broken that cannot be shown as text (no repr)"
    )


def test_a_result_as_the_tool_message(registry: ToolRegistry) -> None:
    assert ToolResult("c1", "f", "error: x", True).to_message() == Message.tool("c1", "error: x", "f", is_error=True)
    assert ToolResult("c1", "f", "ok").to_message() == Message.tool("c1", "ok", "f")


# -- sync and async ----------------------------------------------------------------------------------


def test_a_sync_tool_runs_off_the_event_loop(registry: ToolRegistry) -> None:
    """The tool blocks until the loop has run a task: on the loop's own thread it never would."""
    seen: list[int] = []
    looped = threading.Event()

    @tool(registry=registry)
    def block() -> str:
        """Block a thread until the event loop has run."""
        seen.append(threading.get_ident())
        return "done" if looped.wait(10) else "the loop stood still"

    async def main() -> ToolResult:
        async def tick() -> None:
            await asyncio.sleep(0)
            looped.set()

        ticker = asyncio.create_task(tick())
        result = await registry.run(call("block"))
        await ticker
        return result

    result = asyncio.run(main())
    assert result.content == "done" and seen[0] != threading.get_ident()


def test_async_tools_run_concurrently(registry: ToolRegistry) -> None:
    """Each call waits until all three have begun: run one at a time, the first would wait
    out its 10 s and say so."""

    async def main() -> list[ToolResult]:
        begun: list[str] = []
        everyone = asyncio.Event()

        @tool(registry=registry)
        async def meet(text: str) -> str:
            """Waits for the others."""
            begun.append(text)
            if len(begun) == 3:
                everyone.set()
            try:
                await asyncio.wait_for(everyone.wait(), 10)
            except TimeoutError:
                return f"{text} alone"
            return text

        calls = [call("meet", f'{{"text": "{t}"}}', f"c{t}") for t in "abc"]
        return list(await asyncio.gather(*(registry.run(c) for c in calls)))

    results = asyncio.run(main())
    assert [r.content for r in results] == ["a", "b", "c"] and [r.call_id for r in results] == ["ca", "cb", "cc"]


def test_an_async_tool_from_sync_code_inside_a_running_loop(registry: ToolRegistry) -> None:
    """A Jupyter kernel runs cells inside an event loop: asyncio.run() would refuse there."""

    async def cell() -> ToolResult:
        return registry.run_sync(call("slow_echo", '{"text": "from a cell"}'))

    assert asyncio.run(cell()).content == "from a cell"


# -- interrupts are never swallowed ----------------------------------------------------------------------


@pytest.mark.parametrize("exception", [KeyboardInterrupt, SystemExit])
def test_interrupts_propagate_from_sync_tools(registry: ToolRegistry, exception: type[BaseException]) -> None:
    @tool(registry=registry)
    def interrupted() -> str:
        """Gets interrupted."""
        raise exception

    with pytest.raises(exception):
        registry.run_sync(call("interrupted"))
    with pytest.raises(exception):
        asyncio.run(registry.run(call("interrupted")))


def test_keyboard_interrupt_propagates_from_an_async_tool(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    async def interrupted() -> str:
        """Gets interrupted."""
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        registry.run_sync(call("interrupted"))


def test_cancelling_the_task_cancels_the_tool(registry: ToolRegistry) -> None:
    finished: list[str] = []

    @tool(registry=registry)
    async def long_wait() -> str:
        """Waits long."""
        try:
            await asyncio.sleep(30)
        finally:
            finished.append("cleaned up")
        return "never"

    async def main() -> None:
        task = asyncio.create_task(registry.run(call("long_wait")))
        await asyncio.sleep(0.05)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert finished == ["cleaned up"]


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT delivered to the main thread")
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_ctrl_c_while_an_async_tool_runs_from_a_notebook_cell(registry: ToolRegistry) -> None:
    """Ctrl-C in the kernel while an async tool runs on its own loop in a worker thread: the
    interrupt is raised in the cell and the tool's coroutine is cancelled."""
    finished: list[str] = []

    @tool(registry=registry)
    async def long_wait() -> str:
        """Waits long."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            finished.append("cancelled")
            raise
        finished.append("ran to the end")  # the interrupt waited for the tool
        return "never"

    async def cell() -> None:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        registry.run_sync(call("long_wait"))

    # A kernel's loop, as ipykernel runs it: Python's own SIGINT handler raises in the cell.
    # (asyncio.run would install a handler of its own that only cancels its main task.)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        signal.signal(signal.SIGINT, previous)
        loop.close()
    deadline = time.monotonic() + 60
    while not finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert finished == ["cancelled"]


# -- registries --------------------------------------------------------------------------------------


def test_a_session_scope_sees_the_default_live_and_changes_only_itself(registry: ToolRegistry) -> None:
    session = registry.scope("session")

    @tool(registry=registry)  # decorated later, in the parent
    def late(x: int) -> int:
        """Arrives late."""
        return x

    assert session.names() == ("get_weather", "slow_echo", "late")
    session.remove("slow_echo")

    @tool(registry=session)
    def get_weather(city: str) -> str:
        """The session's own weather."""
        return "sunny"

    assert session.names() == ("get_weather", "late")
    assert session.get("get_weather").description == "The session's own weather."
    assert registry.names() == ("get_weather", "slow_echo", "late")  # the parent is untouched
    assert registry.get("get_weather").description == "Current weather for a city."
    assert session.own() == ("get_weather",) and session.removed() == ("slow_echo",)
    assert session.run_sync(call("slow_echo", '{"text": "x"}')).content == (
        "error: there is no tool 'slow_echo'; the tools are: get_weather, late"
    )
    session.add(registry.get("slow_echo"))  # back, from the parent
    assert "slow_echo" in session
    session.remove("get_weather")  # its own one, and the parent's below it
    assert "get_weather" not in session and "get_weather" in registry


def test_a_selection_offers_and_runs_only_its_tools(registry: ToolRegistry) -> None:
    slot = registry.scope("session").select(["slow_echo"])
    assert [s.name for s in slot.specs()] == ["slow_echo"]
    assert slot.run_sync(call("slow_echo", '{"text": "hi"}')).content == "hi"
    assert slot.run_sync(call("get_weather", '{"city": "Oslo"}')).content == (
        "error: there is no tool 'get_weather'; the tools are: slow_echo"
    )
    with pytest.raises(ConfigError, match="selection of tools, which cannot be changed"):
        slot.add(lambda: 1, name="one")
    assert registry.select(None) is registry


def test_specs_for_names(registry: ToolRegistry) -> None:
    specs = registry.specs(["slow_echo", "get_weather", "slow_echo"])
    assert [s.name for s in specs] == ["slow_echo", "get_weather"]
    assert specs[1] == registry.get("get_weather").spec()
    assert specs[1].parameters["required"] == ["city"]
    assert [s.name for s in registry.specs()] == ["get_weather", "slow_echo"]
    assert registry.specs([]) == []


def test_unknown_names_are_one_line_with_a_suggestion(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigError, match=r"^no tool 'get_wether' in the test tools; did you mean 'get_weather'\?$"):
        registry.specs(["get_wether"])
    with pytest.raises(
        ConfigError, match=r"^no tools 'a', 'b' in the test tools; the tools are: get_weather, slow_echo$"
    ):
        registry.select(["a", "b", "slow_echo"])
    with pytest.raises(ConfigError, match="no tool 'nothing'"):
        registry.remove("nothing")
    with pytest.raises(ConfigError, match=r"no tool 'x'; there are no tools yet; define one with @slotmagic\.tool"):
        ToolRegistry().get("x")
    assert registry.missing(["slow_echo", "gone", "gone"]) == ("gone",)


def test_clear_and_repr(registry: ToolRegistry) -> None:
    session = registry.scope()
    session.remove("get_weather")
    session.add(lambda: 1, name="one", description="One.")
    assert repr(session) == "<ToolRegistry: slow_echo, one>"
    session.clear()
    assert session.names() == registry.names() and repr(registry) == "<ToolRegistry test: get_weather, slow_echo>"


def test_literal_and_defaults_reach_the_function(registry: ToolRegistry) -> None:
    @tool(registry=registry)
    def convert(value: float, to: Literal["c", "f"] = "c", digits: int | None = None) -> str:
        """Convert a temperature."""
        return f"{value}->{to}:{digits}"

    assert run_both(registry, call("convert", '{"value": 3}')).content == "3.0->c:None"
    assert run_both(registry, call("convert", '{"value": 3, "to": "f", "digits": 2.0}')).content == "3.0->f:2"


def test_deep_arguments_are_shown_as_sent() -> None:
    """A tool step's line shows arguments as ``city="Oslo"``; nested too deep, as sent."""
    from slotmagic._engine.run.loop import _compact

    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert _compact(deep) == deep and _compact('{"city": "Oslo"}') == 'city="Oslo"'


def test_an_error_quoting_a_secret_of_the_environment_is_redacted(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library's error may quote a key; the result is stored and sent to the model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-abcdefghijklmnopqrstuvwxyz")
    monkeypatch.setenv("SERVICE_TOKEN", "tok-1234567890-planted")
    monkeypatch.setenv("EDITOR", "a-long-enough-editor-name")  # not named as a secret: kept

    @tool(registry=registry)
    def leaky() -> str:
        """Fails quoting the environment."""
        raise RuntimeError(
            "auth failed for sk-planted-abcdefghijklmnopqrstuvwxyz and tok-1234567890-planted "
            "(editor a-long-enough-editor-name)"
        )

    content = run_both(registry, call("leaky")).content
    assert "planted" not in content and "abcdefghijklmnop" not in content
    assert content.count("[redacted]") == 2 and "a-long-enough-editor-name" in content


def test_an_error_quoting_a_secret_cut_short_is_redacted(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server may echo part of a key: a word holding a long enough piece of it goes too."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-abcdefghijklmnopqrstuvwxyz")

    @tool(registry=registry)
    def cut_short() -> str:
        """Fails quoting the key cut short."""
        raise RuntimeError("unknown key 'sk-planted-abcdefghij…' (shown in part)")

    content = run_both(registry, call("cut_short")).content
    assert "abcdefghij" not in content and "[redacted]" in content and "shown in part" in content


def test_which_environment_variables_are_secrets() -> None:
    from slotmagic._core.secrets import environment_secrets

    environ = {
        "OPENAI_API_KEY": "sk-0123456789",
        "ANTHROPIC_API_KEY": "sk-ant-0123456789",
        "GITHUB_TOKEN": "ghp_0123456789",
        "AWS_SECRET_ACCESS_KEY": "aws-0123456789",
        "PGPASSWORD": "pg-0123456789",
        "MY_PASSWORD": "pw-0123456789",
        "HOME": "/home/someone/long",
        "KEYBOARD_LAYOUT": "us-international",
        "SHORT_TOKEN": "1",  # too short to be a secret worth redacting
    }
    assert sorted(environment_secrets(environ)) == sorted(
        ["sk-0123456789", "sk-ant-0123456789", "ghp_0123456789", "aws-0123456789", "pg-0123456789", "pw-0123456789"]
    )
