"""MCP servers from a notebook: ``%config SlotMagic.mcp_servers`` and ``%slot mcp`` (add, list,
tools, remove), ``%%turn --tools SERVER.*`` through the loopback model, ``--attach`` of a
resource's URI; the values of env and headers never shown."""

from __future__ import annotations

import json
from typing import Any

import pytest
from IPython.core.error import UsageError

from .mcp_servers import everything
from .support import PLANTED_OPENAI_KEY
from .test_providers_magics import session
from .wire_server import WireServer, oa_text_stream, oa_tool_stream, sse_response

pytestmark = pytest.mark.slow
SECRET = "sk-mcp-planted-secret-0123456789"


@pytest.fixture
def env(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", wire.url + "/v1")


def out(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    ip.run_line_magic(*line[1:].split(" ", 1))
    return capsys.readouterr().out


def test_config_servers_and_a_turn_that_calls_one(
    ip: Any, wire: WireServer, env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_cell(
        "%config SlotMagic.mcp_servers = {'time': {'command': 'mcp-server-time', 'env': {'TZ_TOKEN': '"
        + SECRET
        + "'}}}"
    )
    shown = out(ip, "%config SlotMagic", capsys) + out(ip, "%slot mcp", capsys)
    assert SECRET not in shown and "time (not started) — stdio: mcp-server-time; env TZ_TOKEN (values hidden)" in shown
    call = [("c", "time_get_current_time", [json.dumps({"timezone": "Asia/Tokyo"})])]
    wire.script(sse_response(oa_tool_stream(call)), sse_response(oa_text_stream("Tokyo time")))
    ip.run_cell("%%turn --model openai:gpt-4o-mini --tools time.*\nWhat time is it in Tokyo?")
    first, second = (r.json() for r in wire.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["time_get_current_time", "time_convert_time"]
    result = next(m for m in second["messages"] if m["role"] == "tool")
    assert json.loads(result["content"])["timezone"] == "Asia/Tokyo"
    assert session(ip).messages()[-1].content == "Tokyo time"
    assert "time (running)" in out(ip, "%slot mcp list", capsys)
    ip.run_cell("%config SlotMagic.mcp_servers = {}")  # configured away: stopped
    assert out(ip, "%slot mcp", capsys).startswith("no MCP servers")


def test_a_refused_config_is_one_line_and_shows_no_secret(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    ip.run_line_magic(
        "config", "SlotMagic.mcp_servers = {'bad_name': {'command': 'x', 'env': {'K': '" + SECRET + "'}}}"
    )
    (record,) = [r for r in caplog.records if "mcp_servers" in r.getMessage()]
    line = record.getMessage()
    assert "must be 1-32 letters, digits or '-'" in line and "'K': '***'" in line and SECRET not in line
    assert "\n" not in line


def test_slot_mcp_add_tools_remove(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    added = out(ip, "%slot mcp add clock --env 'TOKEN=" + SECRET + "' -- mcp-server-time --local-timezone UTC", capsys)
    assert added.startswith(
        "added MCP server clock (stdio: mcp-server-time --local-timezone UTC; env TOKEN (values hidden))"
    )
    assert SECRET not in added
    listed = out(ip, "%slot mcp tools clock", capsys)
    assert listed.splitlines()[:2] == [
        "clock: 2 tools (--tools clock.* offers them all)",
        "  clock_get_current_time(timezone) — Get current time in a specific timezone  [clock.get_current_time]",
    ]
    assert out(ip, "%slot mcp remove clock", capsys) == "stopped and removed MCP server 'clock'\n"
    with pytest.raises(UsageError, match="no MCP server 'clock'; the servers are: none yet"):
        ip.run_line_magic("slot", "mcp remove clock")
    with pytest.raises(UsageError, match="give the command after --, or --url"):
        ip.run_line_magic("slot", "mcp add clock")


def test_attach_a_resource_by_uri(ip: Any, wire: WireServer, env: None, capsys: pytest.CaptureFixture[str]) -> None:
    config = everything()
    ip.user_ns["_everything"] = config
    ip.run_cell("%config SlotMagic.mcp_servers = {'everything': _everything}")
    wire.script(sse_response(oa_text_stream("It describes the architecture.")))
    ip.run_cell(
        "%%turn --model openai:gpt-4o-mini --no-tools --attach demo://resource/static/document/architecture.md\nSummarize"
    )
    sent = wire.requests[-1].json()["messages"][-1]["content"]
    assert "Everything Server" in sent and "demo://resource/static/document/architecture.md" in sent
    with pytest.raises(UsageError, match="no MCP server could read demo://missing"):
        ip.run_cell("%%turn --model openai:gpt-4o-mini --attach demo://missing\nSummarize")
