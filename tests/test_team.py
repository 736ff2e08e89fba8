"""What a team on one store needs that one person does not: who made each turn (a user name
recorded with it, from JupyterHub's environment when present), and a read-only view of another
person's session. Both stores (``store_target``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from conftest import count_rows
from slotmagic import ConfigError, Session, StoreError
from slotmagic._core.users import current_user


@pytest.fixture
def db_path(store_target: str) -> str:
    return store_target


def test_each_turn_records_who_made_it(db_path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SLOTMAGIC_USER", raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")  # a hub's single-user server sets it
    with Session.open("team", db_path=db_path) as session:
        session.submit_turn("from the hub's alice")
        monkeypatch.setenv("SLOTMAGIC_USER", "alice.w")  # the setting wins over the hub's name
        session.user = current_user()
        session.submit_turn("as she named herself")
    with Session.open("team", db_path=db_path, user="carol") as session:
        session.submit_turn("carol's")
        assert [t.info.user for t in session.history.turns()] == ["alice", "alice.w", "carol"]
        session.history.export(tmp_path / "team.md")
        session.history.export(tmp_path / "team.json")
    markdown = (tmp_path / "team.md").read_text()
    assert "## user · alice\n\nfrom the hub's alice" in markdown and "## user · carol\n\ncarol's" in markdown
    with Session.open("solo", db_path=db_path, user="dan") as session:
        session.submit_turn("dan's alone")
        assert (
            "## user\n\ndan's alone" in session.history.export(tmp_path / "solo.md").read_text()
        )  # one person: not named
    exported = json.loads((tmp_path / "team.json").read_text())
    assert [t["info"]["user"] for t in exported["turns"]] == ["alice", "alice.w", "carol"]
    for bad in ("", "two\nlines", "x" * 101, 7):
        with pytest.raises(ConfigError, match="user name") as caught:
            Session.open("team", db_path=db_path, user=bad)
        assert "\n" not in str(caught.value)


def test_without_any_setting_the_os_user_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    monkeypatch.delenv("SLOTMAGIC_USER", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    assert current_user() == getpass.getuser()
    monkeypatch.setenv("JUPYTERHUB_USER", "x" * 101)  # unrecordable: skipped, never fatal
    assert current_user() == getpass.getuser()


@pytest.mark.parametrize(("value", "said"), [("two\nlines", "'two\\nlines'"), ("x" * 10_000, "10,000 characters")])
def test_a_slotmagic_user_that_is_no_user_name_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, ip: Any, tmp_path: Path, value: str, said: str
) -> None:
    """As ``user=`` is: turns silently attributed to the OS user instead would be wrong."""
    import slotmagic

    monkeypatch.setenv("SLOTMAGIC_USER", value)
    line = f"SLOTMAGIC_USER (a user name) must be one line of 1-100 characters, not {said}; fix or unset SLOTMAGIC_USER"
    with pytest.raises(ConfigError) as refused:
        Session.open("s", db_path=tmp_path / "s.db")
    assert str(refused.value) == line
    slotmagic.unload_ipython_extension(ip)
    with pytest.raises(UsageError) as stopped:
        slotmagic.load_ipython_extension(ip)
    assert str(stopped.value) == line
    monkeypatch.setenv("SLOTMAGIC_USER", "  ")  # blank: as if unset
    slotmagic.load_ipython_extension(ip)


def test_a_read_only_view_reads_everything_and_refuses_every_write_in_one_line(db_path: str) -> None:
    with Session.open("bob", db_path=db_path, user="bob") as mine:
        mine.submit_turn("bob's question")
        mine.derive_slot("side")
        mine.submit_turn("on the side", slot="side")
    rows = {table: count_rows(db_path, table) for table in ("messages", "turns", "slots", "sessions")}
    with Session.open("bob", db_path=db_path, readonly=True) as view:
        assert view.readonly
        assert [m.content for m in view.messages("side") if m.role == "user"] == ["bob's question", "on the side"]
        assert {h.slot for h in view.history.search("question")} == {"default"}
        view.preview("side")  # counts tokens: kept in memory, nothing stored
        writes: list[Any] = [
            lambda: view.submit_turn("alice writes into bob's session"),
            lambda: view.derive_slot("mine"),
            lambda: view.switch_slot("side"),
            lambda: view.delete_slot("side", force=True),
            lambda: view.history.pin(0),
        ]
        for write in writes:
            with pytest.raises(StoreError, match="read-only") as refused:
                write()
            assert "\n" not in str(refused.value) and "'bob'" in str(refused.value)
    assert {table: count_rows(db_path, table) for table in rows} == rows
    with pytest.raises(StoreError, match="no session 'nobody'"):
        Session.open("nobody", db_path=db_path, readonly=True)
    assert count_rows(db_path, "sessions") == rows["sessions"]
    with pytest.raises(ConfigError, match="readonly"):
        Session.open(db_path=db_path, readonly=True)


def test_the_magics_view_another_session_read_only(ip: Any, db_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Session.open("bob", db_path=db_path, user="bob") as bob:
        bob.submit_turn("bob's")
    ip.run_cell(f"%config SlotMagic.db_path = {db_path!r}")
    ip.run_cell("%config SlotMagic.user = 'alice'")
    ip.run_cell("%slot session mine")
    ip.run_cell("%%turn\nalice's own")
    ip.run_cell("%slot session bob --readonly")
    ip.run_cell("%slot session")
    assert "viewing session bob read-only" in capsys.readouterr().out
    for cell_id, read in enumerate(("%slot", "%slot list", "%slot tree", "%ctx")):  # a view records no cell
        ip.run_cell(read, cell_id=f"read-{cell_id}")
    assert "“bob's”" in capsys.readouterr().out
    with pytest.raises(UsageError, match="read-only") as refused:
        ip.run_cell("%%turn\ninto bob's")
    assert "\n" not in str(refused.value)
    ip.run_cell("%slot session mine")
    ip.run_cell("%%turn\nalice again")
    with Session.open("bob", db_path=db_path) as bob:
        assert [(t.info.user, bob.messages()[t.start].content) for t in bob.history.turns()] == [("bob", "bob's")]
    with Session.open("mine", db_path=db_path) as mine:
        assert [t.info.user for t in mine.history.turns()] == ["alice", "alice"]
