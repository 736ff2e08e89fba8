"""Python functions as tools a model can call.

    import slotmagic

    @slotmagic.tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
        \"\"\"Current weather for a city.

        Args:
            city: The city's name, e.g. "Oslo".
            unit: Degrees Celsius or Fahrenheit.
        \"\"\"
        ...

The decorator is all it takes in a notebook: the tool joins :data:`default_registry` (a cell
run again replaces it), and the function stays callable as before. Its schema comes from the
type hints and the docstring (:mod:`.schema`); :class:`ToolRegistry` scopes tools per session,
slot or turn; :meth:`ToolRegistry.run` turns a model's :class:`~slotmagic._core.messages.ToolCall`
into a :class:`ToolResult`, never raising for anything the model or the tool got wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload

from .._core.repair import NOT_RUN, repair_tool_pairs
from ._mcp import McpServers, McpTool
from ._mcp_server import ServerDown
from ._registry import ToolRegistry, default_registry
from ._tool import Tool, ToolResult, result_text

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "NOT_RUN",
    "McpServers",
    "McpTool",
    "ServerDown",
    "Tool",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
    "repair_tool_pairs",
    "result_text",
    "tool",
]


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, registry: ToolRegistry | None = None
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    registry: ToolRegistry | None = None,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a tool and add it to ``registry`` (the process's
    :data:`default_registry` unless given), replacing any tool of that name there.

    ``@tool`` or ``@tool(name="...", description="...")``. The name defaults to the function's,
    the description to its docstring's first paragraph. Sync and async functions alike. An
    annotation with no JSON schema is refused here, with one ``ConfigError``.
    """

    def make(fn: Callable[P, R]) -> Tool[P, R]:
        made: Tool[P, R] = Tool.from_function(fn, name=name, description=description)
        (registry if registry is not None else default_registry).add(made)
        return made

    return make(function) if function is not None else make
