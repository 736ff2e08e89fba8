"""Loading the extension, its settings, where the session lives, and tab completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter

import slotmagic
from slotmagic._magics.completion import complete
from slotmagic._magics.workspace import notebook_path, runner_notebook, session_id_for


def magic(ip: Any) -> Any:
    from slotmagic._magics import SlotMagic

    found = [c for c in ip.configurables if isinstance(c, SlotMagic)]
    assert len(found) == 1
    return found[0]


def test_import_does_not_import_ipython() -> None:
    code = "import sys, slotmagic; print('IPython' in sys.modules, 'slotmagic._magics' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_loading_twice_is_harmless_and_keeps_the_session(ip: Any) -> None:
    ip.run_cell("%slot create kept")
    ip.run_cell("%load_ext slotmagic")
    slotmagic.load_ipython_extension(ip)  # a second registration replaces the first
    assert magic(ip).session().current_slot == "kept"
    ip.run_cell("%reload_ext slotmagic")
    assert magic(ip).session().current_slot == "kept"
    assert sum(getattr(m, "slotmagic", False) for m in ip.Completer.custom_matchers) == 1
    pre_run = [cb for cb in ip.events.callbacks["pre_run_cell"] if getattr(cb, "__name__", "") == "remember_cell"]
    assert len(pre_run) == 1


def test_unload_takes_everything_back(ip: Any) -> None:
    slotmagic.unload_ipython_extension(ip)
    assert ip.find_line_magic("slot") is None and ip.find_cell_magic("turn") is None
    assert not any(type(c).__name__ == "SlotMagic" for c in ip.configurables)
    slotmagic.load_ipython_extension(ip)  # for the fixture's teardown


def test_reloading_resumes_slots_and_the_current_slot(ip: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    ip.user_ns["__session__"] = str(tmp_path / "story.ipynb")  # what ipykernel sets from Jupyter
    slotmagic.load_ipython_extension(ip)
    assert magic(ip).session().session_id == "story.ipynb"
    ip.run_cell("%%turn\nentry")
    ip.run_cell("%slot derive side")
    slotmagic.unload_ipython_extension(ip)  # the kernel goes away ...
    slotmagic.load_ipython_extension(ip)  # ... and a new one loads the extension again
    session = magic(ip).session()
    assert [s.id for s in session.list_slots()] == ["default", "side"] and session.current_slot == "side"
    assert len(session.messages("side")) == 2


def test_session_id_from_the_notebook_path(tmp_path: Path) -> None:
    assert notebook_path({"__session__": "/a/b.ipynb"}, {}) == "/a/b.ipynb"
    assert notebook_path({}, {"JPY_SESSION_NAME": "/a/c.ipynb"}) == "/a/c.ipynb"
    assert notebook_path({}, {}) is None
    assert session_id_for(str(tmp_path / "sub" / "n.ipynb"), str(tmp_path)) == "sub/n.ipynb"
    assert session_id_for("/elsewhere/n.ipynb", str(tmp_path)) == "/elsewhere/n.ipynb"


def test_a_headless_runner_names_the_notebook(tmp_path: Path) -> None:
    """nbconvert --execute tells the kernel nothing of its notebook: its command line does."""
    import subprocess
    import sys
    import time

    if not Path("/proc/self/cmdline").exists():
        pytest.skip("no /proc here: headless runs get a new session id")
    (tmp_path / "nb").mkdir()
    for name in ("a.ipynb", "b.ipynb", "a.out.ipynb"):
        (tmp_path / "nb" / name).write_text("{}")
    here = str(tmp_path / "nb")

    def named(*args: str) -> str | None:
        runner = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)", *args], cwd=tmp_path, stdin=subprocess.DEVNULL
        )
        try:
            for _ in range(200):  # until the child has exec'd (its command line is the runner's)
                if b"time.sleep" in Path(f"/proc/{runner.pid}/cmdline").read_bytes():
                    break
                time.sleep(0.01)
            return runner_notebook({"JPY_PARENT_PID": str(runner.pid)}, here)
        finally:
            runner.kill()
            runner.wait()

    assert named("--execute", "--to", "html", "nb/a.ipynb") == "a.ipynb"
    assert named("--to=notebook", "nb/a.ipynb", "--output", "nb/a.out.ipynb") == "a.ipynb"
    assert named("nb/a.ipynb", "--output=nb/a.out.ipynb") == "a.ipynb"
    assert named("nb/a.ipynb", "nb/b.ipynb") is None  # which one runs here cannot be told
    assert named("elsewhere/a.ipynb") is None and named("nb/missing.ipynb") is None
    assert runner_notebook({}, here) is None and runner_notebook({"JPY_PARENT_PID": "x"}, here) is None


def test_without_a_notebook_path_a_new_session_starts(ip: Any) -> None:
    assert magic(ip).session().session_id.startswith("session-")
    first = magic(ip).session().session_id
    delattr(ip, "_slotmagic_session_id")  # what a kernel restart does
    slotmagic.load_ipython_extension(ip)
    assert magic(ip).session().session_id not in (first, "")


def test_default_store_is_beside_the_notebook(ip: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SLOTMAGIC_DB")
    monkeypatch.chdir(tmp_path)
    slotmagic.load_ipython_extension(ip)
    assert (tmp_path / ".slotmagic" / "state.sqlite3").exists()
    assert oct((tmp_path / ".slotmagic" / "state.sqlite3").stat().st_mode & 0o777) == "0o600"


def test_config_lists_every_setting_with_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%config SlotMagic")
    out = " ".join(capsys.readouterr().out.split())
    for name in ("model", "db_path", "session_id", "system", "stream", "stream_throttle"):
        assert f"SlotMagic.{name}=" in out
    assert "Env: SLOTMAGIC_MODEL" in out and "Env: SLOTMAGIC_DB" in out


def test_settings_come_from_the_environment(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOTMAGIC_SESSION", "from-env")
    monkeypatch.setenv("SLOTMAGIC_SYSTEM", "Answer in French.")
    monkeypatch.setenv("SLOTMAGIC_STREAM_THROTTLE", "0.5")
    monkeypatch.setenv("SLOTMAGIC_STREAM", "off")
    slotmagic.load_ipython_extension(ip)
    m = magic(ip)
    assert (m.session_id, m.system, m.stream_throttle, m.stream) == ("from-env", "Answer in French.", 0.5, False)
    ip.run_cell("%%turn\nHi")
    assert "system prompt: Answer in French." in ip.user_ns["_"].text


def test_config_changes_apply_at_the_next_command(ip: Any, tmp_path: Path) -> None:
    ip.run_cell(f"%config SlotMagic.db_path = {str(tmp_path / 'other.sqlite3')!r}")
    ip.run_cell("%config SlotMagic.session_id = 'elsewhere'")
    ip.run_cell("%config SlotMagic.system = 'Be terse.'")
    session = magic(ip).session()
    assert (session.session_id, session.store.path, session.system) == (
        "elsewhere",
        str(tmp_path / "other.sqlite3"),
        "Be terse.",
    )


def test_a_setting_reaches_the_open_session_when_set_and_a_command_leaves_them(ip: Any) -> None:
    """The workspace observes the settings: a %config reaches the session at once, no command
    in between, and a command does not write them again over what was set in Python."""
    session = magic(ip).session()
    ip.run_cell("%config SlotMagic.max_tool_rounds = 3")
    ip.run_cell("%config SlotMagic.working_context_turns = None")
    ip.run_cell("%config SlotMagic.system = 'Be terse.'")
    ip.run_cell("%config SlotMagic.read_timeout = 7.5")
    ip.run_cell("%config SlotMagic.user = 'alice'")
    assert (session.options.max_tool_rounds, session.context.turns, session.system) == (3, None, "Be terse.")
    assert (session.settings.read_timeout, session.user) == (7.5, "alice")

    session.options.max_tool_rounds = 5
    session.context.turns = 2
    session.system = "Set in Python."
    ip.run_cell("%slot list")
    ip.run_cell("%%turn\nHi")
    assert magic(ip).session() is session
    assert (session.options.max_tool_rounds, session.context.turns, session.system) == (5, 2, "Set in Python.")


def test_completion_of_subcommands_options_and_slot_ids(ip: Any) -> None:
    ip.run_cell("%slot create draft --no-switch")
    with provisionalcompleter():

        def texts(line: str) -> list[str]:
            return [c.text for c in ip.Completer.completions(line, len(line))]

        assert texts("%slot sw") == ["switch"]
        assert texts("%slot switch d") == ["default", "draft"]
        assert texts("%%turn --slot dr") == ["draft"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "%slot ",
            [
                "list",
                "tree",
                "create",
                "switch",
                "derive",
                "delete",
                "show",
                "preview",
                "budget",
                "compact",
                "tools",
                "session",
                "rename",
                "diff",
                "export",
                "compare",
                "merge",
                "undo",
                "redo",
                "pin",
                "exclude",
                "include",
                "search",
                "gc",
                "explain",
                "code",
                "mcp",
                "--help",
            ],
        ),
        ("%slot merge ", ["default", "draft"]),
        ("%slot undo --slot ", ["default", "draft"]),
        ("%slot de", ["derive", "delete"]),
        ("%slot derive x --from ", ["default", "draft"]),
        ("%slot derive x --no", ["--no-keep-system", "--no-switch"]),
        ("%slot diff default ", ["default", "draft"]),
        ("%slot diff default draft ", []),
        ("%slot rename draft ", []),
        ("%slot create ", []),
        (
            "%%turn --",
            [
                "--attach",
                "--code",
                "--error",
                "--help",
                "--id",
                "--max-tokens",
                "--model",
                "--models",
                "--no-stream",
                "--no-tools",
                "--raw",
                "--read-vars",
                "--rerun",
                "--schema",
                "--slot",
                "--slots",
                "--system",
                "--temperature",
                "--tools",
            ],
        ),
        ("%%turn --slot ", ["default", "draft"]),
        ("%%turn --slots ", ["default", "draft"]),
        ("%slot compare default ", ["default", "draft"]),
        ('%slot export "my ', []),
        ("print(1)", []),
    ],
)
def test_completion_rules(line: str, expected: list[str]) -> None:
    assert complete(line, ["default", "draft"]) == expected


def test_bad_store_path_is_reported_at_load(ip: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from IPython.core.error import UsageError

    bad = tmp_path / "not-a-db.sqlite3"
    bad.write_text("this is not sqlite " * 100)
    os.chmod(bad, 0o600)
    monkeypatch.setenv("SLOTMAGIC_DB", str(bad))
    with pytest.raises(UsageError, match=r"cannot use .* as a slotmagic store"):
        slotmagic.load_ipython_extension(ip)
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path / "good.sqlite3"))
    slotmagic.load_ipython_extension(ip)
