"""``slotmagic copy SRC DST`` and ``%slot session --copy-to``: sessions move between a SQLite
file and PostgreSQL in either direction, every row kept, every message checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from test_notebooks_kernel import lab_env, run_all

from slotmagic import Message, Session, SlotConfig
from slotmagic._copy import copy_sessions
from slotmagic._store import open_store
from slotmagic._store.rows import RowStore, SessionDump
from tools.tutorials import copy_committed, tutorials

NOTEBOOKS = tutorials()  # as git tracks them; each run from a copy of its committed text


def dumps(target: str | Path) -> dict[str, SessionDump]:
    store = open_store(str(target))
    assert isinstance(store, RowStore)
    try:
        return {name: store.dump_session(name) for name in store.sessions()}
    finally:
        store.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slotmagic._cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_tutorials_sessions_round_trip_sqlite_postgres_sqlite_unchanged(tmp_path: Path, postgres_url: str) -> None:
    first = tmp_path / "tutorials.sqlite3"
    for notebook in NOTEBOOKS:
        copy = copy_committed(notebook, tmp_path / "notebooks")
        run_all(copy, lab_env(copy, first))
    before = dumps(first)
    # A session per notebook (and the fan-out's own session, from the fan-out notebook).
    assert {n.name for n in NOTEBOOKS} <= set(before) and all(d.tables["messages"] for d in before.values())

    there = cli("copy", str(first), postgres_url)
    assert there.returncode == 0, there.stderr
    assert "every message's checksum matches" in there.stdout
    back = tmp_path / "back.sqlite3"
    again = cli("copy", postgres_url, str(back))
    assert again.returncode == 0, again.stderr

    assert dumps(postgres_url) == before
    after = dumps(back)
    assert after == before  # every row of every table, slot ids aside
    for name, dump in before.items():
        assert after[name].message_digests() == dump.message_digests()
        with Session.open(name, db_path=first) as old, Session.open(name, db_path=back) as new:
            assert new.current_slot == old.current_slot
            for slot in old.list_slots():
                assert new.messages(slot.id) == old.messages(slot.id)
                turns = [(t.number, t.start, t.count, t.info, t.created_at) for t in new.history.turns(slot.id)]
                assert turns == [(t.number, t.start, t.count, t.info, t.created_at) for t in old.history.turns(slot.id)]
                assert new.context(slot.id) == old.context(slot.id)
            assert new.workflows() == old.workflows()


def test_a_copy_keeps_tombstones_odd_text_and_kept_results(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "odd.sqlite3"
    odd = "NUL \x00 inside, \ue000 a private-use mark, 😀, and a quote ' \" \\"
    with Session.open("odd", db_path=source) as session:
        session.submit_turn(odd)
        session.derive_slot("middle")
        session.submit_turn("in the middle", slot="middle")
        session.derive_slot("leaf", parent="middle")
        session.delete_slot("middle")  # a tombstone that 'leaf' still reads through
        session.create_slot("lease", SlotConfig.readonly(), messages=[Message.user("\ue000" + odd)])
        session.store.namespace_put("odd", "k1", "tool", odd * 3)
        session.workflows.define("claim", "intake -> evidence")
    report = copy_sessions(str(source), postgres_url)
    assert report.sessions == ["odd"] and report.messages == 5
    back = tmp_path / "back.sqlite3"
    copy_sessions(postgres_url, str(back))
    assert dumps(back) == dumps(source) == dumps(postgres_url)
    with Session.open("odd", db_path=postgres_url) as session:
        assert session.messages("leaf")[0].content == odd
        assert session.messages("lease")[0].content == "\ue000" + odd
        assert session.store.namespace_get("odd", "k1") == odd * 3


def test_a_session_already_there_is_not_overwritten(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "a.sqlite3"
    with Session.open("nb", db_path=source) as session:
        session.submit_turn("from the file")
    with Session.open("nb", db_path=postgres_url) as session:
        session.submit_turn("already on the server")
    done = cli("copy", str(source), postgres_url)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "exists already" in done.stderr and "Traceback" not in done.stderr
    with Session.open("nb", db_path=postgres_url) as session:
        assert session.messages()[0].content == "already on the server"


def test_copy_mistakes_are_one_line_without_the_password(tmp_path: Path) -> None:
    source = tmp_path / "a.sqlite3"
    Session.open("nb", db_path=source).close()
    url = "postgresql://someone:hunter2-Secret-pw@127.0.0.1:1/test?schema=nothing_here"
    done = cli("copy", str(source), url)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "hunter2-Secret-pw" not in done.stderr + done.stdout
    assert "postgresql://***@127.0.0.1:1/test" in done.stderr
    missing = cli("copy", str(source), str(tmp_path / "b.sqlite3"), "--session", "nope")
    assert missing.returncode == 2 and "no session 'nope'" in missing.stderr
    nowhere = cli("copy", str(tmp_path / "typo.sqlite3"), str(tmp_path / "c.sqlite3"))
    assert nowhere.returncode == 2 and "no state file" in nowhere.stderr
    assert not (tmp_path / "typo.sqlite3").exists() and not (tmp_path / "c.sqlite3").exists()


def test_slot_session_copy_to(ip: object, postgres_url: str) -> None:
    shell: object = ip
    shell.run_cell("%%turn\nkept on the server")  # type: ignore[attr-defined]
    shell.run_cell(f"%slot session --copy-to {postgres_url}")  # type: ignore[attr-defined]
    from slotmagic._magics import current_session

    name = current_session().session_id
    with Session.open(name, db_path=postgres_url) as session:
        assert session.messages()[0].content == "kept on the server"
    with pytest.raises(UsageError, match="PGPASSWORD"):
        shell.run_cell("%slot session --copy-to postgresql://me:pw@127.0.0.1/test")  # type: ignore[attr-defined]


def test_copy_cases_that_went_wrong(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of these copied the wrong thing, made something, or said the wrong thing (issue 26)."""
    source = tmp_path / "a.sqlite3"
    with Session.open("nb1", db_path=source) as session:
        session.submit_turn("kept")
    monkeypatch.chdir(tmp_path)  # where a URL taken for a path would have been made
    # Another database's URL is no file path: nothing made, one line.
    other = cli("copy", str(source), "mysql://me:Secret-pw@db.example/z")
    assert other.returncode == 2 and other.stdout == "" and other.stderr.count("\n") == 1
    assert "is a URL slotmagic cannot open" in other.stderr and "Secret-pw" not in other.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite3"]
    # A schema that is not there is not made in the source.
    absent = postgres_url.replace("?schema=", "?schema=absent_")
    empty = cli("copy", absent, str(tmp_path / "b.sqlite3"))
    assert empty.returncode == 2 and "there is no slotmagic store in schema absent_" in empty.stderr
    assert not schema_exists(absent) and not (tmp_path / "b.sqlite3").exists()
    # The same session named twice is copied once, and said so.
    twice = cli("copy", str(source), str(tmp_path / "c.sqlite3"), "--session", "nb1", "--session", "nb1")
    assert twice.returncode == 0, twice.stderr
    assert twice.stdout.startswith("copied 1 session (1 slots, 2 messages)")
    # A copy that fails leaves no state file behind.
    failed = cli("copy", str(source), str(tmp_path / "c.sqlite3"))  # nb1 is there already
    assert failed.returncode == 2 and "exists already" in failed.stderr
    assert (tmp_path / "c.sqlite3").exists()  # it was there before: kept
    missing = cli("copy", str(source), str(tmp_path / "d.sqlite3"), "--session", "nope")
    assert missing.returncode == 2 and "no session 'nope'" in missing.stderr
    assert not list(tmp_path.glob("d.sqlite3*"))
    # schema= twice: which one was meant is not guessed.
    doubled = cli("copy", str(source), postgres_url + "&schema=other")
    assert doubled.returncode == 2 and "names schema= 2 times" in doubled.stderr
    assert not schema_exists(postgres_url) and not schema_exists(postgres_url.split("?")[0] + "?schema=other")


def test_a_failed_copy_removes_the_state_file_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic import StoreError
    from slotmagic._store.rows import SessionDump as Dump

    source = tmp_path / "a.sqlite3"
    with Session.open("nb1", db_path=source) as session:
        session.submit_turn("kept")
    monkeypatch.setattr(Dump, "checksum", lambda self: str(id(self)))  # every read-back differs
    with pytest.raises(StoreError, match="differs"):
        copy_sessions(str(source), str(tmp_path / "new.sqlite3"))
    assert not list(tmp_path.glob("new.sqlite3*"))


def schema_exists(url: str) -> bool:
    import psycopg

    from slotmagic._store.urls import parse_postgres_url

    schema = parse_postgres_url(url).schema
    with psycopg.connect(url.split("?")[0]) as db:
        return db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None
