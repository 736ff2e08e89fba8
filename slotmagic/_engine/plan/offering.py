"""The tools a turn offers: its choice (or its slot's) over the session's tools, the servers'
tools, the opt-in built-ins, and the readers a view needs (``read_namespace``, ``recall``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..._core.slots import Slot
from ..._errors import ConfigError
from ..._namespace import Namespace, has_reference
from ..._store.base import Store
from ...tools import Tool, ToolRegistry
from ..run.reading import PageRoom, read_namespace_tool, recall_tool
from ..view.view import View

if TYPE_CHECKING:
    from ...tools._mcp import McpServers

OPT_IN = frozenset(("read_variable",))  # built-in tools offered only when named


class ToolSources(Protocol):
    """Where a turn's tools come from (a :class:`~slotmagic._engine.run.turn.TurnEngine`'s):
    named here so that this module, which the engine uses, does not import the engine."""

    @property
    def store(self) -> Store: ...
    @property
    def session_id(self) -> str: ...
    @property
    def namespace(self) -> Namespace: ...
    @property
    def tools(self) -> ToolRegistry: ...
    @property
    def mcp(self) -> McpServers | None: ...
    @property
    def optional_tools(self) -> Mapping[str, Tool[..., Any]]: ...
    @property
    def slot_tools(self) -> Callable[[Slot, View], list[Tool[..., Any]]] | None: ...


def turn_tools(
    engine: ToolSources,
    slot: Slot,
    names: tuple[str, ...] | None,
    view: View,
    room: PageRoom | None = None,
    reader: Tool[..., str] | None = None,
    also: tuple[str, ...] = (),
) -> ToolRegistry | None:
    """The tools a turn offers: the turn's names, else the slot's, else every tool of the
    session, of its MCP servers and the slot's own (its working context's); and unless the turn
    asked for no tools, ``read_namespace`` whenever a reference is in the view (a result kept
    aside, or a summary naming one) and ``recall`` whenever a compaction folded part of it away.
    None when there are none (the request then carries no tools at all). An opt-in tool
    (``optional_tools``) is offered when ``also`` or the chosen names name it. A name may be an
    MCP server's selector (``time.*``, ``git.log``) or one of its tools' names."""
    chosen = names if names is not None else slot.config.tools
    served: list[Tool[..., Any]] = []  # MCP servers' tools (tools/_mcp.py), chosen like the others
    picked = chosen
    if engine.mcp is not None and len(engine.mcp) and chosen != ():
        registry = engine.tools
        rest, served = engine.mcp.offered(chosen, lambda name: name in registry or name in OPT_IN)
        picked = None if rest is None else tuple(rest)
    optional = [_optional(engine, name) for name in dict.fromkeys((*(picked or ()), *also)) if name in OPT_IN]
    if picked is not None:
        picked = tuple(name for name in picked if name not in OPT_IN)
    selected = engine.tools if picked is None else engine.tools.select(picked)
    tools = list(selected.tools()) if picked is None else [selected.get(name) for name in dict.fromkeys(picked)]
    tools += optional + served
    offering = picked != () or bool(served)  # the built-in readers too, unless no tools were chosen
    if offering and has_reference(view.messages):
        tools.append(reader if reader is not None else read_namespace_tool(engine.namespace, room))
    if offering and view.compaction is not None:
        tools.append(
            recall_tool(engine.store, engine.session_id, slot.id, view.compaction.upto + view.compaction.later, room)
        )
    if chosen is None and engine.slot_tools is not None:
        tools.extend(engine.slot_tools(slot, view))
    unique: dict[str, Tool[..., Any]] = {}
    for tool in tools:
        unique.setdefault(tool.name, tool)  # a name the user gave a tool of their own wins
    return ToolRegistry(unique.values(), label=f"turn on slot {slot.id!r}") if unique else None


def _optional(engine: ToolSources, name: str) -> Tool[..., Any]:
    found = engine.optional_tools.get(name)
    if found is None:
        raise ConfigError(
            f"{name} reads a kernel's variables: it is offered in a notebook (%load_ext slotmagic), "
            "or after session.options.allow_variables(namespace); nothing was sent"
        )
    return found
