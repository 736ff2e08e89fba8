"""An MCP server's configuration: how to start it (a command, for stdio) or reach it (a URL, for
streamable HTTP), checked when given, in the shape Claude Desktop and VS Code use::

    {"command": "mcp-server-git", "args": ["--repository", "."], "env": {"TOKEN": "${TOKEN}"}}
    {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}

``${NAME}`` in an ``env`` or ``headers`` value (and in ``args``, ``cwd`` and ``url``) is read
from the kernel's environment when the server starts, so a token never has to be written in a
notebook. The values of ``env`` and ``headers`` are secrets: they are never stored, shown, or
let through in what a server returns (a tool echoing its environment shows ``[redacted]``).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core.secrets import masked_url, redact
from .._errors import ConfigError

SERVER_NAME = re.compile(r"[a-zA-Z0-9-]{1,32}\Z")  # no '_' or '.': a tool's name is SERVER_TOOL, a selector SERVER.TOOL
START_TIMEOUT = 20.0  # seconds a server has to start and list its tools
CALL_TIMEOUT = 120.0  # seconds a tool call may take
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "timeout", "call_timeout"}
SHORTEST_SECRET = 8  # shorter env and header values ("1", "debug") are settings, not secrets


@dataclass(frozen=True)
class ServerConfig:
    """One server, checked: ``command`` (stdio) or ``url`` (streamable HTTP), not both."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = START_TIMEOUT
    call_timeout: float = CALL_TIMEOUT

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def where(self) -> str:
        """How it is reached, for a person: the command line or the URL (credentials masked)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        assert self.url is not None
        return masked_url(self.url)

    def describe(self) -> str:
        """One line: transport, where, and the names (never the values) of its env and headers."""
        parts = [f"{self.transport}: {self.where()}"]
        if self.env:
            parts.append("env " + ", ".join(sorted(self.env)) + " (values hidden)")
        if self.headers:
            parts.append("headers " + ", ".join(sorted(self.headers)) + " (values hidden)")
        return "; ".join(parts)

    # -- at start --------------------------------------------------------------------------------

    def resolved_env(self) -> dict[str, str]:
        return {k: expand(v, f"server {self.name!r}: env {k}") for k, v in self.env.items()}

    def resolved_headers(self) -> dict[str, str]:
        return {k: expand(v, f"server {self.name!r}: header {k}") for k, v in self.headers.items()}

    def resolved_args(self) -> list[str]:
        return [expand(a, f"server {self.name!r}: args") for a in self.args]

    def resolved_url(self) -> str:
        assert self.url is not None
        return expand(self.url, f"server {self.name!r}: url")

    def secrets(self) -> tuple[str, ...]:
        """The values to keep out of everything shown or stored (as set, and as expanded)."""
        found: set[str] = set()
        for values in (self.env, self.headers):
            for value in values.values():
                found.add(value)
                with contextlib.suppress(ConfigError):
                    found.add(expand(value, ""))
        for value in list(found):
            if value.lower().startswith("bearer "):
                found.add(value[7:])
        return tuple(sorted((v for v in found if len(v) >= SHORTEST_SECRET), key=len, reverse=True))


def hide(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each of ``secrets`` replaced by ``[redacted]``."""
    for secret in secrets:
        text = redact(text, secret)
    return text


def expand(value: str, what: str) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable's value; ConfigError
    naming a variable that is not set."""

    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match[1])
        if found is None:
            raise ConfigError(f"{what} names ${{{match[1]}}}, which is not set in the kernel's environment")
        return found

    return _VARIABLE.sub(one, value)


def server_config(name: object, value: object) -> ServerConfig:
    """``value`` (a dict as above) checked as the server ``name``; ConfigError in one line."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ConfigError(
            f"MCP server name {name!r:.40} must be 1-32 letters, digits or '-' (it prefixes its tools' names)"
        )
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"MCP server {name!r}: give a dict such as {{'command': 'mcp-server-time'}} or "
            f"{{'url': 'http://127.0.0.1:8000/mcp'}}, not {type(value).__name__}"
        )
    unknown = sorted(set(map(str, value)) - _KEYS)
    if unknown:
        raise ConfigError(
            f"MCP server {name!r}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}"
        )
    command, url = value.get("command"), value.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"MCP server {name!r}: give either 'command' (a stdio server) or 'url' (streamable HTTP)")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"MCP server {name!r}: 'command' must be a program name or path, not {command!r:.40}")
    if url is not None and (not isinstance(url, str) or not re.match(r"https?://", url)):
        raise ConfigError(
            f"MCP server {name!r}: 'url' must start with http:// or https://, not {masked_url(str(url))!r:.60}"
        )
    args = _strings(name, "args", value.get("args", ()))
    if url is not None and (args or value.get("env") or value.get("cwd")):
        raise ConfigError(f"MCP server {name!r}: 'args', 'env' and 'cwd' go with 'command', not with 'url'")
    if command is not None and value.get("headers"):
        raise ConfigError(f"MCP server {name!r}: 'headers' go with 'url', not with 'command'")
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
        raise ConfigError(f"MCP server {name!r}: 'cwd' must be a folder, not {cwd!r:.40}")
    return ServerConfig(
        name,
        command=command,
        args=args,
        env=_mapping(name, "env", value.get("env")),
        cwd=os.fspath(cwd) if cwd is not None else None,
        url=url,
        headers=_mapping(name, "headers", value.get("headers")),
        timeout=_seconds(name, "timeout", value.get("timeout"), START_TIMEOUT),
        call_timeout=_seconds(name, "call_timeout", value.get("call_timeout"), CALL_TIMEOUT),
    )


def _strings(name: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise ConfigError(f"MCP server {name!r}: '{key}' must be a list of strings, e.g. ['--repository', '.']")
    return tuple(value)


def _mapping(name: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"MCP server {name!r}: '{key}' must map names to strings, e.g. {{'TOKEN': '${{TOKEN}}'}}")
    return dict(value)


def _seconds(name: str, key: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ConfigError(
            f"MCP server {name!r}: '{key}' must be a number of seconds between 0 and 3600, not {value!r:.20}"
        )
    return float(value)


__all__ = ["CALL_TIMEOUT", "START_TIMEOUT", "ServerConfig", "expand", "hide", "server_config"]
