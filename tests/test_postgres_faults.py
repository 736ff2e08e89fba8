"""A PostgreSQL server that drops connections in the middle of calls (a restart, a failover,
an administrator's ``pg_terminate_backend``): a call whose connection dies runs again on a new
one when that is safe, so every read and every open succeeds, and a write is either stored or
reported not stored, never both.

The kill loop drops only the test's own connections (by the application name its URL
carries, see conftest's ``postgres_url``), never another test run's. It is bounded by the
work done (rounds), not by time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from conftest import POSTGRES
from slotmagic import Session, StoreError
from slotmagic._store.urls import parse_postgres_url

ROUNDS, MAX_ROUNDS = 12, 60  # per worker: at least, and at most while too few connections were dropped
DROPS = 10  # connections dropped before a worker stops (after ROUNDS)
WORKERS = 2


@dataclass
class Outcomes:
    """What each call of a worker said: failed reads and opens, and each write's answer."""

    failed_reads: list[str] = field(default_factory=list)
    writes: dict[str, str] = field(default_factory=dict)  # what -> "stored" or the error line
    rounds: int = 0

    def read(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except StoreError as exc:
            self.failed_reads.append(f"{what}: {exc}")
            return None

    def write(self, what: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except StoreError as exc:
            self.writes[what] = str(exc)
        else:
            self.writes[what] = "stored"


class Killer(threading.Thread):
    """Terminates every connection of the test's own store, again and again."""

    def __init__(self, url: str, every: float) -> None:
        super().__init__(daemon=True)
        self.application = parse_postgres_url(url).application_name
        assert self.application.startswith("slotmagic_t_"), "a test drops only its own connections"
        self.every = every
        self.stop = threading.Event()
        self.dropped = 0

    def run(self) -> None:
        with psycopg.connect(POSTGRES, autocommit=True, application_name="slotmagic_test_killer") as admin:
            while not self.stop.wait(self.every):
                found = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (self.application,),
                ).fetchone()
                self.dropped += int(found[0]) if found else 0


def worker(url: str, name: str, outcomes: Outcomes, killer: Killer) -> None:
    for n in range(MAX_ROUNDS):
        if n >= ROUNDS and killer.dropped >= DROPS:
            break
        outcomes.rounds = n + 1
        session = outcomes.read(f"open {n}", lambda: Session.open(name, db_path=url))
        if session is not None:
            with session:
                one_round(session, f"{name} question {n}", n, outcomes)


def one_round(session: Session, question: str, n: int, outcomes: Outcomes) -> None:
    outcomes.read(f"slots {n}", session.list_slots)
    outcomes.read(f"messages {n}", lambda: [m.content for m in session.messages()])
    outcomes.write(f"turn {n}", lambda: session.submit_turn(question, slot="default"))
    outcomes.read(f"search {n}", lambda: session.history.search("question"))
    outcomes.write(f"create {n}", lambda: session.create_slot(f"c{n}"))
    outcomes.write(f"derive {n}", lambda: session.derive_slot(f"d{n}", parent="default"))
    outcomes.read(f"budget {n}", lambda: session.budget("default"))


def test_a_kill_loop_fails_no_read_or_open_and_never_says_a_stored_write_failed(postgres_url: str) -> None:
    Session.open("setup", db_path=postgres_url).close()  # the schema made before the loop
    killer = Killer(postgres_url, every=0.15)
    outcomes = {f"w{k}": Outcomes() for k in range(WORKERS)}
    threads = [threading.Thread(target=worker, args=(postgres_url, name, o, killer)) for name, o in outcomes.items()]
    killer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    killer.stop.set()
    killer.join()
    assert killer.dropped >= DROPS, "the loop dropped too few connections to test anything"

    for name, said in outcomes.items():
        assert said.failed_reads == []
        with Session.open(name, db_path=postgres_url) as session:
            asked = [m.content for m in session.messages("default") if m.role == "user"]
            for n in range(said.rounds):
                for what, stored in (
                    (f"turn {n}", asked.count(f"{name} question {n}") == 1),
                    (f"create {n}", session.has_slot(f"c{n}")),
                    (f"derive {n}", session.has_slot(f"d{n}")),
                ):
                    answer = said.writes[what]
                    assert asked.count(f"{name} question {n}") <= 1
                    if answer == "stored":
                        assert stored, f"{name} {what} was reported stored and is not"
                    else:
                        assert "\n" not in answer
                        assert not stored or "may be stored" in answer, f"{name} {what}: {answer}, yet it is stored"


def test_every_call_of_the_store_is_run_again_or_settles_a_loss_itself() -> None:
    """A call added to the store is listed as a read or a write, or it would fail at the first
    lost connection where a new one would have worked."""
    from slotmagic._store.postgres import PostgresStore
    from slotmagic._store.postgres_retry import READS, WRITES

    public = {n for n in dir(PostgresStore) if not n.startswith("_") and callable(getattr(PostgresStore, n))}
    assert public - set(READS) - set(WRITES) == {
        "atomic", "consistent", "retried",  # blocks of calls: retried() runs one again
        "update_meta",  # compare-and-set: settles a lost connection itself
        "close", "follow", "subscribe", "channels", "view_only",  # no statement of their own
    }  # fmt: skip


def terminate_own(url: str) -> None:
    application = parse_postgres_url(url).application_name
    with psycopg.connect(POSTGRES, autocommit=True, application_name="slotmagic_test_killer") as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (application,)
        )


def test_a_read_lost_in_the_middle_is_read_again(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic._store.postgres import PostgresStore

    with Session.open("s", db_path=postgres_url) as session:
        session.submit_turn("one")
        store: Any = session.store
        real_sync, lost = PostgresStore._sync, []

        def lose_once(self: PostgresStore, *changes: Any) -> None:
            real_sync(self, *changes)
            if not lost:
                lost.append(1)
                terminate_own(postgres_url)  # between the counter and the read itself

        monkeypatch.setattr(PostgresStore, "_sync", lose_once)
        store._forget()
        assert [s.id for s in store.slots("s")] == ["default"] and lost == [1]


def test_a_call_inside_an_atomic_block_is_run_again_only_with_the_block(postgres_url: str) -> None:
    """Run again alone, a call would commit without the calls before it in the block."""
    with Session.open("s", db_path=postgres_url) as session:
        store: Any = session.store
        with pytest.raises(StoreError) as lost, store.atomic():
            store.create_slot("s", "a", session.slot().config, [])
            terminate_own(postgres_url)
            store.create_slot("s", "b", session.slot().config, [])
        assert "tried" not in str(lost.value)  # the block's owner decides (retried(...))
        assert not session.has_slot("a") and not session.has_slot("b")
        made: list[int] = []

        def both() -> None:
            with store.atomic():
                store.create_slot("s", "a", session.slot().config, [])
                if not made:
                    made.append(1)
                    terminate_own(postgres_url)
                store.create_slot("s", "b", session.slot().config, [])

        store.retried(both)
        assert session.has_slot("a") and session.has_slot("b") and made == [1]


def test_a_database_that_is_not_there_is_not_asked_again(postgres_url: str) -> None:
    missing = postgres_url.replace("/test?", "/no_such_database_here?")
    with pytest.raises(StoreError) as refused:
        Session.open("s", db_path=missing)
    assert "no_such_database_here" in str(refused.value) and "tried" not in str(refused.value)


@pytest.mark.parametrize(
    ("said", "again"),
    [
        ('connection to server at "db" failed: Connection refused', True),
        ('connection to server at "db" failed: FATAL:  the database system is starting up', True),
        ('connection to server at "db" failed: FATAL:  sorry, too many clients already', True),
        ('connection to server at "db" failed: FATAL:  terminating connection due to administrator command', True),
        ('connection to server at "db" failed: FATAL:  password authentication failed for user "x"', False),
        ('connection to server at "db" failed: FATAL:  database "nodb" does not exist', False),
        ('connection to server at "db" failed: timeout expired', False),  # it waited connect_timeout already
    ],
)
def test_which_failures_to_connect_are_tried_again(said: str, again: bool) -> None:
    from slotmagic._store.postgres_connection import lost_connection

    assert lost_connection(psycopg.OperationalError(f"connection failed: {said}")) is again
