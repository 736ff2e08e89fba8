"""Run All of a notebook whose turns called an MCP server's tools: the second run, in a new
kernel, replays every turn from the store and never starts the server."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from test_run_all_headless import REPLAYED, execute, headless_env

pytestmark = pytest.mark.slow

SOURCES = [
    "%load_ext slotmagic\n%config SlotMagic.mcp_servers = {'time': {'command': 'mcp-server-time'}}",
    '%%turn --tools time.*\nWhat is 09:00 UTC in Tokyo?\ncall time_convert_time {"source_timezone": "UTC", '
    '"time": "09:00", "target_timezone": "Asia/Tokyo"}',
    "%slot mcp",
]


def _texts(cell: nbformat.NotebookNode) -> list[str]:
    return [o.get("text") or o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", [])]


def test_run_all_replays_without_starting_the_server(tmp_path: Path) -> None:
    env = headless_env(tmp_path / "state.sqlite3", SLOTMAGIC_SESSION="mcp-run-all")
    first = execute(SOURCES, env)
    second = execute(SOURCES, env)
    turn_first, turn_second = (_texts(nb.cells[1]) for nb in (first, second))
    assert '"datetime": "' in " ".join(turn_first) and "+09:00" in " ".join(turn_first)  # the server answered
    assert [t.replace(REPLAYED, "") for t in turn_second] == turn_first
    assert any(REPLAYED in t for t in turn_second)
    assert _texts(first.cells[2]) == ["time (running) — stdio: mcp-server-time\n"]
    assert _texts(second.cells[2]) == ["time (not started) — stdio: mcp-server-time\n"]
