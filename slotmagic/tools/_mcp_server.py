"""One MCP server's connection, kept for the kernel's lifetime on a thread of its own.

The official SDK's client is asyncio, and a Jupyter kernel's thread already runs an event loop:
each server gets a thread running a loop of its own, where one task holds the connection open
(``mcp.Client`` entered and left in that same task, as anyio requires) and every request is sent
from the kernel's threads with ``run_coroutine_threadsafe``. Every wait is bounded: a server that
does not answer in ``timeout`` seconds is :class:`ServerDown` with one line, and a call that takes
longer than ``call_timeout`` is an error the model reads.

The connection's read stream is watched, so a server that exited (crashed, killed) is known
before the next request: it is started again, once, and the line saying so is kept for the
turn's footer (:meth:`McpConnection.take_notes`). A server whose tool list changes (the
``tools/list_changed`` notification, or a 2026 ``subscriptions/listen`` event) is listed again
before the next turn.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from typing import IO, TYPE_CHECKING, Any, TypeVar

from .._errors import ConfigError, SlotMagicError
from ._mcp_config import ServerConfig, hide

if TYPE_CHECKING:  # asyncio and the SDK are imported where used: `import slotmagic` stays free of them
    import asyncio

    import mcp
    import mcp_types

T = TypeVar("T")
_STOP_WAIT = 8.0  # seconds to let a server wind down (the SDK's own waits are bounded by ~6 s)


class ServerDown(SlotMagicError):
    """The server could not be started, stopped, or did not answer in time (one line)."""


class McpConnection:
    """A server's connection: started on first use, restarted once after it exits."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.secrets = config.secrets()
        self.state = "not started"
        self.restarts = 0
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: mcp.Client | None = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Future[None] | None = None
        self._ended = threading.Event()  # the connection's read stream ended: the server is gone
        self._tools: list[mcp_types.Tool] | None = None  # None: list them (again)
        self._notes: list[str] = []
        self._stderr: IO[str] | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._client is not None and not self._ended.is_set()

    def take_notes(self) -> list[str]:
        with self._lock:
            notes, self._notes = self._notes, []
        return notes

    def _note(self, line: str) -> None:
        with self._lock:
            self._notes.append(line)

    # -- starting and stopping -----------------------------------------------------------------

    def ensure(self) -> None:
        """Start the server if it is not running: the first time, or once after it exited.
        ``ServerDown`` (one line) when it cannot be started or does not answer in time."""
        with self._lock:
            if self.running:
                return
            crashed = self._client is not None and self._ended.is_set()
            if crashed:
                detail = self._last_error()
                self._shutdown()
                if self.restarts >= 1:
                    self.state = "stopped: it exited again after a restart"
                    raise ServerDown(
                        f"MCP server {self.config.name!r} exited again after its restart{detail}; its tools are off "
                        f"until %slot mcp remove/add {self.config.name} (or the kernel restarts)"
                    )
                self.restarts += 1
            self._start()
            if crashed:
                self._note(f"MCP server {self.config.name!r} had exited{detail}; it was started again")

    def _start(self) -> None:
        import asyncio

        try:
            import mcp  # noqa: F401  (the official SDK: an optional extra)
        except ImportError:
            self.state = "failed: the mcp package is not installed"
            raise ServerDown(
                f"MCP server {self.config.name!r} needs the official MCP SDK: pip install 'slotmagic[mcp]'"
            ) from None
        self._ended.clear()
        self._tools = None
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=f"slotmagic-mcp-{self.config.name}", daemon=True)
        self._thread.start()
        opened = asyncio.run_coroutine_threadsafe(self._open(), loop)
        try:
            opened.result(self.config.timeout)
        except BaseException as exc:
            opened.cancel()
            detail = self._last_error()
            self._shutdown()
            if isinstance(exc, ServerDown):
                self.state = f"failed: {exc}"
                raise
            if isinstance(exc, TimeoutError):
                why = f"did not answer within {self.config.timeout:g} s{detail}"
            elif isinstance(exc, ConfigError):
                why = str(exc)
            else:
                why = f"could not be started ({type(exc).__name__}: {self._shown(str(exc))}){detail}"
            self.state = f"failed: {why}"
            raise ServerDown(f"MCP server {self.config.name!r} {why}") from None
        self.state = "running"

    async def _open(self) -> None:
        """Start the task that holds the connection, and wait until it is open."""
        import asyncio

        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._holder = asyncio.ensure_future(self._hold(ready))
        await ready

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        import asyncio

        from mcp import Client

        assert self._stop is not None
        try:
            async with Client(
                self._transport(),
                cache=None,
                message_handler=self._message,
                read_timeout_seconds=self.config.call_timeout,
            ) as client:
                self._client = client
                listening = asyncio.ensure_future(self._listen(client))
                if not ready.done():
                    ready.set_result(None)
                try:
                    await self._stop.wait()
                finally:
                    listening.cancel()
                    with suppress(BaseException):
                        await listening
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, (asyncio.CancelledError, Exception)):
                raise
        finally:
            self._ended.set()

    def _transport(self) -> Any:
        config = self.config
        if config.command is not None:
            import tempfile

            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed in _shutdown)
            params = StdioServerParameters(
                command=config.command, args=config.resolved_args(), env=config.resolved_env(), cwd=config.cwd
            )
            return _watched(stdio_client(params, errlog=self._stderr), self._ended.set)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        client = httpx2.AsyncClient(headers=config.resolved_headers(), timeout=httpx2.Timeout(30.0, read=300.0))
        return _watched(
            _closing(client, streamable_http_client(config.resolved_url(), http_client=client)), self._ended.set
        )

    async def _message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools = None  # listed again before the next turn

    async def _listen(self, client: mcp.Client) -> None:
        """On a 2026 connection, list changes come through a subscription (when the server offers one)."""

        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed:
            return
        with suppress(Exception):
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._tools = None

    def close(self) -> None:
        """Stop the server (bounded waits) and its thread."""
        with self._lock:
            self._shutdown()
            if self.state == "running":
                self.state = "stopped"

    def _shutdown(self) -> None:
        import asyncio

        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop.set)
            holder = self._holder
            if holder is not None:  # never opened (still starting): stop it at once
                waited = asyncio.run_coroutine_threadsafe(_wind_down(holder, self._client is None), loop)
                with suppress(BaseException):
                    waited.result(2 * _STOP_WAIT + 1)
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(_STOP_WAIT)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = self._client = self._stop = self._holder = None
        if self._stderr is not None:
            with suppress(OSError):
                self._stderr.close()
            self._stderr = None

    # -- requests ------------------------------------------------------------------------------

    def tools(self) -> list[mcp_types.Tool]:
        """The server's tools (started first if needed), listed again after a change."""
        self.ensure()
        cached = self._tools
        if cached is not None:
            return cached

        async def listing(client: mcp.Client) -> list[mcp_types.Tool]:
            found: list[mcp_types.Tool] = []
            cursor: str | None = None
            for _ in range(100):  # pages; a server that never ends its listing cannot hang a turn
                page = await client.list_tools(cursor=cursor)
                found.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return found

        listed = self._request(listing, self.config.timeout, "list its tools")
        self._tools = listed
        return listed

    def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call one tool; ``ServerDown`` when the server is gone or does not answer in time."""
        self.ensure()
        return self._request(lambda c: c.call_tool(name, arguments), self.config.call_timeout, f"answer {name}")

    def resources(self) -> list[mcp_types.Resource]:
        self.ensure()
        if self._client is None or self._client.server_capabilities.resources is None:
            return []
        return self._request(lambda c: _all_resources(c), self.config.timeout, "list its resources")

    def read(self, uri: str) -> mcp_types.ReadResourceResult:
        self.ensure()
        return self._request(lambda c: c.read_resource(uri), self.config.call_timeout, f"read {uri}")

    def _request(self, make: Callable[[mcp.Client], Coroutine[Any, Any, T]], timeout: float, what: str) -> T:
        import asyncio

        client, loop = self._client, self._loop
        if client is None or loop is None:
            raise ServerDown(f"MCP server {self.config.name!r} is not running")
        future = asyncio.run_coroutine_threadsafe(make(client), loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise ServerDown(f"MCP server {self.config.name!r} did not {what} within {timeout:g} s") from None
        except Exception as exc:
            if self._ended.is_set():
                raise ServerDown(
                    f"MCP server {self.config.name!r} exited while it was asked to {what}{self._last_error()}; "
                    "it is started again at the next use"
                ) from None
            raise ServerDown(
                f"MCP server {self.config.name!r} could not {what}: {type(exc).__name__}: {self._shown(str(exc))}"
            ) from None

    # -- what is shown -------------------------------------------------------------------------

    def _shown(self, text: str) -> str:
        line = " ".join(text.split()) or "(no message)"
        return hide(line if len(line) <= 300 else line[:299] + "…", self.secrets)

    def _last_error(self) -> str:
        """The last line the server wrote to stderr, as ``: <line>`` (secrets hidden), or ''."""
        stream = self._stderr
        if stream is None:
            return ""
        try:
            stream.flush()
            stream.seek(0)
            lines = [line.strip() for line in stream.read()[-4000:].splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f" (it said: {self._shown(lines[-1])})" if lines else ""


async def _all_resources(client: mcp.Client) -> list[mcp_types.Resource]:
    found: list[mcp_types.Resource] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_resources(cursor=cursor)
        found.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


async def _wind_down(task: asyncio.Future[None], at_once: bool) -> None:
    """Let the task holding a connection leave it (the SDK stops a stdio server within ~6 s),
    cancelling it first when ``at_once`` or when it takes longer than that."""
    import asyncio

    if not at_once:
        with suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), _STOP_WAIT)
    if not task.done():
        task.cancel()
        with suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), _STOP_WAIT)


@asynccontextmanager
async def _closing(client: Any, transport: Any) -> AsyncIterator[Any]:
    async with client, transport as streams:
        yield streams


@asynccontextmanager
async def _watched(transport: Any, ended: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, its read stream watched: ``ended()`` once it ends (the server went away)."""
    async with transport as (read, write):
        yield _WatchedRead(read, ended), write
    ended()


class _WatchedRead:
    """A read stream (the SDK's ``ReadStream`` protocol) that says when it ends."""

    def __init__(self, inner: Any, ended: Callable[[], None]) -> None:
        self._inner = inner
        self._ended = ended

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._ended()
            raise

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self._inner, name)


__all__ = ["McpConnection", "ServerDown"]
