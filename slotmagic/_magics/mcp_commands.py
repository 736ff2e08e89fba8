"""``%slot mcp``: the MCP servers whose tools turns offer, for this kernel.

    %slot mcp add time -- mcp-server-time
    %slot mcp add git -- mcp-server-git --repository .
    %slot mcp add search --url https://example.org/mcp --header 'Authorization=Bearer ${SEARCH_TOKEN}'
    %slot mcp                       (list them)
    %slot mcp tools git             (start it, list its tools)
    %slot mcp remove git

Servers belong to the kernel (they stop when it does) and are not stored: a notebook run again
adds them again. The values of ``--env`` and ``--header`` are never shown; write ``${NAME}`` to
take one from the kernel's environment instead of writing a token into the notebook.
"""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError

from .._errors import ConfigError
from ..tools._mcp import McpServers, short_name
from .command import Command, Context
from .parsing import CommandParser, at_least

_ACTIONS = ("list", "add", "tools", "remove")


class _McpParser(CommandParser):
    """``%slot mcp``'s parser: what follows ``--`` is a stdio server's command, read as is."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        words = list(args or [])
        command = words[words.index("--") + 1 :] if "--" in words else []
        parsed = super().parse_args(words[: len(words) - len(command) - 1] if "--" in words else words, namespace)
        parsed.command = command
        return parsed


def _mcp_parser() -> CommandParser:
    parser = _McpParser(
        "%slot mcp",
        "MCP servers whose tools turns offer: add, list, tools, remove (this kernel's; not stored).\n\n"
        "  %slot mcp add time -- mcp-server-time            a stdio server: the command after --\n"
        "  %slot mcp add docs --url http://127.0.0.1:8000/mcp   a streamable HTTP server\n"
        "  %slot mcp tools time                             start it and list its tools\n"
        "A server's tool get_current_time is offered as time_get_current_time; %%turn --tools time.*\n"
        "or --tools time.get_current_time chooses by server. --env/--header values are never shown:\n"
        "write ${NAME} to read one from the kernel's environment.",
    )
    parser.add_argument("action", nargs="?", default="list", choices=_ACTIONS, help="what to do (default: list)")
    parser.add_argument("name", nargs="?", help="the server's name (letters, digits, '-')")
    parser.add_argument("--url", metavar="URL", help="add: a streamable HTTP server's address")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="add: an environment variable")
    parser.add_argument("--header", action="append", default=[], metavar="K=V", help="add: an HTTP header")
    parser.add_argument("--cwd", metavar="DIR", help="add: the folder a stdio server runs in")
    parser.add_argument("--timeout", metavar="S", type=at_least(1, float), help="add: seconds to start and answer (20)")
    return parser


def _mcp(ctx: Context, args: argparse.Namespace) -> None:
    servers = ctx.session.mcp
    if args.action != "add" and args.command:
        raise UsageError(f"%slot mcp {args.action}: unexpected words {' '.join(args.command)!r}")
    if args.action == "list":
        _list(servers)
    elif args.action == "add":
        _add(servers, args)
    elif args.action == "tools":
        _tools(servers, args.name)
    else:
        if args.name is None:
            raise UsageError("%slot mcp remove: name the server (%slot mcp lists them)")
        servers.remove(args.name)
        print(f"stopped and removed MCP server {args.name!r}")


def _list(servers: McpServers) -> None:
    lines = servers.describe()
    if not lines:
        print(
            "no MCP servers: %slot mcp add NAME -- COMMAND [ARGS], or "
            "%config SlotMagic.mcp_servers = {'time': {'command': 'mcp-server-time'}}"
        )
        return
    for line in lines:
        print(line)


def _add(servers: McpServers, args: argparse.Namespace) -> None:
    if args.name is None:
        raise UsageError(
            "%slot mcp add: name the server, then -- and its command: %slot mcp add time -- mcp-server-time"
        )
    config: dict[str, object] = {}
    if args.url is not None:
        if args.command:
            raise UsageError("%slot mcp add: give --url or a command after --, not both")
        config["url"] = args.url
        config["headers"] = _pairs(args.header, "--header")
    elif args.command:
        config["command"], config["args"] = args.command[0], args.command[1:]
        config["env"] = _pairs(args.env, "--env")
        if args.cwd is not None:
            config["cwd"] = args.cwd
    else:
        raise UsageError(f"%slot mcp add {args.name}: give the command after --, or --url")
    if args.url is not None and (args.env or args.cwd):
        raise UsageError("%slot mcp add: --env and --cwd go with a command, not with --url")
    if args.url is None and args.header:
        raise UsageError("%slot mcp add: --header goes with --url")
    if args.timeout is not None:
        config["timeout"] = args.timeout
    known = args.name in servers
    servers.add(args.name, {k: v for k, v in config.items() if v not in ({}, None)})
    where = servers.config(args.name).describe()
    print(
        f"{'replaced' if known else 'added'} MCP server {args.name} ({where}); it starts when a turn first "
        f"offers its tools (%slot mcp tools {args.name} starts it now)"
    )


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"%slot mcp add: {flag} takes NAME=VALUE, e.g. {flag} 'TOKEN=${{TOKEN}}'")
        pairs[key] = value
    return pairs


def _tools(servers: McpServers, name: str | None) -> None:
    names = servers.names() if name is None else (name,)
    if not names:
        raise ConfigError("no MCP servers yet: %slot mcp add NAME -- COMMAND [ARGS]")
    for server in names:
        tools = servers.tools(server)
        print(f"{server}: {len(tools)} tool{'s' if len(tools) != 1 else ''} (--tools {server}.* offers them all)")
        for tool in tools:
            params = tool.parameters.get("properties", {})
            required = set(tool.parameters.get("required", []))
            signature = ", ".join(f"{p}{'' if p in required else '?'}" for p in params)
            first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
            shown = f"{server}.{short_name(server, tool.remote)}"
            print(f"  {tool.name}({signature}) — {first}  [{shown}]")
    for note in servers.take_notes():
        print(note)


def mcp_commands() -> tuple[Command, ...]:
    return (Command("mcp", _mcp_parser, _mcp, kind="runs"),)
