"""MCP servers as tool sources, against real servers (mcp-server-time, mcp-server-git, the npm
everything server) and the loopback model: their tools are offered and called like Python tools,
chosen per turn, run side by side, errors and large results handled the same; a killed server is
started again, a silent one is one line, a replay starts nothing, secrets never get out."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Session
from slotmagic._namespace import content_key
from slotmagic.providers import ProviderSettings
from slotmagic.tools import McpServers

from .mcp_servers import CHANGING, GIT, TIME, children, everything
from .wire_server import WireServer, oa_text_stream, oa_tool_stream, sse_response

pytestmark = pytest.mark.slow
MODEL = "openai:gpt-4o-mini"
SECRET = "sk-mcp-planted-secret-0123456789"


def call(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    return sse_response(oa_tool_stream([(i, name, [json.dumps(args)]) for i, name, args in calls]))


def text(words: str) -> list[Any]:
    return sse_response(oa_text_stream(words))


def offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


@pytest.fixture
def servers() -> Iterator[McpServers]:
    made = McpServers({"time": TIME, "git": GIT})
    yield made
    made.close()


@pytest.fixture
def session(settings: ProviderSettings, servers: McpServers) -> Iterator[Session]:
    with Session.open("mcp", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as s:
        yield s


def test_a_turn_calls_a_servers_tool(session: Session, servers: McpServers, wire: WireServer) -> None:
    assert servers.started() == ()  # nothing starts before a turn offers the tools
    wire.script(call(("c1", "time_get_current_time", {"timezone": "Europe/Oslo"})), text("It is evening."))
    reply = session.submit_turn("What time is it in Oslo?")
    first, second = (r.json() for r in wire.requests)
    assert {"time_get_current_time", "time_convert_time", "git_log", "git_status"} <= set(offered(first))
    sent = json.loads(results(second)["c1"])
    assert sent["timezone"] == "Europe/Oslo" and "datetime" in sent
    assert reply.text == "It is evening."
    assert [s.name for s in reply.steps] == ["time_get_current_time"]
    assert set(servers.started()) == {"time", "git"}
    (result,) = [m for m in session.messages() if m.role == "tool"]
    assert result.name == "time_get_current_time" and result.tokens > 0  # counted like any tool result
    assert session.budget().report.tool_results.used >= result.tokens


def test_tools_are_chosen_by_server_and_pattern(session: Session, servers: McpServers, wire: WireServer) -> None:
    wire.script(text("ok"))
    session.submit_turn("hi", tools=["git.log", "time.*"])
    assert offered(wire.requests[-1].json()) == ["git_log", "time_get_current_time", "time_convert_time"]
    wire.script(text("ok"))
    session.submit_turn("hi", tools=["time_convert_time"])  # a server tool by its own name
    assert offered(wire.requests[-1].json()) == ["time_convert_time"]
    wire.script(text("ok"))
    session.submit_turn("hi", tools=[])
    assert "tools" not in wire.requests[-1].json()


def test_only_the_chosen_server_starts(settings: ProviderSettings, wire: WireServer) -> None:
    servers = McpServers({"time": TIME, "git": GIT})
    try:
        with Session.open("one", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(text("ok"))
            session.submit_turn("hi", tools=["time.*"])
            assert servers.started() == ("time",)
    finally:
        servers.close()


def test_a_bad_choice_is_one_line(session: Session, wire: WireServer) -> None:
    from slotmagic._errors import ConfigError

    with pytest.raises(ConfigError, match=r"no MCP server 'tiem'; the servers are: time, git"):
        session.submit_turn("hi", tools=["tiem.*"])
    with pytest.raises(ConfigError, match=r"MCP server 'git' has no tool matching 'lgo'; its tools are: status"):
        session.submit_turn("hi", tools=["git.lgo"])
    assert session.messages() == [] and wire.requests == []


@pytest.mark.parametrize("form", ["sync", "async"])
def test_calls_run_side_by_side_and_errors_go_to_the_model(session: Session, wire: WireServer, form: str) -> None:
    wire.script(
        call(
            ("a", "time_get_current_time", {"timezone": "UTC"}),
            ("b", "time_get_current_time", {"timezone": "Nowhere/Atlantis"}),
            ("c", "git_status", {"repo_path": str(Path(__file__).resolve().parents[2])}),
        ),
        text("done"),
    )
    reply = (
        session.submit_turn("three at once") if form == "sync" else asyncio.run(session.asubmit_turn("three at once"))
    )
    sent = results(wire.requests[-1].json())
    assert json.loads(sent["a"])["timezone"] == "UTC"
    assert sent["b"].startswith("error: time_get_current_time failed:") and "Nowhere/Atlantis" in sent["b"]
    assert "Repository status" in sent["c"]
    assert [s.is_error for s in reply.steps] == [False, True, False]


def test_a_large_result_is_kept_aside_and_read_back(settings: ProviderSettings, wire: WireServer) -> None:
    big = "".join(f"line {n:05d} of a long echo\n" for n in range(2000))  # ~54 kB
    ref = f"namespace://everything_echo/{content_key('Echo: ' + big)}"  # where the result is kept (by its hash)
    servers = McpServers({"everything": everything()})
    try:
        with Session.open("big", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(
                call(("e", "everything_echo", {"message": big})),
                call(("r", "read_namespace", {"ref": ref, "offset": 26000, "length": 500})),
                text("read it"),
            )
            reply = session.submit_turn("echo this", tools=["everything.echo"])
            expanded = session.messages(expand=True)
    finally:
        servers.close()
    second = wire.requests[1].json()
    shelved = results(second)["e"]
    assert shelved.startswith(ref + "\n[") and len(shelved) < 3000
    assert "read_namespace" in offered(second)
    page = results(wire.requests[2].json())["r"]
    assert ("Echo: " + big)[26000:26400] in page
    assert reply.text == "read it"
    assert ("Echo: " + big) in [m.content for m in expanded]  # the whole result is stored, and read back whole


def test_a_killed_server_is_started_again_once(session: Session, servers: McpServers, wire: WireServer) -> None:
    wire.script(call(("a", "time_get_current_time", {"timezone": "UTC"})), text("one"))
    session.submit_turn("time?", tools=["time.*"])
    (pid,) = children("mcp-server-time")
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)
    wire.script(call(("b", "time_get_current_time", {"timezone": "UTC"})), text("two"))
    reply = session.submit_turn("time again?", tools=["time.*"])
    assert json.loads(results(wire.requests[-1].json())["b"])["timezone"] == "UTC"
    assert [n for n in reply.notes if "MCP" in n] == ["MCP server 'time' had exited; it was started again"]
    (again,) = children("mcp-server-time")
    assert again != pid
    os.kill(again, signal.SIGKILL)  # a second exit: off, in one line, and the turn goes on without it
    _wait_gone(again)
    wire.script(text("three"))
    reply = session.submit_turn("and now?", tools=["time.*", "git.log"])
    assert offered(wire.requests[-1].json()) == ["git_log"]
    assert any(
        "exited again after its restart" in n and "this turn goes on without its tools" in n for n in reply.notes
    )


def _wait_gone(pid: int) -> None:
    for _ in range(500):
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            time.sleep(0.05)  # the client's reader sees the pipe close
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still there")


def test_a_server_that_does_not_answer_is_one_line(settings: ProviderSettings, wire: WireServer) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"], "timeout": 1}
    missing = {"command": "no-such-mcp-server-here"}
    servers = McpServers({"silent": silent, "missing": missing, "time": TIME})
    try:
        with Session.open("slow", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(text("fine"))
            reply = session.submit_turn("hi")
    finally:
        servers.close()
    assert offered(wire.requests[-1].json()) == ["time_get_current_time", "time_convert_time"]
    notes = [n for n in reply.notes if "MCP" in n]
    assert len(notes) == 2 and all("\n" not in n for n in notes)
    assert "MCP server 'silent' did not answer within 1 s; this turn goes on without its tools" in notes
    assert any(n.startswith("MCP server 'missing' could not be started (") for n in notes)
    assert servers.state("silent").startswith("failed: did not answer within 1 s")
    assert children("time.sleep(60)") == []  # the silent one was stopped


def test_a_replayed_turn_starts_no_server(settings: ProviderSettings, wire: WireServer, tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    first = McpServers({"time": TIME})
    with Session.open("replay", db_path=db, model=MODEL, settings=settings, mcp=first) as session:
        wire.script(call(("a", "time_get_current_time", {"timezone": "UTC"})), text("noon"))
        session.submit_turn("time?", cell_id="cell-1")
    first.close()
    again = McpServers({"time": TIME})  # a new kernel: Run All
    with Session.open("replay", db_path=db, model=MODEL, settings=settings, mcp=again) as session:
        reply = session.submit_turn("time?", cell_id="cell-1")
    assert reply.replayed and reply.text == "noon" and [s.name for s in reply.steps] == ["time_get_current_time"]
    assert again.started() == () and again.state("time") == "not started"
    assert len(wire.requests) == 2 and children("mcp-server-time") == []


def test_secrets_in_a_servers_env_never_get_out(
    settings: ProviderSettings, wire: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANTED_TOKEN", SECRET)
    config = everything(env={"API_TOKEN": "${PLANTED_TOKEN}", "OTHER_TOKEN": SECRET[::-1]})
    servers = McpServers({"everything": config})
    db = tmp_path / "state.sqlite3"
    try:
        with Session.open("env", db_path=db, model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(call(("g", "everything_get-env", {})), text("seen"))
            reply = session.submit_turn("what is in your environment?", tools=["everything.get-env"])
            described = [*servers.describe(), repr(servers)]
    finally:
        servers.close()
    sent = results(wire.requests[-1].json())["g"]
    assert '"API_TOKEN": "[redacted]"' in sent and '"OTHER_TOKEN": "[redacted]"' in sent
    everything_shown = " ".join([sent, *described, *(s.result for s in reply.steps)])
    assert SECRET not in everything_shown and SECRET[::-1] not in everything_shown
    assert "env API_TOKEN, OTHER_TOKEN (values hidden)" in described[0]
    with sqlite3.connect(db) as connection:
        dump = "\n".join(connection.iterdump())
    assert "API_TOKEN" in dump and SECRET not in dump and SECRET[::-1] not in dump


def test_a_changed_tool_list_is_followed(settings: ProviderSettings, wire: WireServer) -> None:
    servers = McpServers({"door": CHANGING})
    try:
        with Session.open("door", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(call(("u", "door_unlock", {})), text("unlocked"))
            session.submit_turn("unlock it")
            assert offered(wire.requests[0].json()) == ["door_unlock"]
            for _ in range(200):  # the notification comes on the server's own time
                if [t.name for t in servers.tools("door")] == ["door_unlock", "door_secret_door"]:
                    break
                time.sleep(0.01)
            wire.script(call(("o", "door_secret_door", {})), text("open"))
            session.submit_turn("open the door")
    finally:
        servers.close()
    assert offered(wire.requests[2].json()) == ["door_unlock", "door_secret_door"]
    assert results(wire.requests[3].json())["o"] == "the door is open"


def test_a_streamable_http_server(settings: ProviderSettings, wire: WireServer) -> None:
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = everything(transport="streamableHttp")
    process = subprocess.Popen(
        [config["command"], *config["args"]], env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # it says when it listens
        assert str(port) in line, line
        servers = McpServers({"web": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Token": SECRET}}})
        try:
            with Session.open("http", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
                wire.script(call(("s", "web_get-sum", {"a": 2, "b": 40})), text("42"))
                session.submit_turn("2 + 40?", tools=["web.get-sum"])
            assert "42" in results(wire.requests[-1].json())["s"]
            assert SECRET not in " ".join(servers.describe())
        finally:
            servers.close()
    finally:
        process.terminate()
        process.wait(10)


def test_a_resource_is_attached_by_uri(settings: ProviderSettings, wire: WireServer) -> None:
    servers = McpServers({"time": TIME, "everything": everything()})
    uri = "demo://resource/static/document/architecture.md"
    try:
        with Session.open("res", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
            wire.script(text("read"))
            session.submit_turn("summarize", tools=[], attachments={uri: servers.read(uri)})
            from slotmagic._errors import ConfigError

            with pytest.raises(ConfigError, match="no MCP server could read demo://nothing/here"):
                servers.read("demo://nothing/here")
    finally:
        servers.close()
    user = wire.requests[-1].json()["messages"][-1]["content"]
    assert "Everything Server" in user and uri in user


def test_servers_stop_when_the_process_exits(tmp_path: Path) -> None:
    import subprocess

    script = (
        "import sys; from slotmagic.tools import McpServers\n"
        "s = McpServers({'time': {'command': 'mcp-server-time'}}); s.tools()\n"
        "import os; print(os.getpid(), flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})  # fmt: skip
    assert done.returncode == 0, done.stderr
    parent = done.stdout.strip()
    left = [
        p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == parent
    ]  # a server that outlived the process would be re-parented, so look for its command instead
    assert left == []
    assert not any(
        b"mcp-server-time" in _cmdline(p) and _ppid(p) == "1" for p in Path("/proc").iterdir() if p.name.isdigit()
    )


def _ppid(entry: Path) -> str:
    try:
        return entry.joinpath("stat").read_text().rpartition(")")[2].split()[1]
    except (OSError, IndexError):
        return ""


def _cmdline(entry: Path) -> bytes:
    try:
        return entry.joinpath("cmdline").read_bytes()
    except OSError:
        return b""


def test_without_the_sdk_a_server_is_one_line(
    settings: ProviderSettings, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if slotmagic[mcp] were not installed
    servers = McpServers({"time": TIME})
    with Session.open("no-sdk", db_path=":memory:", model=MODEL, settings=settings, mcp=servers) as session:
        wire.script(text("fine"))
        reply = session.submit_turn("hi")
    assert "tools" not in wire.requests[-1].json()
    needs = "MCP server 'time' needs the official MCP SDK: pip install 'slotmagic[mcp]'"
    assert f"{needs}; this turn goes on without its tools" in reply.notes
