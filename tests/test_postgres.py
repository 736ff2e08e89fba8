"""What only the PostgreSQL store has: URLs and schemas, its migrations, its driver imported
only when used, credentials shown nowhere, text PostgreSQL cannot hold as is, a lost
connection. (The store contract itself runs on both stores: test_session.py,
test_concurrency.py, test_durability.py.)"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from conftest import POSTGRES
from slotmagic import ConfigError, Message, Session, StoreError
from slotmagic._core.cells import CellRecord
from slotmagic._store import open_store
from slotmagic._store.postgres import PostgresStore
from slotmagic._store.postgres_schema import CACHED_SQL, MIGRATIONS, VERSION_SETTING
from slotmagic._store.urls import parse_postgres_url, shown_target

SECRET = "Planted-Secret-pw-4711"
SERVER = urlsplit(POSTGRES)  # $SLOTMAGIC_TEST_POSTGRES: its host, port and database, whatever they are
SHOWN_SERVER = shown_target(POSTGRES).partition("?")[0]  # as slotmagic prints it, the user masked


def with_password(url: str) -> str:
    found = url.replace(f"//{SERVER.username or ''}@", f"//{SERVER.username or ''}:{SECRET}@", 1)
    assert SECRET in found, f"no user to give a password to in {url}"
    return found


def schema_of(url: str) -> str:
    return parse_postgres_url(url).schema


def test_a_url_selects_the_postgres_store_everywhere(
    postgres_url: str, ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.open("a", db_path=postgres_url) as session:
        assert isinstance(session.store, PostgresStore)
        session.submit_turn("from db_path=")
    monkeypatch.setenv("SLOTMAGIC_DB", postgres_url)
    with Session.open("a") as session:  # $SLOTMAGIC_DB
        assert isinstance(session.store, PostgresStore)
        assert session.messages()[0].content == "from db_path="
    ip.run_cell(f"%config SlotMagic.db_path = {postgres_url!r}")
    ip.run_cell("%config SlotMagic.session_id = 'a'")
    ip.run_cell("%%turn\nfrom %config")
    with Session.open("a", db_path=postgres_url) as session:
        assert [m.content for m in session.messages() if m.role == "user"] == ["from db_path=", "from %config"]


def test_schemas_keep_sessions_apart_and_bad_ones_are_one_line(postgres_url: str) -> None:
    other = postgres_url.replace("?schema=", "?schema=other_")
    try:
        with Session.open("same", db_path=postgres_url) as one, Session.open("same", db_path=other) as two:
            one.submit_turn("only in the first schema")
            assert two.messages() == []
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema_of(other)} CASCADE")
    for bad in ("Team-A", "1team", "x" * 64, "a;drop"):
        with pytest.raises(ConfigError, match="schema=") as caught:
            Session.open("s", db_path=f"{POSTGRES}?schema={bad}")
        assert "\n" not in str(caught.value)


def test_the_application_name_is_the_urls_and_a_bad_one_is_one_line(postgres_url: str) -> None:
    assert parse_postgres_url(POSTGRES).application_name == "slotmagic"
    named = parse_postgres_url(postgres_url)
    assert named.application_name.startswith("slotmagic_t_") and "application_name" not in named.conninfo
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresStore)
        with store._read() as db:
            shown = db.execute("SELECT current_setting('application_name')").fetchone()[0]
        assert shown == named.application_name
    for bad in ("", "two words", "x" * 64):
        with pytest.raises(ConfigError, match="application_name=") as caught:
            parse_postgres_url(f"{POSTGRES}?application_name={bad}")
        assert "\n" not in str(caught.value)


def test_a_schema_holding_other_tables_is_refused_untouched(postgres_url: str) -> None:
    schema = schema_of(postgres_url)
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"CREATE TABLE {schema}.invoices (id int)")
    with pytest.raises(StoreError, match="not slotmagic's"):
        Session.open("s", db_path=postgres_url)
    with psycopg.connect(POSTGRES) as db:
        tables = db.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
        assert [r[0] for r in tables] == ["invoices"]


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    open_store(postgres_url).close()
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        db.execute(f"UPDATE {schema_of(postgres_url)}.slotmagic_schema SET version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StoreError, match="upgrade slotmagic"):
        open_store(postgres_url)


OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from slotmagic import Session
Path(sys.argv[2], sys.argv[3]).touch()  # imported and ready
while not Path(sys.argv[2], "go").exists():
    time.sleep(0.001)
with Session.open("race", db_path=sys.argv[1]) as session:
    session.submit_turn(sys.argv[3])
print("ok")
"""


@pytest.mark.slow
def test_kernels_starting_at_once_migrate_once(postgres_url: str, tmp_path: Path) -> None:
    """Six processes open a new schema at once: each waits, imported, until all six are ready."""
    import time

    names = [f"k{n}" for n in range(6)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT_ONCE, postgres_url, str(tmp_path), name], stdout=subprocess.PIPE, text=True
        )
        for name in names
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / name).exists() for name in names):
        assert time.monotonic() < deadline and all(proc.poll() is None for proc in procs), "a process did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "ok"
    schema = schema_of(postgres_url)
    with psycopg.connect(POSTGRES) as db:
        assert db.execute(f"SELECT version FROM {schema}.slotmagic_schema").fetchall() == [(len(MIGRATIONS),)]
        assert db.execute(f"SELECT count(*) FROM {schema}.sessions").fetchone() == (1,)
    with Session.open("race", db_path=postgres_url) as session:
        stored = {m.content for s in session.list_slots() for m in session.messages(s.id) if m.role == "user"}
        assert stored == {f"k{n}" for n in range(6)}


def test_the_driver_is_imported_only_for_a_url(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from slotmagic import Session\n"
        "Session.open('s', db_path=sys.argv[1]).close()\n"
        "print('psycopg' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.sqlite3")], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
    missing = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"  # as if the postgres extra were not installed
        "from slotmagic import Session, StoreError\n"
        "try:\n"
        "    Session.open('s', db_path=sys.argv[1])\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", missing, with_password(POSTGRES)], capture_output=True, text=True, timeout=60
    )
    assert "pip install 'slotmagic[postgres]'" in done.stdout, done.stderr
    assert SECRET not in done.stdout + done.stderr and done.stdout.count("\n") == 1


def test_credentials_are_shown_nowhere(
    postgres_url: str, ip: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The password of the URL is used to connect (the test server ignores it) and appears in
    no output, repr, error, log record or stored row."""
    url = with_password(postgres_url)
    caplog.set_level(logging.DEBUG)
    ip.run_cell(f"import os; os.environ['SLOTMAGIC_DB'] = {url!r}")
    ip.run_cell("%reload_ext slotmagic")
    ip.run_cell("%%turn\nhello")
    ip.run_cell("%slot session")
    ip.run_cell("%slot list")
    seen = [capsys.readouterr().out]
    with Session.open("s", db_path=url) as session:
        seen += [repr(session.store), str(session.store.path)]
        with pytest.raises(Exception) as caught:
            session.switch_slot("nope")
        seen.append(str(caught.value))
    no_server = url.replace(f"@{SERVER.netloc.rpartition('@')[2]}", f"@{SERVER.hostname}:1", 1)
    assert no_server != url
    for broken in (no_server, url.replace(f"{SERVER.path}?", "/no_such_db?", 1)):
        with pytest.raises(StoreError) as refused:
            Session.open("s", db_path=broken)
        seen.append(str(refused.value))
        assert f"postgresql://***@{SERVER.hostname}" in str(refused.value) and "\n" not in str(refused.value)
    seen += [r.getMessage() for r in caplog.records]
    with psycopg.connect(POSTGRES) as db:
        for table in ("sessions", "slots", "messages", "turns", "meta"):
            rows = db.execute(f"SELECT t::text FROM {schema_of(url)}.{table} t").fetchall()
            seen += [r[0] for r in rows]
    assert "session " in seen[0] and SHOWN_SERVER in seen[0]
    assert not [text for text in seen if SECRET in text]
    assert shown_target(f"postgresql://u@h/db?password={SECRET}") == "postgresql://***@h/db?password=***"


def test_any_text_is_stored_exactly(postgres_url: str) -> None:
    texts = ["NUL \x00 byte", "\ue000 starts with the escape mark", "\ue000", "", "x" * 5_000_000, "😀 ' \" \\ %s ?"]
    with Session.open("t", db_path=postgres_url) as session:
        session.append([Message.user(t) for t in texts])
    with Session.open("t", db_path=postgres_url) as session:
        assert [m.content for m in session.messages()] == texts
    with pytest.raises(StoreError, match="NUL") as caught:
        Session.open("a \x00 session", db_path=postgres_url)
    assert "\n" not in str(caught.value)


def terminate(pid: int | None = None, *, url: str | None = None) -> int:
    """The server drops one backend (``pid``), or every connection of the test's store
    (``url``, by its own application name): a restart, a failover. How many it dropped."""
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        if pid is not None:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            return 1
        assert url is not None
        application = parse_postgres_url(url).application_name
        assert application.startswith("slotmagic_t_"), "a test drops only its own connections"
        dropped = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application,),
        ).fetchone()
        return int(dropped[0]) if dropped else 0


def test_a_connection_lost_while_idle_is_replaced_unnoticed(postgres_url: str) -> None:
    with Session.open("s", db_path=postgres_url) as session:
        session.submit_turn("before")
        assert terminate(url=postgres_url) == 1
        assert session.list_slots()[0].meta.message_count == 2  # a read on a new connection
        assert terminate(url=postgres_url) == 1
        session.submit_turn("after")  # a write: nothing had been sent, so it begins again
        assert [m.content for m in session.messages() if m.role == "user"] == ["before", "after"]


def test_a_connection_lost_mid_turn_is_one_line_and_stores_nothing(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.open("s", db_path=postgres_url) as session:
        session.submit_turn("before")
        store: Any = session.store
        real_append = PostgresStore._append

        def append_then_lose(self: Any, *args: Any) -> Any:
            record = real_append(self, *args)
            terminate(self._db.conn.info.backend_pid)  # between the turn's rows and COMMIT
            return record

        monkeypatch.setattr(PostgresStore, "_append", append_then_lose)
        with pytest.raises(StoreError) as lost:
            session.submit_turn("lost with the connection")
        assert "\n" not in str(lost.value) and "postgresql://***@" in str(lost.value)
        monkeypatch.setattr(PostgresStore, "_append", real_append)
        assert store.tip("s", "default").length == 2
        session.submit_turn("after")
        assert [m.content for m in session.messages() if m.role == "user"] == ["before", "after"]


def test_a_turn_whose_commit_went_through_is_not_reported_failed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection lost just after the server committed a turn, before its answer came: the
    turn was stored but reported failed. Whether it committed is asked on a new connection;
    one lost before its COMMIT reached the server did not commit, so it is run again on a new
    connection and stored once; lost at every try, it fails in one line and stores nothing."""
    from slotmagic._store.postgres import _Connection

    real = _Connection.script  # a write's last round trip: its NOTIFY and COMMIT
    when: list[str] = []

    def lose_the_connection(self: Any, sql: str, parameters: Any = (), /) -> None:
        if not sql.endswith("COMMIT") or not when:
            return real(self, sql, parameters)
        if when.pop() == "after":
            real(self, sql, parameters)  # the server commits
        terminate(self.conn.info.backend_pid)  # and the connection is gone
        self.execute("SELECT 1")  # what the client sees

    monkeypatch.setattr(_Connection, "script", lose_the_connection)
    with Session.open("s", db_path=postgres_url) as session:
        when.append("after")
        reply = session.submit_turn("stored, its answer lost")
        assert reply.turn == 1
        when.append("before")
        assert session.submit_turn("lost before its commit, run again").turn == 2
        when.extend(["before"] * 4)
        with pytest.raises(StoreError) as lost:
            session.submit_turn("lost before its commit at every try")
        assert "\n" not in str(lost.value)
        assert str(lost.value).endswith("(tried 4 times, each on a new connection; nothing was stored)")
        assert when == []
        session.submit_turn("after")
    with Session.open("s", db_path=postgres_url) as again:
        assert [m.content for m in again.messages() if m.role == "user"] == [
            "stored, its answer lost",
            "lost before its commit, run again",
            "after",
        ]


def test_an_exception_a_signal_handler_raises_into_a_query_leaves_the_store_usable(postgres_url: str) -> None:
    """psycopg cancels a query for Ctrl-C only; another exception raised into one left the
    connection "another command is already in progress" for good."""
    import signal

    class Timeout(Exception):
        pass

    def ring(*_: object) -> None:
        raise Timeout

    with Session.open("s", db_path=postgres_url) as session:
        session.submit_turn("before")
        store: Any = session.store
        previous = signal.signal(signal.SIGALRM, ring)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(Timeout), store._read() as db:
                db.execute("SELECT pg_sleep(3)")  # what a slow query of the store's would be
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert session.list_slots()[0].meta.message_count == 2
        session.submit_turn("after")
        assert [m.content for m in session.messages() if m.role == "user"] == ["before", "after"]


def test_a_team_schema_owned_by_a_group_role(postgres_url: str) -> None:
    """The README's grants: a group role owns the schema, members open it as that role, and
    a role without grants is refused in one line."""
    schema, tag = schema_of(postgres_url), schema_of(postgres_url)[2:]
    team, member, outsider = f"team_{tag}", f"bob_{tag}", f"eve_{tag}"
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {team} NOLOGIN")
        admin.execute(f"CREATE ROLE {member} LOGIN IN ROLE {team}")
        admin.execute(f"CREATE ROLE {outsider} LOGIN")
        admin.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {team}")
        admin.execute(f"REVOKE ALL ON SCHEMA {schema} FROM PUBLIC")
    base = POSTGRES.replace("postgresql://postgres@", "postgresql://{}@")
    try:
        as_member = f"{base.format(member)}?schema={schema}&options=-c%20role%3D{team}"
        with Session.open("team", db_path=as_member) as session:
            session.submit_turn("for the team")
        with psycopg.connect(POSTGRES) as admin:
            owners = admin.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = %s", (schema,))
            assert [r[0] for r in owners] == [team]
        with pytest.raises(StoreError, match="permission denied") as refused:
            Session.open("team", db_path=f"{base.format(outsider)}?schema={schema}")
        assert "\n" not in str(refused.value)
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            for role in (member, outsider, team):
                admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_config_shows_no_credentials_and_refuses_a_typed_password(
    ip: Any,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ip.run_cell(f"%config SlotMagic.db_path = {with_password(postgres_url)!r}")  # refused, kept as it was
    assert ip.config.SlotMagic.get("db_path") in (None, "")
    (refusal,) = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "PGPASSWORD" in refusal and SECRET not in refusal and "postgresql://***@" in refusal
    ip.run_cell(f"%config SlotMagic.db_path = {postgres_url!r}")
    ip.run_cell("%config SlotMagic")
    shown = capsys.readouterr().out
    assert "db_path" in shown and SHOWN_SERVER in shown
    monkeypatch.setenv("SLOTMAGIC_DB", with_password(postgres_url))  # from outside the notebook: used
    ip.config.SlotMagic.pop("db_path")
    ip.run_cell("%reload_ext slotmagic")
    ip.run_cell("%config SlotMagic")
    ip.run_cell("%slot session")
    shown = capsys.readouterr()
    assert SECRET not in shown.out + shown.err and SHOWN_SERVER in shown.out


def test_subscribers_hear_other_connections_and_a_listener_that_lost_its_connection(postgres_url: str) -> None:
    """A listener that lost its connection catches up by version when it is back: a write
    made while it was away (its notification went nowhere) is news; nothing written, no news."""
    import threading
    import time

    heard = threading.Semaphore(0)
    with open_store(postgres_url) as mine, open_store(postgres_url) as theirs:
        assert isinstance(mine, PostgresStore)
        mine.subscribe(heard.release)
        mine.ensure_session("s")  # its own writes are not news to it
        assert not heard.acquire(timeout=0.5)
        theirs.ensure_session("t")
        assert heard.acquire(timeout=5)
        listener = mine._listener
        assert listener is not None and listener.pid is not None
        for write_meanwhile in (True, False):
            before = listener.pid
            terminate(listener.pid)
            deadline = time.monotonic() + 10
            while listener.connected.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not listener.connected.is_set()
            if write_meanwhile:
                theirs.ensure_session(f"while away {before}")  # notified to nobody
            while listener.pid == before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert listener.connected.wait(10) and listener.pid != before
            if write_meanwhile:
                assert heard.acquire(timeout=5), "a listener back from a lost connection missed a write"
            else:
                assert not heard.acquire(timeout=0.5), "nothing was written, yet subscribers were told"
        assert terminate(url=postgres_url) == 3  # two stores' connections and the listener's
        theirs.ensure_session("u")  # on a new connection
        assert heard.acquire(timeout=5)


def test_a_schema_of_version_1_upgrades_and_exploring_works_on_it(postgres_url: str) -> None:
    schema = schema_of(postgres_url)
    with Session.open("old", db_path=postgres_url) as s:
        for text in ("the deposit statute", "a second turn"):
            s.submit_turn(text)
    with psycopg.connect(POSTGRES, autocommit=True) as db:  # back to the store before issue 15
        db.execute(f"DROP TABLE {schema}.marks")
        db.execute(f"ALTER TABLE {schema}.slots DROP COLUMN undo")
        db.execute(f"DROP TABLE {schema}.cells")
        db.execute(f"DROP INDEX {schema}.turns_cached")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN changed")
        db.execute(f"ALTER TABLE {schema}.changes DROP COLUMN unscoped")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN noted")  # version 6's
        db.execute(f"DROP TRIGGER slots_changed ON {schema}.slots")
        db.execute(f"DROP TRIGGER slots_removed ON {schema}.slots")
        db.execute(f"DROP FUNCTION {schema}.slot_changed(), {schema}.slot_removed()")
        db.execute(f"ALTER TABLE {schema}.slots DROP COLUMN changed")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN removed")
        db.execute(f"UPDATE {schema}.slotmagic_schema SET version = 1")
    with Session.open("old", db_path=postgres_url) as s:
        kept = s.store.record_cell("old", "cell-1", CellRecord("%slot pin 0", "changes", current="default"))
        assert s.store.cell_record("old", "cell-1") == kept and kept.seq == 1  # version 3: cell records
        s.history.pin(0)
        step = s.history.undo()
        assert step.turns == 1 and [m.content for m in s.messages() if m.role == "user"] == ["the deposit statute"]
        assert [(h.slot, h.turn, h.role) for h in s.history.search("STATUTE deposit")][:1] == [("default", 1, "user")]
        s.history.redo()
        assert s.history.marks() == {0: "pin"} and s.history.gc().messages == 0
    with psycopg.connect(POSTGRES) as db:
        assert db.execute(f"SELECT version FROM {schema}.slotmagic_schema").fetchall() == [(len(MIGRATIONS),)]


def test_a_schema_of_version_3_gains_the_index_of_turns_a_prompt_cache_served(postgres_url: str) -> None:
    from slotmagic._core.records import TurnInfo
    from slotmagic._core.usage import Usage

    schema = schema_of(postgres_url)
    with Session.open("old", db_path=postgres_url) as s:
        for i in range(6):
            turn = [Message.user(f"q{i}"), Message.assistant(f"a{i}")]
            usage = Usage(1_000, 10, 300 if i % 3 == 0 else 0)
            s.store.append_turn("old", "default", turn, TurnInfo(model="openai:gpt-4o", usage=usage))
    with psycopg.connect(POSTGRES, autocommit=True) as db:  # back to the store before version 4
        db.execute(f"DROP INDEX {schema}.turns_cached")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN changed")  # version 5's
        db.execute(f"ALTER TABLE {schema}.changes DROP COLUMN unscoped")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN noted")  # version 6's
        db.execute(f"DROP TRIGGER slots_changed ON {schema}.slots")
        db.execute(f"DROP TRIGGER slots_removed ON {schema}.slots")
        db.execute(f"DROP FUNCTION {schema}.slot_changed(), {schema}.slot_removed()")
        db.execute(f"ALTER TABLE {schema}.slots DROP COLUMN changed")
        db.execute(f"ALTER TABLE {schema}.sessions DROP COLUMN removed")
        db.execute(f"UPDATE {schema}.slotmagic_schema SET version = 3")
    with Session.open("old", db_path=postgres_url) as s:
        assert s.budget().cached_tokens == 600
    with psycopg.connect(POSTGRES) as db:
        assert db.execute(f"SELECT version FROM {schema}.slotmagic_schema").fetchall() == [(len(MIGRATIONS),)] == [(6,)]
        db.execute(f"SET search_path = {schema}")
        db.execute("SET enable_seqscan = off")  # a table this small is read whole otherwise
        plan = db.execute(
            f"EXPLAIN SELECT start FROM turns WHERE slot = 1 AND start >= 0 AND start < 99 AND {CACHED_SQL}"
        ).fetchall()
        assert "turns_cached" in " ".join(row[0] for row in plan), plan
        found = db.execute(f"SELECT start FROM turns WHERE {CACHED_SQL} ORDER BY start").fetchall()
        assert found == [(0,), (6,)]


def connections(url: str) -> int:
    """The server's count of the store's connections (``pg_stat_activity``, by its application name)."""
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        found = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (parse_postgres_url(url).application_name,),
        ).fetchone()
        return int(found[0]) if found else 0


def test_an_idle_store_holds_no_connection_and_a_live_one_at_most_two(postgres_url: str) -> None:
    import time

    url = f"{postgres_url}&idle_timeout=1"
    with Session.open("s", db_path=url) as session:
        session.submit_turn("one")
        assert connections(url) == 1
        deadline = time.monotonic() + 15
        while connections(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert connections(url) == 0, "an idle store still holds its connection"
        session.submit_turn("two")  # a new connection, unnoticed
        session.store.subscribe(lambda: None)
        assert connections(url) == 2  # its own and the listener's
        with open_store(url) as other:
            other.ensure_session("t")
        assert [m.content for m in session.messages() if m.role == "user"] == ["one", "two"]
        assert connections(url) == 2
    for bad in ("0", "x", "1e9"):
        with pytest.raises(ConfigError, match="idle_timeout=") as caught:
            parse_postgres_url(f"{POSTGRES}?idle_timeout={bad}")
        assert "\n" not in str(caught.value)


def test_a_read_lost_with_its_connection_tells_subscribers_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live refresh whose read lost the connection half way fails; the data it would have
    shown is not left stale until the next notification: subscribers are told again."""
    import threading

    heard = threading.Semaphore(0)
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresStore)
        store.ensure_session("s")
        store.subscribe(heard.release)
        real_sync = PostgresStore._sync

        def lose_after_the_counter(self: PostgresStore, *changes: Any) -> None:
            real_sync(self, *changes)
            terminate(self._db.conn.info.backend_pid)  # between the counter and the read itself

        monkeypatch.setattr(PostgresStore, "_sync", lose_after_the_counter)
        store._forget()  # nothing cached: the read goes to the server
        with pytest.raises(StoreError):
            store.slots("s")
        monkeypatch.setattr(PostgresStore, "_sync", real_sync)
        assert heard.acquire(timeout=5), "a refresh lost with its connection was not asked again"
        assert [s.id for s in store.slots("s")] == ["default"]


def test_a_kernel_following_its_session_is_not_woken_by_other_sessions(postgres_url: str) -> None:
    """A team's kernels share a schema: notifications name the sessions a write changed, and a
    store following one session tells its subscribers only of writes to it."""
    import threading

    heard = threading.Semaphore(0)
    with open_store(postgres_url) as mine, open_store(postgres_url) as theirs:
        assert isinstance(mine, PostgresStore)
        mine.ensure_session("mine")
        mine.follow("mine")
        mine.subscribe(heard.release)
        theirs.ensure_session("someone else's, with a space")
        theirs.update_meta("k", lambda old: "v")  # no session: nothing a view shows
        assert not heard.acquire(timeout=1.0), "woken by a write to another session"
        theirs.derive_slot("mine", "side", "default", mine.slot("mine", "default").config, 0)
        assert heard.acquire(timeout=5)
        mine.follow(None)
        theirs.ensure_session("another")
        assert heard.acquire(timeout=5)


def test_a_kernel_following_its_session_hears_no_other_session(postgres_url: str) -> None:
    """Each session has a channel of its own: a kernel following one is not even sent the
    notifications of writes to others (50 kernels on one schema are not each woken by every
    turn), nor of writes no view shows (token counts, calibration)."""
    import threading

    heard = threading.Semaphore(0)
    with open_store(postgres_url) as mine, open_store(postgres_url) as theirs:
        assert isinstance(mine, PostgresStore)
        mine.ensure_session("mine")
        mine.follow("mine")
        payloads: list[str] = []
        real = mine._notified

        def received(batch: Any) -> None:
            payloads.extend(batch)
            real(batch)

        mine._notified = received  # type: ignore[method-assign]
        mine.subscribe(heard.release)
        theirs.ensure_session("theirs")
        for name in ("a", "b", "c"):
            theirs.derive_slot("theirs", name, "default", theirs.slot("theirs", "default").config, 0)
        theirs.update_meta("k", lambda old: "v")
        theirs.derive_slot("mine", "side", "default", mine.slot("mine", "default").config, 0)
        assert heard.acquire(timeout=5)  # notifications come in commit order: the others first
        assert [p.split(" ", 3)[3] for p in payloads] == ['["mine"]']


def test_a_write_to_another_session_leaves_a_kernels_cache_alone(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes record the sessions they changed: a kernel reads again only what another kernel
    changed (one round trip when it changed nothing this kernel holds), and everything when a
    write could not say which sessions it changed."""
    from slotmagic._store.postgres import _Connection

    with open_store(postgres_url) as mine, open_store(postgres_url) as theirs:
        assert isinstance(mine, PostgresStore)
        mine.ensure_session("mine")
        mine.derive_slot("mine", "side", "default", mine.slot("mine", "default").config, 0)
        assert [s.id for s in mine.slots("mine")] == ["default", "side"]
        statements: list[str] = []
        real = _Connection.execute

        def counted(self: Any, sql: str, parameters: Any = (), /) -> Any:
            if self is mine._held:
                statements.append(sql)
            return real(self, sql, parameters)

        monkeypatch.setattr(_Connection, "execute", counted)
        theirs.ensure_session("theirs")
        theirs.derive_slot("theirs", "b", "default", theirs.slot("theirs", "default").config, 0)
        theirs.update_meta("k", lambda old: "v")
        assert [s.id for s in mine.slots("mine")] == ["default", "side"]
        assert len(statements) == 1  # the counter, and the sessions changed since: none of mine

        statements.clear()
        theirs.derive_slot("mine", "new", "default", theirs.slot("mine", "default").config, 0)
        assert [s.id for s in mine.slots("mine")] == ["default", "new", "side"]
        assert len(statements) > 1  # its slots read again

        mine.slots("theirs")
        statements.clear()
        theirs.record_cell("theirs", "cell-1", CellRecord("%slot list", "reads"))  # names no session
        mine.slots("mine")
        mine.slots("theirs")
        assert sum("JOIN slots" in sql for sql in statements) == 2  # everything read again


def test_kernels_updating_one_value_at_once_each_see_the_others_update(postgres_url: str) -> None:
    """A ``meta`` value (the token estimate's calibration) is updated under a lock on its key,
    not the writers' turn: updates from several kernels at once are never lost, and a kernel
    holding a turn's write open does not hold them up."""
    import threading

    stores = [open_store(postgres_url) for _ in range(3)]
    try:

        def add(store: Any) -> None:
            for _ in range(20):
                store.update_meta("counted", lambda old: str(int(old or "0") + 1))

        threads = [threading.Thread(target=add, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert stores[0].meta("counted") == "60"
        with stores[1].atomic():  # a write transaction held open: the writers' turn is taken
            stores[1].ensure_session("held")
            meanwhile = threading.Thread(target=stores[2].update_meta, args=("counted", lambda old: "61"))
            meanwhile.start()
            meanwhile.join(10)
            assert not meanwhile.is_alive(), "an update of a value waited for the writers' turn"
        assert stores[0].meta("counted") == "61"
    finally:
        for store in stores:
            store.close()


def test_a_write_lost_in_the_middle_of_its_rows_is_reported_in_one_line(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn's rows go to the server in one pipeline (``executemany``); psycopg warned, over
    several lines, that it could not end one whose connection was lost, besides the store's
    own one-line error."""
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresStore)
        store.ensure_session("s")
        with caplog.at_level(logging.WARNING), pytest.raises(StoreError) as lost, store._write() as db:

            def rows() -> Any:  # the connection is lost once the pipeline has begun
                yield ("a", "1")
                terminate(db.conn.info.backend_pid)
                yield ("b", "2")

            db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", rows())
        assert "\n" not in str(lost.value)
        assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
        assert store.meta("a") is None  # nothing half-stored, and the store goes on


def test_a_consistent_block_looks_for_other_kernels_writes_once(postgres_url: str) -> None:
    """In ``consistent()`` this thread's first read looks for others' writes and the rest read
    on from there (a turn's start: one look, not four); after the block, and on another thread
    meanwhile, reads look as ever."""
    import threading

    with open_store(postgres_url) as mine, open_store(postgres_url) as theirs:
        mine.ensure_session("c")
        theirs.ensure_session("c")
        theirs.derive_slot("c", "x", "default", theirs.slot("c", "default").config, 0)
        with mine.consistent():
            assert [s.id for s in mine.slots("c")] == ["default", "x"]  # the first read looked
            theirs.derive_slot("c", "y", "default", theirs.slot("c", "default").config, 0)
            assert [s.id for s in mine.slots("c")] == ["default", "x"]  # as of that look
            elsewhere: list[list[str]] = []
            reader = threading.Thread(target=lambda: elsewhere.append([s.id for s in mine.slots("c")]))
            reader.start()
            reader.join()
            assert elsewhere == [["default", "x", "y"]]  # another thread's read looks
        assert [s.id for s in mine.slots("c")] == ["default", "x", "y"]


def test_a_slot_row_written_on_any_connection_records_the_change_counter(postgres_url: str) -> None:
    """``slots.changed`` (schema version 6: kernels read again only the rows others wrote) is
    set by the schema's trigger on every write to a slot row, from the schema's own counter,
    whatever the writing connection's search_path (an administrator's, a script's)."""
    schema = schema_of(postgres_url)
    with Session.open("s", db_path=postgres_url) as s:
        s.create_slot("a")
        s.append([Message.user("hi")], slot="a")
    with psycopg.connect(POSTGRES, autocommit=True) as db:  # search_path: the server's default
        version = db.execute(f"SELECT version FROM {schema}.changes").fetchone()[0]  # type: ignore[index]
        changed = db.execute(f"SELECT changed FROM {schema}.slots WHERE name = 'a'").fetchone()[0]  # type: ignore[index]
        assert changed == version > 0
        db.execute(f"UPDATE {schema}.changes SET version = version + 1")
        db.execute(f"UPDATE {schema}.slots SET tokens = tokens WHERE name = 'a'")
        changed = db.execute(f"SELECT changed FROM {schema}.slots WHERE name = 'a'").fetchone()[0]  # type: ignore[index]
        assert changed == version + 1
        db.execute(f"UPDATE {schema}.changes SET version = version + 1")
        db.execute(f"DELETE FROM {schema}.slots WHERE name = 'a'")
        removed = db.execute(f"SELECT removed FROM {schema}.sessions WHERE id = 's'").fetchone()[0]  # type: ignore[index]
        assert removed == version + 2
        # A store's write transaction hands its counter to the triggers (no read of the table).
        with db.transaction():
            db.execute(f"SELECT set_config('{VERSION_SETTING}', '999', true)")
            db.execute(f"UPDATE {schema}.slots SET tokens = tokens WHERE name = 'default'")
        assert db.execute(f"SELECT changed FROM {schema}.slots WHERE name = 'default'").fetchone() == (999,)
    with Session.open("s", db_path=postgres_url) as s:
        s.append([Message.user("again")])
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        version = db.execute(f"SELECT version FROM {schema}.changes").fetchone()[0]  # type: ignore[index]
        assert db.execute(f"SELECT changed FROM {schema}.slots WHERE name = 'default'").fetchone() == (version,)
