"""A tool: a Python function, its JSON schema, and running one call of it.

:meth:`Tool.run` (async) and :meth:`Tool.run_sync` turn a :class:`ToolCall` into a
:class:`ToolResult`, and only ever return one: arguments that are not JSON, or do not match the
schema, are refused; an exception the function raises becomes an error result (its type and
message on one line, no traceback), whatever it is (``StopIteration``, ``GeneratorExit``, a
``BaseException`` of its own, one whose message cannot be shown); a return value becomes text
(text that is not valid Unicode, a lone surrogate, is an error result too). The turn goes on,
and the model reads what went wrong. ``KeyboardInterrupt``, ``SystemExit`` and task
cancellation are not caught: they end the turn, which stores nothing.

A sync function runs in a worker thread when called from async code (so the event loop stays
free); an async function called from sync code runs on an event loop of its own (in a thread
when the calling thread already runs one, as in a Jupyter kernel).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import inspect
import json
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .._core.checks import deeper_than
from .._core.messages import Message, ToolCall
from .._core.request import ToolSpec
from .._core.secrets import redact_all
from .._errors import ConfigError, exception_text
from ._schema import FunctionSchema, Parameter, function_schema
from ._validate import errors_of, schema_problem

if TYPE_CHECKING:
    import asyncio  # imported where used: `import slotmagic` stays free of it

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# What both APIs accept as a tool's name.
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")
MAX_ARGUMENT_DEPTH = 100  # levels of nested lists and objects a call's arguments may have


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call: ``content`` is what the model is sent as the result."""

    call_id: str
    name: str
    content: str
    is_error: bool = False

    def to_message(self) -> Message:
        """The ``tool`` message that answers the call."""
        return Message.tool(self.call_id, self.content, self.name, is_error=self.is_error)


class ArgumentsRefused(Exception):
    """The call's arguments cannot be used; the message says why, in one line."""


class Tool(Generic[P, R]):
    """A function the model may call, with its name, description and JSON schema.

    Made by :func:`slotmagic.tool` (or :meth:`from_function`), it is still the function:
    calling it calls the function. A tool with a schema written by hand is
    ``Tool(name, description, parameters, function)``: the schema is checked when the tool is
    made (a JSON object schema whose keywords have their shapes, ``ConfigError`` otherwise), and
    a call's arguments are checked against it and passed as keyword arguments.
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        function: Callable[P, R],
        *,
        _params: tuple[Parameter, ...] | None = None,
    ) -> None:
        if not isinstance(name, str) or not NAME.match(name):
            raise ConfigError(
                f"tool name {name!r} must be 1-64 letters, digits, '_' or '-' (both APIs require it); "
                "pass name= to choose one"
            )
        if not callable(function):
            raise ConfigError(f"tool {name!r}: {function!r} is not a function")
        if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
            raise ConfigError(f"tool {name!r}: a generator cannot be a tool; return the whole result")
        if not isinstance(description, str):
            raise ConfigError(f"tool {name!r}: the description must be a string, not {type(description).__name__}")
        problem = schema_problem(parameters)
        if problem is not None:
            raise ConfigError(f"tool {name!r}: {problem}")
        self.name = name
        self.description = description
        self.parameters: Mapping[str, Any] = parameters
        self.function: Callable[P, R] = function
        self.is_async = inspect.iscoroutinefunction(function)
        self._params = _params
        functools.update_wrapper(self, function)  # __name__, __doc__, __wrapped__ ...

    @classmethod
    def from_function(
        cls, function: Callable[P, R], *, name: str | None = None, description: str | None = None
    ) -> Tool[P, R]:
        """A tool from ``function``'s type hints and docstring (see :mod:`.schema`)."""
        if isinstance(function, Tool):
            function = function.function
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(tool_name, str) or not NAME.match(tool_name):
            raise ConfigError(
                f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-' (both APIs require it); "
                "pass name= to choose one: @tool(name='...')"
            )
        schema: FunctionSchema = function_schema(function, tool_name)
        text = description if description is not None else schema.description
        return cls(tool_name, text, schema.parameters, function, _params=schema.params)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def _calling(self, function: Callable[..., T]) -> Tool[..., T]:
        """This tool's name, description and schema (checked when it was made, not again)
        calling ``function`` instead: a built-in tool made for each turn (a closure over that
        turn) from one definition worked out once per process."""
        if not callable(function):
            raise ConfigError(f"tool {self.name!r}: {function!r} is not a function")
        tool: Tool[..., T] = object.__new__(Tool)
        tool.name, tool.description, tool.parameters = self.name, self.description, self.parameters
        tool.function = function
        tool.is_async = inspect.iscoroutinefunction(function)
        tool._params = self._params
        functools.update_wrapper(tool, function)
        return tool

    def spec(self) -> ToolSpec:
        """What a request says about this tool."""
        return ToolSpec(self.name, self.description, self.parameters)

    def __repr__(self) -> str:
        kind = "async tool" if self.is_async else "tool"
        try:
            shown = str(inspect.signature(self.function, eval_str=True))
        except Exception:  # hints that do not resolve: shown as written
            try:
                shown = str(inspect.signature(self.function))
            except (TypeError, ValueError):
                shown = "(...)"
        return f"<{kind} {self.name}{shown}>"

    # -- one call ------------------------------------------------------------------------------

    def arguments(self, call: ToolCall) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments as (positional, keyword) arguments of the function, checked
        against the schema; ``ArgumentsRefused`` saying what is wrong otherwise."""
        text = call.arguments.strip() if call.arguments else ""
        too_deep = f"the arguments nest lists and objects more than {MAX_ARGUMENT_DEPTH} levels deep"
        try:
            value = json.loads(text) if text else {}
        except ValueError as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise ArgumentsRefused(f"the arguments are not valid JSON ({detail})") from None
        except RecursionError:  # deeper than Python's own parser goes
            raise ArgumentsRefused(too_deep) from None
        if deeper_than(value, MAX_ARGUMENT_DEPTH):  # checking and converting them recurse
            raise ArgumentsRefused(too_deep)
        if not isinstance(value, dict):
            raise ArgumentsRefused(f"the arguments must be a JSON object, not {type(value).__name__}")
        errors = errors_of(value, self.parameters)
        if errors:
            raise ArgumentsRefused(errors[0])
        if self._params is None:
            return [], value
        positional: list[Any] = []
        keyword: dict[str, Any] = {}
        for p in self._params:
            if p.name not in value:
                if p.positional_only:
                    positional.append(p.default)  # a later positional-only argument may follow
                continue
            try:
                converted = p.shape.convert(value[p.name])
            except (TypeError, ValueError) as exc:
                raise ArgumentsRefused(f"argument {p.name!r} cannot be used ({exception_text(exc)})") from None
            if p.positional_only:
                positional.append(converted)
            else:
                keyword[p.name] = converted
        return positional, keyword

    async def run(self, call: ToolCall) -> ToolResult:
        """Run one call, awaiting an async function or running a sync one in a worker thread."""
        try:
            args, kwargs = self.arguments(call)
        except ArgumentsRefused as exc:
            return self._refused(call, str(exc))
        value: Any
        try:
            if self.is_async:
                value = await self.function(*args, **kwargs)  # type: ignore[misc]
            else:
                import asyncio

                value = await asyncio.to_thread(_in_a_thread, self.function, args, kwargs)
                if inspect.isawaitable(value):  # a callable object whose __call__ is async
                    value = await value
        except _Raised as raised:
            return self._raised(call, raised.exception)
        except BaseException as exc:
            if ends_the_turn(exc):
                raise
            return self._raised(call, exc)
        return self._result(call, value)

    def run_sync(self, call: ToolCall) -> ToolResult:
        """Run one call in this thread (an async function on an event loop of its own)."""
        try:
            args, kwargs = self.arguments(call)
        except ArgumentsRefused as exc:
            return self._refused(call, str(exc))
        value: Any
        try:
            if self.is_async:
                value = run_coroutine(lambda: self.function(*args, **kwargs))  # type: ignore[arg-type, return-value]
            else:
                value = self.function(*args, **kwargs)
                if inspect.isawaitable(value):
                    awaitable = value
                    value = run_coroutine(lambda: awaitable)
        except BaseException as exc:
            if ends_the_turn(exc):
                raise
            return self._raised(call, exc)
        return self._result(call, value)

    def _refused(self, call: ToolCall, why: str) -> ToolResult:
        return error_result(call, f"{self.name} was not run: {why}")

    def _raised(self, call: ToolCall, exc: BaseException) -> ToolResult:
        return error_result(call, f"{self.name} raised {type(exc).__name__}: {exception_text(exc)}")

    def _result(self, call: ToolCall, value: Any) -> ToolResult:
        try:
            content = result_text(value)
        except BaseException as exc:
            if ends_the_turn(exc):
                raise
            return error_result(
                call,
                f"{self.name} returned a {type(value).__name__} that cannot be shown as text ({exception_text(exc)})",
            )
        bad = _lone_surrogate(content)
        if bad is not None:
            return error_result(
                call,
                f"{self.name} returned text that is not valid Unicode: a lone surrogate {content[bad]!r} at "
                f"character {bad:,} (text read with errors='surrogateescape' or cut inside a character?)",
            )
        return ToolResult(call.id, self.name, content)


class _Raised(Exception):
    """Carries what a tool raised out of its worker thread, as a plain exception: an asyncio
    future refuses a ``StopIteration`` (the task awaiting the thread would wait forever), and
    a ``GeneratorExit`` out of one passes by every ``except`` of the coroutines awaiting it."""

    def __init__(self, exception: BaseException) -> None:
        super().__init__()
        self.exception = exception


def _in_a_thread(function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return function(*args, **kwargs)
    except BaseException as exc:
        if ends_the_turn(exc):
            raise
        raise _Raised(exc) from None


def ends_the_turn(exc: BaseException) -> bool:
    """Whether an exception out of a tool ends the turn (an interrupt, an exit, the task
    cancelled) rather than being the tool's error the model reads."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return True
    asyncio = sys.modules.get("asyncio")  # not imported: nothing can have been cancelled
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


def _lone_surrogate(text: str) -> int | None:
    """Where the first lone surrogate in ``text`` is (None: it is valid Unicode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


# -- results as text ---------------------------------------------------------------------------


def result_text(value: Any) -> str:
    """A return value as the text the model reads: a string as it is, anything else as JSON
    (dataclasses, pydantic models, enums, dates, sets and paths too), else its ``repr``."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=_to_json)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)  # pydantic
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def error_result(call: ToolCall, text: str, name: str | None = None) -> ToolResult:
    """An error result for ``call``: ``error: ...`` on one line (a lone surrogate in it shown
    as its escape, ``\\ud800``: the result is stored and sent as UTF-8), the environment's
    secrets redacted (a library's error may quote a key, and the result is stored and sent)."""
    line = " ".join(redact_all(text).split()).encode("utf-8", "backslashreplace").decode("utf-8")
    return ToolResult(call.id, name or call.name, f"error: {line}", is_error=True)


# -- async code from sync code -----------------------------------------------------------------


def run_coroutine(make: Callable[[], Awaitable[T]]) -> T:
    """Await ``make()`` from sync code: with ``asyncio.run`` when this thread runs no event loop,
    else on a loop of its own in a worker thread (a Jupyter kernel's thread runs one). An
    interrupt while waiting cancels the coroutine and is raised here."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coroutine(make))
    loop = asyncio.new_event_loop()
    outcome: dict[str, Any] = {}
    started = threading.Event()
    task: list[asyncio.Task[T]] = []

    def work() -> None:
        try:
            asyncio.set_event_loop(loop)
            task.append(loop.create_task(_as_coroutine(make)))
            started.set()
            outcome["value"] = loop.run_until_complete(task[0])
        except BaseException as exc:  # handed to the waiting thread, raised there
            outcome["error"] = exc
        finally:
            started.set()
            loop.close()

    worker = threading.Thread(target=work, name="slotmagic-tool", daemon=True)
    worker.start()
    try:
        worker.join()
    except BaseException:
        started.wait()
        if task:
            with suppress(RuntimeError):  # the loop closed meanwhile: the coroutine is done
                loop.call_soon_threadsafe(task[0].cancel)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


async def _as_coroutine(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


__all__ = [
    "ArgumentsRefused",
    "Tool",
    "ToolResult",
    "error_result",
    "exception_text",
    "result_text",
    "run_coroutine",
]
