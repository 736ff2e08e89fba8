"""MCP servers as a source of tools: their tools are :class:`~slotmagic.tools.Tool` values like
any ``@slotmagic.tool`` function, so the per-turn choice, the loop, parallel calls, errors the
model reads, results kept aside in the namespace store and the budget treat both alike.

    servers = McpServers({"time": {"command": "mcp-server-time"}})
    session = Session.open("notes", mcp=servers)       # or mcp={"time": {...}}
    session.submit_turn("What time is it in Oslo?")    # offers time_get_current_time, time_convert_time

A server's tool ``get_current_time`` is offered as ``time_get_current_time`` (a name both APIs
accept); a tool already named after its server keeps its name (git's ``git_log``). A turn chooses
with ``tools=["time.*", "git.log"]``: ``SERVER.PATTERN`` matches a server's tools by their own
names, with or without the server's prefix. A server starts when a turn first offers its tools
(or ``tools()`` asks), on a thread of its own, and stops at ``close()`` or when the process
exits. A replayed turn reads its stored reply and starts nothing.
"""

from __future__ import annotations

import atexit
import base64
import fnmatch
import json
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._core.messages import ToolCall
from .._errors import ConfigError
from ._mcp_config import ServerConfig, hide, server_config
from ._mcp_server import McpConnection, ServerDown
from ._tool import ArgumentsRefused, Tool, ToolResult, error_result
from ._validate import schema_problem

if TYPE_CHECKING:
    import mcp_types

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, remote: str) -> str:
    """The name a server's tool is offered under: ``SERVER_TOOL``, or the tool's own name when it
    already starts with the server's (``git_log`` of ``git``); characters APIs refuse become ``_``."""
    stem = remote if remote.startswith((f"{server}_", f"{server}-")) else f"{server}_{remote}"
    return _UNSAFE.sub("_", stem)[:64]


def short_name(server: str, remote: str) -> str:
    """A tool's name without its server's prefix (``log`` for git's ``git_log``)."""
    for prefix in (f"{server}_", f"{server}-"):
        if remote.startswith(prefix):
            return remote[len(prefix) :]
    return remote


class McpTool(Tool[..., str]):
    """One tool of an MCP server. Its calls go to the server; a result the server marks as an
    error, a server that is gone or slow, become error results the model reads."""

    def __init__(self, connection: McpConnection, remote: str, description: str, parameters: Mapping[str, Any]):
        self.connection = connection
        self.server = connection.config.name
        self.remote = remote
        super().__init__(tool_name(self.server, remote), description, parameters, self._call)

    def _call(self, **arguments: Any) -> str:  # for calling the tool by hand; turns use run / run_sync
        result = self.run_sync(ToolCall("call", self.name, json.dumps(arguments)))
        return result.content

    def run_sync(self, call: ToolCall) -> ToolResult:
        try:
            _, arguments = self.arguments(call)
        except ArgumentsRefused as exc:
            return error_result(call, f"{self.name} was not run: {exc}")
        try:
            result = self.connection.call(self.remote, arguments)
        except ServerDown as exc:
            return error_result(call, str(exc))
        text = hide(result_text(result), self.connection.secrets)
        if result.is_error:
            return error_result(call, f"{self.name} failed: {text}")
        return ToolResult(call.id, self.name, text)

    async def run(self, call: ToolCall) -> ToolResult:
        import asyncio

        return await asyncio.to_thread(self.run_sync, call)  # calls to servers run side by side

    def __repr__(self) -> str:
        return f"<MCP tool {self.name} ({self.server}: {self.remote})>"


def result_text(result: mcp_types.CallToolResult) -> str:
    """A tool result's content as the text the model reads: text as it is, other blocks named
    (an image's type and size, a resource's URI), structured content as JSON when there is no text."""
    import mcp_types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, (mcp_types.ImageContent, mcp_types.AudioContent)):
            kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
            size = len(base64.b64decode(block.data, validate=False)) if block.data else 0
            parts.append(f"[{kind}: {block.mime_type}, {size:,} bytes]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(
                f"[resource {block.uri}: {block.name}{' — ' + block.description if block.description else ''}]"
            )
        elif isinstance(block, mcp_types.EmbeddedResource):
            inner = block.resource
            if isinstance(inner, mcp_types.TextResourceContents):
                parts.append(inner.text)
            else:
                parts.append(f"[resource {inner.uri}: {inner.mime_type or 'data'}, {len(inner.blob) * 3 // 4:,} bytes]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(the tool returned nothing)"


class McpServers:
    """The MCP servers a kernel (or a session) uses, by name, each started on first use."""

    def __init__(self, servers: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._lock = threading.RLock()
        self._connections: dict[str, McpConnection] = {}
        self._notes: list[str] = []
        self._down: set[str] = set()  # servers that failed in this turn: not tried again in it
        self._exiting = False
        self._configured: set[str] = set()  # the names the last configure() gave
        self._made: dict[str, tuple[list[Any], list[McpTool]]] = {}  # server -> (its listing, the tools made of it)
        if servers is not None:
            self.configure(servers)

    # -- which servers -------------------------------------------------------------------------

    def add(self, name: str, config: Mapping[str, Any] | ServerConfig) -> None:
        """Add server ``name`` (a dict: ``command``/``args``/``env``/``cwd`` or ``url``/``headers``,
        and ``timeout``, ``call_timeout`` in seconds); the same name with another config replaces
        it (stopping the old one), with the same config changes nothing."""
        checked = config if isinstance(config, ServerConfig) else server_config(name, config)
        with self._lock:
            old = self._connections.get(name)
            if old is not None and old.config == checked:
                return
            self._connections[name] = McpConnection(checked)
        if old is not None:
            old.close()
        self._on_exit()

    def remove(self, name: str) -> None:
        """Stop server ``name`` and forget it."""
        with self._lock:
            connection = self._connections.pop(self._known(name))
        connection.close()

    def configure(self, servers: Mapping[str, Mapping[str, Any]]) -> None:
        """These servers, as a configuration (``%config SlotMagic.mcp_servers``): those the last
        configuration named and this one does not stop; those added with :meth:`add` stay."""
        if not isinstance(servers, Mapping):
            raise ConfigError(f"MCP servers are a dict of name -> server, not {type(servers).__name__}")
        checked = {name: server_config(name, value) for name, value in servers.items()}  # all checked first
        with self._lock:
            gone, self._configured = self._configured - set(checked), set(checked)
        for name in gone & set(self.names()):
            self.remove(name)
        for name, config in checked.items():
            self.add(name, config)

    def names(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._connections)

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __len__(self) -> int:
        return len(self.names())

    def config(self, name: str) -> ServerConfig:
        return self._connection(name).config

    def state(self, name: str) -> str:
        """``not started``, ``running``, ``stopped`` or ``failed: <why>``."""
        return self._connection(name).state

    def started(self) -> tuple[str, ...]:
        """The servers running now."""
        with self._lock:
            return tuple(n for n, c in self._connections.items() if c.running)

    def describe(self) -> list[str]:
        """One line per server: name, state, how it is reached (no secret shown)."""
        return [f"{name} ({self.state(name)}) — {self.config(name).describe()}" for name in self.names()]

    # -- tools ---------------------------------------------------------------------------------

    def tools(self, name: str | None = None) -> list[McpTool]:
        """The tools of server ``name`` (every server's when None), starting them as needed;
        ``ServerDown`` in one line for a server that cannot be started."""
        names = self.names() if name is None else (self._known(name),)
        return [tool for n in names for tool in self._tools_of(n)]

    def new_turn(self) -> None:
        """A turn begins: servers that failed in the last one are tried again."""
        with self._lock:
            self._down.clear()

    def offered(
        self, selectors: Iterable[str] | None, known: Callable[[str], bool]
    ) -> tuple[list[str] | None, list[Tool[..., Any]]]:
        """A turn's choice of tools split in two: the names left for the tool registry, and the
        server tools chosen. ``None`` chooses every server's tools; ``SERVER.PATTERN`` a server's
        (by pattern); a name that ``known`` does not know is looked for among the servers' tools.
        A server that cannot be started is a note (:meth:`take_notes`) and the turn goes on."""
        if selectors is None:
            self._start_all()
            return None, [tool for name in self.names() for tool in self._usable(name)]
        rest: list[str] = []
        chosen: dict[str, Tool[..., Any]] = {}
        for selector in selectors:
            if "." in selector:
                for tool in self._matching(selector):
                    chosen.setdefault(tool.name, tool)
                continue
            if known(selector) or not self.names():
                rest.append(selector)
                continue
            found = self._named(selector)
            if found is None:
                rest.append(selector)  # the registry says it is unknown, listing what there is
            else:
                chosen.setdefault(found.name, found)
        return rest, list(chosen.values())

    def _start_all(self) -> None:
        """Start the servers not running yet side by side (each waits for its own answer)."""
        with self._lock:
            waiting = [c for n, c in self._connections.items() if not c.running and n not in self._down]
        if len(waiting) < 2:
            return

        def start(connection: McpConnection) -> None:
            try:
                connection.ensure()
            except ServerDown as exc:
                with self._lock:
                    self._down.add(connection.config.name)
                    self._notes.append(f"{exc}; this turn goes on without its tools")

        threads = [threading.Thread(target=start, args=(c,), daemon=True) for c in waiting]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _matching(self, selector: str) -> list[McpTool]:
        server, _, pattern = selector.partition(".")
        self._known(server, f"tools: {selector!r} names")
        tools = self._usable(server)
        if not tools:
            return []
        found = [
            t
            for t in tools
            if fnmatch.fnmatchcase(t.remote, pattern) or fnmatch.fnmatchcase(short_name(server, t.remote), pattern)
        ]
        if not found:
            shown = ", ".join(short_name(server, t.remote) for t in tools)
            raise ConfigError(f"MCP server {server!r} has no tool matching {pattern!r}; its tools are: {shown}")
        return found

    def _named(self, name: str) -> McpTool | None:
        likely = sorted(self.names(), key=lambda n: not name.startswith((f"{n}_", f"{n}-")))
        for server in likely:
            for tool in self._usable(server):
                if tool.name == name:
                    return tool
        return None

    def _usable(self, name: str) -> list[McpTool]:
        """Server ``name``'s tools, or none (and a note) when it cannot be started."""
        with self._lock:
            if name in self._down:
                return []
        try:
            return self._tools_of(name)
        except ServerDown as exc:
            with self._lock:
                self._down.add(name)
                self._notes.append(f"{exc}; this turn goes on without its tools")
            return []

    def _tools_of(self, name: str) -> list[McpTool]:
        connection = self._connection(name)
        listing = connection.tools()
        with self._lock:
            kept = self._made.get(name)
        if kept is not None and kept[0] is listing:
            return kept[1]
        made: list[McpTool] = []
        for remote in listing:
            tool = _tool(connection, remote)
            if isinstance(tool, str):
                with self._lock:
                    self._notes.append(tool)
            else:
                made.append(tool)
        with self._lock:
            self._made[name] = (listing, made)
        return made

    # -- resources -----------------------------------------------------------------------------

    def read(self, uri: str) -> str | bytes:
        """A resource's content by URI (``--attach demo://...``): text, or the bytes of a blob,
        from the server that lists it (else the first that can read it)."""
        if not self.names():
            raise ConfigError(f"{uri}: no MCP server is configured to read it from (%slot mcp add)")
        order = sorted(self.names(), key=lambda n: not any(r.uri == uri for r in self._resources(n)))
        problems: list[str] = []
        for name in order:
            connection = self._connection(name)
            try:
                contents = connection.read(uri).contents
            except ServerDown as exc:
                problems.append(str(exc))
                continue
            import mcp_types

            texts = [c.text for c in contents if isinstance(c, mcp_types.TextResourceContents)]
            if texts:
                return hide("\n".join(texts), connection.secrets)
            blobs = [c.blob for c in contents if isinstance(c, mcp_types.BlobResourceContents)]
            if blobs:
                return base64.b64decode(blobs[0])
        raise ConfigError(f"no MCP server could read {uri}" + (f": {problems[0]}" if problems else ""))

    def _resources(self, name: str) -> list[Any]:
        try:
            return self._connection(name).resources()
        except ServerDown:
            return []

    # -- notes and the end ---------------------------------------------------------------------

    def take_notes(self) -> list[str]:
        """Lines for the turn's footer since the last call: a server restarted, one that did
        not answer, a tool that could not be offered."""
        if not self._notes and not self._connections:  # every turn asks; most sessions have no server
            return []
        with self._lock:
            notes, self._notes = self._notes, []
            connections = list(self._connections.values())
        for connection in connections:
            notes.extend(connection.take_notes())
        return list(dict.fromkeys(notes))

    def close(self) -> None:
        """Stop every server (they start again at their next use)."""
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            connection.close()

    def _on_exit(self) -> None:
        if not self._exiting:
            self._exiting = True
            atexit.register(_close, weakref.ref(self))

    def _known(self, name: str, what: str = "") -> str:
        if name not in self.names():
            there = (
                ", ".join(self.names()) or "none yet (%slot mcp add NAME -- COMMAND, or %config SlotMagic.mcp_servers)"
            )
            raise ConfigError(f"{what + ': ' if what else ''}no MCP server {name!r}; the servers are: {there}")
        return name

    def _connection(self, name: str) -> McpConnection:
        with self._lock:
            return self._connections[self._known(name)]

    def __repr__(self) -> str:
        return f"<McpServers: {', '.join(self.describe()) or 'none'}>"


def servers_of(value: object) -> tuple[McpServers, bool]:
    """A session's ``mcp=``: the servers, and whether the session made them (and stops them)."""
    if isinstance(value, McpServers):
        return value, False
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(
            "mcp= takes a dict of server name -> config ({'time': {'command': 'mcp-server-time'}}) or an "
            f"McpServers, not {type(value).__name__}"
        )
    return McpServers(value), True


def _close(ref: weakref.ref[McpServers]) -> None:
    servers = ref()
    if servers is not None:
        servers.close()


def _tool(connection: McpConnection, remote: mcp_types.Tool) -> McpTool | str:
    """A server's tool as a slotmagic tool, or the line saying why it is not offered."""
    schema = dict(remote.input_schema or {"type": "object"})
    schema.setdefault("type", "object")
    problem = schema_problem(schema)
    if problem is not None:
        return f"MCP server {connection.config.name!r}: tool {remote.name!r} is not offered ({problem})"
    description = remote.description or remote.title or ""
    try:
        return McpTool(connection, remote.name, description, schema)
    except ConfigError as exc:
        return f"MCP server {connection.config.name!r}: tool {remote.name!r} is not offered ({exc})"


__all__ = ["McpServers", "McpTool", "ServerDown", "result_text", "servers_of", "short_name", "tool_name"]
