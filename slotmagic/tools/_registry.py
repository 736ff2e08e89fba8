"""Tool registries: which tools exist where, layered like scopes.

A :class:`ToolRegistry` holds tools by name. Registries layer: one made with ``parent=`` (or
``parent.scope()``) sees its parent's tools *live* (a tool decorated later in a notebook shows
up), adds its own over them (same name: its own wins) and can remove a parent's tool for
itself alone. :meth:`~ToolRegistry.select` gives a read-only view of some names only.
The intended layering:

    default_registry            every @tool of the process (a re-run cell replaces its tool)
      └── session registry      default_registry.scope(): the session's adds and removes
            └── a slot / a turn session_tools.select(enabled_names): what a request offers

The engine asks a registry (or a selection) for ``specs(names)`` to put in the request, and
runs each call with ``await registry.run(call)`` or ``registry.run_sync(call)``: a call to a
tool the registry does not show (unknown, removed, or outside the selection) gets an error
result naming the tools there are, like any other refused call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._core.messages import ToolCall
from .._core.request import ToolSpec
from .._errors import ConfigError, closest
from ._tool import Tool, ToolResult, error_result

AnyTool = Tool[..., Any]


class ToolRegistry:
    """Tools by name, over an optional ``parent`` registry (see the module docstring)."""

    def __init__(
        self, tools: Iterable[AnyTool | Callable[..., Any]] = (), *, parent: ToolRegistry | None = None, label: str = ""
    ) -> None:
        self.parent = parent
        self.label = label  # for repr and messages: "default", "session 'notes'", "slot 'a'"
        self._own: dict[str, AnyTool] = {}
        self._removed: set[str] = set()  # the parent's tools hidden here
        self._only: frozenset[str] | None = None  # a selection shows these names only
        self._lock = threading.RLock()
        for item in tools:
            self.add(item)

    # -- changing what is here ------------------------------------------------------------------

    def add(
        self, tool: AnyTool | Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> AnyTool:
        """Add a tool (a ``Tool``, or a function made into one); a tool of the same name here
        is replaced, silently (a notebook cell run again). Returns the tool added."""
        self._writable()
        if not isinstance(tool, Tool) or name is not None or description is not None:
            tool = Tool.from_function(tool, name=name, description=description)
        with self._lock:
            self._own[tool.name] = tool
            self._removed.discard(tool.name)
        return tool

    def remove(self, name: str) -> None:
        """Take ``name`` away here: this registry's own tool, and the parent's for this
        registry (and those below it) only. ``ConfigError`` when there is no such tool here."""
        self._writable()
        with self._lock:
            if name not in self._visible():
                raise ConfigError(self._unknown(name))
            self._own.pop(name, None)
            if self.parent is not None and name in self.parent:
                self._removed.add(name)

    def clear(self) -> None:
        """Forget this registry's own tools and removals (the parent's tools show again)."""
        self._writable()
        with self._lock:
            self._own.clear()
            self._removed.clear()

    def scope(self, label: str = "") -> ToolRegistry:
        """A new registry over this one: it sees these tools live, and its adds and removes
        stay its own."""
        return ToolRegistry(parent=self, label=label)

    def select(self, names: Iterable[str] | None) -> ToolRegistry:
        """A read-only view of ``names`` only (all of them when None): what a slot or a turn
        enables. ``ConfigError`` naming any that are not here."""
        if names is None:
            return self
        chosen = tuple(dict.fromkeys(names))
        self._check(chosen)
        view = ToolRegistry(parent=self, label=self.label)
        view._only = frozenset(chosen)
        return view

    # -- reading ------------------------------------------------------------------------------

    def get(self, name: str) -> AnyTool:
        """The tool called ``name``; ``ConfigError`` (with a suggestion) when there is none."""
        found = self._visible().get(name)
        if found is None:
            raise ConfigError(self._unknown(name))
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._visible()

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(list(self._visible().values()))

    def names(self) -> tuple[str, ...]:
        """The names of the tools here, parent's first, in the order they were added."""
        return tuple(self._visible())

    def tools(self) -> list[AnyTool]:
        return list(self._visible().values())

    def own(self) -> tuple[str, ...]:
        """The names of the tools added to this registry itself (not to its parent)."""
        with self._lock:
            return tuple(self._own)

    def removed(self) -> tuple[str, ...]:
        """The parent's tools this registry hides."""
        with self._lock:
            return tuple(sorted(self._removed))

    def missing(self, names: Iterable[str]) -> tuple[str, ...]:
        """Those of ``names`` that are not here (for previews: a slot enabling a tool this
        kernel has not defined yet)."""
        visible = self._visible()
        return tuple(n for n in dict.fromkeys(names) if n not in visible)

    def specs(self, names: Iterable[str] | None = None) -> list[ToolSpec]:
        """What a request offers: the named tools (in that order), or all of them when
        ``names`` is None. ``ConfigError`` naming any that are not here."""
        visible = self._visible()
        if names is None:
            return [t.spec() for t in visible.values()]
        chosen = tuple(dict.fromkeys(names))
        self._check(chosen)
        return [visible[n].spec() for n in chosen]

    # -- running calls -------------------------------------------------------------------------

    async def run(self, call: ToolCall) -> ToolResult:
        """Run one call (see :meth:`Tool.run`); an unknown tool is an error result."""
        tool = self._visible().get(call.name)
        if tool is None:
            return self._no_such_tool(call)
        return await tool.run(call)

    def run_sync(self, call: ToolCall) -> ToolResult:
        """Run one call in this thread (see :meth:`Tool.run_sync`); an unknown tool is an
        error result."""
        tool = self._visible().get(call.name)
        if tool is None:
            return self._no_such_tool(call)
        return tool.run_sync(call)

    # -- inside --------------------------------------------------------------------------------

    def _visible(self) -> dict[str, AnyTool]:
        base = self.parent._visible() if self.parent is not None else {}
        with self._lock:
            tools = {n: t for n, t in base.items() if n not in self._removed}
            tools.update(self._own)
        if self._only is not None:
            tools = {n: t for n, t in tools.items() if n in self._only}
        return tools

    def _writable(self) -> None:
        if self._only is not None:
            raise ConfigError(
                "this is a selection of tools, which cannot be changed; add or remove tools in the registry it was "
                "selected from"
            )

    def _check(self, names: Iterable[str]) -> None:
        missing = self.missing(names)
        if missing:
            raise ConfigError(self._unknown(missing[0]) if len(missing) == 1 else self._unknowns(missing))

    def _unknown(self, name: str) -> str:
        known = self.names()
        close = closest(name, known, cutoff=0.6)
        hint = f"did you mean {close!r}?" if close else _listing(known)
        return f"no tool {name!r}{self._where()}; {hint}"

    def _unknowns(self, names: tuple[str, ...]) -> str:
        return f"no tools {', '.join(map(repr, names))}{self._where()}; {_listing(self.names())}"

    def _where(self) -> str:
        return f" in the {self.label} tools" if self.label else ""

    def _no_such_tool(self, call: ToolCall) -> ToolResult:
        names = self.names()
        there = f"the tools are: {', '.join(names)}" if names else "no tools are available"
        return error_result(call, f"there is no tool {call.name!r}; {there}")

    def __repr__(self) -> str:
        names = ", ".join(self.names()) or "no tools"
        label = f" {self.label}" if self.label else ""
        return f"<ToolRegistry{label}: {names}>"


def _listing(names: tuple[str, ...]) -> str:
    return f"the tools are: {', '.join(names)}" if names else "there are no tools yet; define one with @slotmagic.tool"


default_registry = ToolRegistry(label="default")
"""Every ``@slotmagic.tool`` of this process, unless told ``registry=``; sessions see it
through a scope of their own."""
