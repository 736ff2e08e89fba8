"""Concurrent turns never lie: a turn is stored only on the history its request was made from.

Replies come from a real OpenAI-compatible server on 127.0.0.1 that says how many messages it
was sent and the last user message, after a short random delay, so turns really overlap. After
threads, processes and asyncio tasks all write to one slot, every stored turn's reply must
name exactly the history stored before it, and no turn may be missing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from reflect_server import ReflectServer, parse_reflection

from slotmagic import Message, Session, SlotConfig, StoreError
from slotmagic._core.records import TurnInfo

MODEL = "openai:reflect"


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReflectServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with ReflectServer(delay=0.01, jitter=0.03) as running:
        yield running


def open_session(db_path: Path, server: ReflectServer) -> Session:
    session = Session.open("race", db_path=db_path, model=MODEL, settings=server.settings())
    session.options.context_windows = {MODEL: 100_000_000}  # no compaction: replies name the whole history
    return session


def check_every_turn_saw_its_history(session: Session) -> int:
    """Each stored model turn's reply names the history before it; returns how many turns."""
    seen = 0
    for slot in session.list_slots():
        history = session.messages(slot.id)
        for turn in session.history.turns(slot.id):
            if turn.info.kind != "turn" or turn.origin[0] != session.store.tip("race", slot.id).key:
                continue  # each stored turn once: in the slot that owns it
            user, reply = history[turn.start], history[turn.start + 1]
            assert parse_reflection(reply.content) == (turn.start + 1, user.content), (slot.id, turn.number)
            seen += 1
    return seen


def stored_user_messages(session: Session) -> set[str]:
    return {m.content for s in session.list_slots() for m in session.messages(s.id) if m.role == "user"}


def test_threads_on_one_slot(db_path: Path, server: ReflectServer) -> None:
    replies = []

    def worker(n: int, shared: Session | None) -> None:
        session = shared or open_session(db_path, server)
        for i in range(8):
            replies.append(session.submit_turn(f"thread {n} turn {i}"))
        if shared is None:
            session.close()

    shared = open_session(db_path, server)
    # Two threads share one Session (one connection), two have their own (connections race).
    threads = [threading.Thread(target=worker, args=(n, shared if n < 2 else None)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open_session(db_path, server) as session:
        assert check_every_turn_saw_its_history(session) == 32
        assert stored_user_messages(session) == {f"thread {n} turn {i}" for n in range(4) for i in range(8)}
        moved = [r for r in replies if r.forked_from is not None]
        assert moved, "the turns never overlapped: the test proves nothing"
        for reply in moved:
            assert reply.forked_from is not None and reply.forked_from.reason == "moved"
            assert session.messages(reply.slot)[-1].content == reply.text  # stored where it says
    shared.close()


def test_asyncio_gather_on_one_slot(db_path: Path, server: ReflectServer) -> None:
    async def main(session: Session) -> list[str]:
        replies = await asyncio.gather(*(session.asubmit_turn(f"task {i}") for i in range(6)))
        return [r.slot for r in replies]

    with open_session(db_path, server) as session:
        session.submit_turn("first")
        slots = asyncio.run(main(session))
        assert check_every_turn_saw_its_history(session) == 7
        assert stored_user_messages(session) == {"first", *(f"task {i}" for i in range(6))}
        assert slots.count("default") == 1  # the first to finish; the others each forked
        assert len(set(slots)) == 6


WRITER = """
import sys
from slotmagic import Session, ProviderSettings
db, tag, slot, turns, url = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
session = Session.open("race", db_path=db, model="openai:reflect",
                       settings=ProviderSettings(openai_base_url=url, read_timeout=30))
session.options.context_windows = {"openai:reflect": 100_000_000}  # no compaction in this test
for i in range(turns):
    session.submit_turn(f"{tag} {i}", slot=slot)
print("done")
"""


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 4])
@pytest.mark.parametrize("shared", [True, False], ids=["same-slot", "different-slots"])
def test_processes_writing_one_file(db_path: Path, processes: int, shared: bool) -> None:
    """300 turns from 2 or 4 processes on one file, on one slot or each on its own: every
    stored turn's reply was made from exactly the history stored before it, none is lost."""
    turns = 300 // processes
    slots = ["default"] * processes if shared else [f"p{n}-slot" for n in range(processes)]
    with ReflectServer(delay=0.003, jitter=0.012) as server:
        with open_session(db_path, server) as session:
            for slot in set(slots) - {"default"}:
                session.create_slot(slot)
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(db_path), f"p{n}", slot, str(turns), server.url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n, slot in enumerate(slots)
        ]
        for writer in writers:
            out, err = writer.communicate(timeout=300)
            assert writer.returncode == 0 and out.strip() == "done", err
        with open_session(db_path, server) as session:
            assert check_every_turn_saw_its_history(session) == turns * processes
            assert stored_user_messages(session) == {f"p{n} {i}" for n in range(processes) for i in range(turns)}
            names = {s.id for s in session.list_slots()}
            if shared:
                assert len(names) > 1, "the turns never overlapped: the test proves nothing"
            else:
                assert names == {"default", *slots}  # no reason to fork


def test_exist_ok_is_atomic_across_connections(db_path: Path) -> None:
    Session.open("race", db_path=db_path).close()
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def make(n: int) -> None:
        with Session.open("race", db_path=db_path) as session:
            barrier.wait()
            try:
                if n % 2:
                    session.create_slot("made", SlotConfig.readonly(), exist_ok=True)
                else:
                    session.derive_slot("branch", parent="default", exist_ok=True)
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=make, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with Session.open("race", db_path=db_path) as session:
        assert sorted(s.id for s in session.list_slots()) == ["branch", "default", "made"]


def test_a_fork_exists_only_with_its_turn(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Session.open("race", db_path=db_path) as session:
        session.submit_turn("question", cell_id="c1")
        store_class = type(session.store)
        real_append = store_class.append_turn

        def failing_append(self: object, session_id: str, slot: str, *args: object, **kwargs: object) -> object:
            if slot != "default":
                raise StoreError("disk full")
            return real_append(self, session_id, slot, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store_class, "append_turn", failing_append)
        with pytest.raises(StoreError, match="disk full"):
            session.submit_turn("question, edited", cell_id="c1")
        assert [s.id for s in session.list_slots()] == ["default"]
        assert session.current_slot == "default"


def test_a_fork_sends_only_the_history_before_the_edited_turn(db_path: Path) -> None:
    with Session.open("race", db_path=db_path) as session:
        for cell, text in (("c1", "one"), ("c2", "two"), ("c3", "three")):
            session.submit_turn(text, cell_id=cell)
        reply = session.submit_turn("two, edited", cell_id="c2")
        assert reply.slot == "default.2"
        assert "received 3 messages" in reply.text  # one, its reply, then the edit: not three
        assert [m.content for m in session.messages("default.2")][::2] == ["one", "two, edited"]


def test_a_slot_renamed_while_the_reply_is_written_keeps_the_reply(db_path: Path) -> None:
    from slotmagic import TurnNotStored

    with Session.open("race", db_path=db_path) as session:
        session.create_slot("draft")
        stream = session.stream_turn("hello", slot="draft")
        chunks = iter(stream)
        next(chunks)
        session.rename_slot("draft", "final")
        with pytest.raises(TurnNotStored, match="slot 'draft' was renamed or deleted") as caught:
            list(chunks)
        assert "hello" in caught.value.text
        assert session.messages("final") == []


def test_append_by_another_connection_is_seen_without_rereading(db_path: Path) -> None:
    with Session.open("race", db_path=db_path) as mine, Session.open("race", db_path=db_path) as theirs:
        mine.submit_turn("mine")
        assert len(theirs.messages()) == 2  # cached now
        mine.append([Message.user("more")])
        assert [m.content for m in theirs.messages()] == [m.content for m in mine.messages()]
        theirs.store.append_turn("race", "default", [Message.user("theirs").with_tokens(1)], TurnInfo(kind="append"))
        assert mine.messages()[-1].content == "theirs"


def test_a_slot_deleted_and_made_anew_by_another_connection_is_read_anew(db_path: Path) -> None:
    """A cached segment outlives another connection's write to its session only while its slot
    row is the one it was read from: a slot deleted and made again under the same name (on
    SQLite, often with the same row id) is read anew, never served from the old cache. The
    check rides on the session's rows when they are read again, and asks when they are not."""
    with Session.open("race", db_path=db_path) as mine, Session.open("race", db_path=db_path) as theirs:
        mine.create_slot("x")
        mine.append([Message.user("old one"), Message.user("old two")], slot="x")
        assert [m.content for m in mine.messages("x")] == ["old one", "old two"]  # cached now
        theirs.delete_slot("x", force=True)
        theirs.create_slot("x")
        theirs.append([Message.user("new")], slot="x")
        assert [m.content for m in mine.messages("x")] == ["new"]  # the session's rows read again say so

        mine.append([Message.user("again")], slot="x")
        held = mine.store.history("race", "x")
        assert [m.content for m in held.messages()] == ["new", "again"]  # cached now
        theirs.delete_slot("x", force=True)
        theirs.create_slot("x")
        mine.store.sessions()  # a read that notices their write, reading no slot row
        assert held.messages() == []  # its rows are gone: not the cached ones
        assert mine.messages("x") == []


def test_another_connections_marks_and_workflows_are_seen_and_its_turns_keep_them(db_path: Path) -> None:
    """What a kernel keeps of a session besides its slot rows (its active workflow, its
    segments' marks) is read again after another connection writes to those, and only then:
    another member's turn leaves them kept (on PostgreSQL, ``sessions.noted`` says which)."""
    with Session.open("race", db_path=db_path) as mine, Session.open("race", db_path=db_path) as theirs:
        mine.append([Message.user("one"), Message.user("two")])
        history = lambda: mine.store.history("race", "default")  # noqa: E731
        assert history().marks() == {} and mine.workflows.active() is None  # kept now
        theirs.store.mark_message("race", None, 1, "pin")
        assert history().marks() == {1: "pin"}
        theirs.workflows.define("plan", "a -> b")
        active = mine.workflows.active()
        assert active is not None and active.name == "plan"
        theirs.append([Message.user("three")])  # changes neither
        assert history().marks() == {1: "pin"} and [m.content for m in history().messages()][-1] == "three"
        theirs.workflows.use(None)
        theirs.store.mark_message("race", None, 0, "exclude")
        assert mine.workflows.active() is None
        assert history().marks() == {0: "exclude", 1: "pin"}


def test_another_connections_slot_changes_are_listed_as_a_fresh_reader_lists_them(db_path: Path) -> None:
    """After each of another connection's writes to a session's slots, a kernel that had read
    them lists what one reading them first lists: on PostgreSQL it reads again only the rows
    written (``slots.changed``), or all of them when one was removed."""
    with Session.open("race", db_path=db_path) as mine, Session.open("race", db_path=db_path) as theirs:

        def listed(session: Session) -> list[tuple[object, ...]]:
            return [
                (s.id, s.current, s.meta.parent_id, s.meta.fork_at, s.meta.message_count, s.config.mode)
                for s in session.list_slots()
            ]

        def same() -> None:
            with Session.open("race", db_path=db_path) as fresh:
                assert listed(mine) == listed(fresh)

        mine.create_slot("a")
        mine.append([Message.user("one"), Message.user("two")], slot="a")
        same()
        steps = [
            lambda: theirs.append([Message.user("three")], slot="a"),
            lambda: theirs.derive_slot("b", "a"),
            lambda: theirs.append([Message.user("four")], slot="b"),
            lambda: theirs.rename_slot("b", "c"),
            lambda: theirs.switch_slot("c"),
            lambda: theirs.configure_slot("c", mode="focused"),
            lambda: theirs.create_slot("x"),
            lambda: theirs.delete_slot("x"),  # a row removed
            lambda: theirs.delete_slot("a", force=True),  # kept as the parent of c, hidden
            lambda: (theirs.derive_slot("d", "c"), theirs.delete_slot("c", force=True)),
            lambda: theirs.append([Message.user("five")], slot="d"),
            lambda: theirs.history.undo("d"),  # a row hidden, one made
            lambda: theirs.history.redo("d"),
        ]
        for step in steps:
            step()
            same()
        assert [s.id for s in mine.list_slots()] == ["default", "d"]
