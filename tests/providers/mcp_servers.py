"""Real MCP servers for the tests, installed from the package registries (.ci/run): the
``mcp-server-time`` and ``mcp-server-git`` commands (PyPI) and ``@modelcontextprotocol/
server-everything`` (npm, in the git-ignored ``.ci/node``). Without the npm one the tests that
need it skip, except where SLOTMAGIC_REQUIRE_MCP is set (CI sets it)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / ".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
LIST_SERVER = Path(__file__).resolve().parent / "mcp_list_server.py"

TIME: dict[str, Any] = {"command": "mcp-server-time"}
GIT: dict[str, Any] = {"command": "mcp-server-git", "args": ["--repository", str(ROOT)]}
CHANGING: dict[str, Any] = {"command": sys.executable, "args": [str(LIST_SERVER)]}


def everything(*, transport: str = "stdio", **extra: Any) -> dict[str, Any]:
    """The everything server's config (skips the test when it is not installed)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING.is_file():
        if os.environ.get("SLOTMAGIC_REQUIRE_MCP"):
            pytest.fail(f"@modelcontextprotocol/server-everything is required here: {EVERYTHING} (see .ci/run)")
        pytest.skip("@modelcontextprotocol/server-everything is not installed in .ci/node (.ci/run installs it)")
    return {"command": node, "args": [str(EVERYTHING), transport], **extra}


def children(pattern: str) -> list[int]:
    """This process's child processes whose command line holds ``pattern`` (Linux's /proc)."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = stat.rpartition(")")[2].split()[1]
        if ppid == me and pattern in cmdline:
            found.append(int(entry.name))
    return found
