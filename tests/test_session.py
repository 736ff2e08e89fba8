"""The Session API over a real store, with the offline echo model: every test runs on a SQLite
file and on a PostgreSQL schema (the store contract, ``store_target`` in ``conftest.py``)."""

from __future__ import annotations

import asyncio
import stat
import threading
from pathlib import Path

import pytest

from conftest import count_rows
from slotmagic import (
    ConfigError,
    FocusedConfig,
    InvalidSlotId,
    Message,
    ProtectedSlot,
    Session,
    SlotConfig,
    SlotExists,
    SlotMode,
    SlotNotFound,
    SlotReadonly,
    StoreError,
    TurnInfo,
    UnknownModel,
)
from slotmagic._engine.view.pipeline import SUMMARY_PREFIX
from slotmagic._store import open_store
from slotmagic._store.base import SupportsChanges


@pytest.fixture
def db_path(store_target: str) -> str:
    return store_target


@pytest.fixture
def session(db_path: Path) -> Session:
    with Session.open("s1", db_path=db_path, model="echo") as s:
        yield s


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


def reopen(db_path: Path, session_id: str = "s1") -> Session:
    return Session.open(session_id, db_path=db_path)


# -- the default slot ----------------------------------------------------------------------


def test_new_session_has_a_current_default_slot(session: Session) -> None:
    assert session.current_slot == "default"
    [slot] = session.list_slots()
    assert (slot.id, slot.current, slot.mode, slot.source.kind) == ("default", True, SlotMode.FULL, "new")
    assert slot.meta.message_count == 0 and slot.meta.parent_id is None


def test_default_and_last_slot_cannot_be_deleted(session: Session) -> None:
    with pytest.raises(ProtectedSlot, match="'default' slot cannot be deleted"):
        session.delete_slot("default")  # it is also the last slot
    session.create_slot("other")
    with pytest.raises(ProtectedSlot):
        session.delete_slot("default")
    session.delete_slot("other")
    assert [s.id for s in session.list_slots()] == ["default"]


# -- turns ---------------------------------------------------------------------------------


def test_submit_turn_stores_the_turn_and_returns_the_reply(session: Session) -> None:
    reply = session.submit_turn("Hello there")
    assert reply.slot == "default" and reply.turn == 1 and reply.model == "echo"
    assert "received 1 message." in reply.text and "last user message: Hello there" in reply.text
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert str(reply) == reply.text
    assert reply._repr_html_().startswith("<p><strong>echo</strong> (offline test model) received 1 message.")
    stored = session.messages()
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1] == reply.message
    assert all(m.tokens > 0 for m in stored)
    meta = session.slot().meta
    assert meta.message_count == 2 and meta.total_tokens == sum(m.tokens for m in stored) and meta.turns == 1
    [turn] = session.history.turns()
    assert (turn.number, turn.start, turn.count) == (1, 0, 2)
    assert turn.info.model == "echo" and turn.info.usage == reply.usage


def test_echo_reports_what_it_was_sent(db_path: Path) -> None:
    with Session.open("s", db_path=db_path, system="You are a clerk.\nBe brief.") as session:
        session.submit_turn("first")
        reply = session.submit_turn("second")
    assert "received 4 messages" in reply.text  # system, first, its reply, second
    assert "system prompt: You are a clerk." in reply.text and "Be brief" not in reply.text
    assert "last user message: second" in reply.text


def test_empty_turn_is_refused_and_stores_nothing(session: Session) -> None:
    with pytest.raises(ConfigError, match="turn is empty"):
        session.submit_turn("   \n")
    assert session.messages() == []


def test_stream_turn_yields_text_then_stores(session: Session) -> None:
    stream = session.stream_turn("stream me")
    pieces = list(stream)
    assert len(pieces) > 5
    assert stream.reply is not None and "".join(pieces) == stream.reply.text
    assert contents(session.messages())[0] == "stream me"


def test_a_stream_stopped_early_stores_nothing(session: Session) -> None:
    session.submit_turn("kept")
    before = session.messages()
    stream = session.stream_turn("abandoned")
    for _ in stream:
        break
    with pytest.raises(KeyboardInterrupt):
        for _ in session.stream_turn("interrupted"):
            raise KeyboardInterrupt
    assert session.messages() == before
    assert session.slot().meta.message_count == 2


def test_async_turns(session: Session) -> None:
    async def go() -> tuple[str, list[str]]:
        reply = await session.asubmit_turn("async hello")
        stream = session.astream_turn("async stream")
        pieces = [piece async for piece in stream]
        assert stream.reply is not None
        return reply.text, pieces

    text, pieces = asyncio.run(go())
    assert "last user message: async hello" in text
    assert "last user message: async stream" in "".join(pieces)
    assert contents(session.messages())[::2] == ["async hello", "async stream"]


def test_turn_on_another_slot_keeps_the_current_slot(session: Session) -> None:
    session.create_slot("side")
    reply = session.submit_turn("aside", slot="side")
    assert reply.slot == "side" and session.current_slot == "default"
    assert session.messages() == [] and len(session.messages("side")) == 2


def test_system_prompt_per_slot_and_per_turn(session: Session) -> None:
    session.system = "Session prompt"
    session.create_slot("clerk", SlotConfig(system="Slot prompt"))
    assert session.view()[0].content == "Session prompt"
    assert session.view("clerk")[0].content == "Slot prompt"
    reply = session.submit_turn("hi", slot="clerk", system="Turn prompt")
    assert "system prompt: Turn prompt" in reply.text
    assert session.history.turns("clerk")[0].info.system == "Turn prompt"


def test_unknown_model_is_one_clear_line(session: Session) -> None:
    with pytest.raises(UnknownModel, match="names no provider"):
        session.model = "gpt-4o"
    with pytest.raises(UnknownModel, match="unknown provider 'nope'"):
        session.submit_turn("hi", model="nope:model")
    assert session.messages() == []


def test_append_stores_messages_as_one_turn(session: Session) -> None:
    record = session.append([Message.user("note"), Message.assistant("noted")], info={"source": "import"})
    assert (record.number, record.count) == (1, 2)
    assert session.history.turns()[0].info == TurnInfo(kind="append", extra={"source": "import"}, user=session.user)
    with pytest.raises(ConfigError, match="nothing to append"):
        session.append([])


# -- creating, switching, listing ----------------------------------------------------------


def test_create_switch_and_list_many(session: Session) -> None:
    ids = [f"slot-{i:02d}" for i in range(40)]
    for slot_id in ids:
        session.create_slot(slot_id)
    session.switch_slot("slot-17")
    slots = session.list_slots()
    assert [s.id for s in slots] == ["default", *ids]
    assert [s.id for s in slots if s.current] == ["slot-17"]
    assert session.current_slot == "slot-17"


def test_existing_unknown_and_invalid_ids_raise_typed_errors(session: Session) -> None:
    session.create_slot("draft")
    with pytest.raises(SlotExists, match="'draft' already exists"):
        session.create_slot("draft")
    with pytest.raises(SlotNotFound, match="did you mean 'draft'") as info:
        session.switch_slot("drfat")
    assert info.value.suggestion == "draft"
    with pytest.raises(SlotNotFound, match="existing slots: default, draft"):
        session.messages("zzzzzz")
    with pytest.raises(InvalidSlotId):
        session.create_slot("a:b")
    with pytest.raises(InvalidSlotId):
        session.derive_slot("a b")


def test_rename_keeps_history_and_children(session: Session) -> None:
    session.create_slot("a")
    session.submit_turn("in a", slot="a")
    session.derive_slot("child", parent="a")
    session.rename_slot("a", "b")
    assert contents(session.messages("b"))[0] == "in a"
    assert session.slot("child").meta.parent_id == "b"
    with pytest.raises(SlotNotFound):
        session.slot("a")
    with pytest.raises(ProtectedSlot):
        session.rename_slot("default", "main")
    with pytest.raises(SlotExists):
        session.rename_slot("b", "child")


# -- deriving ------------------------------------------------------------------------------


def test_derived_slot_records_parent_and_shares_history(session: Session) -> None:
    session.submit_turn("entry question")
    child = session.derive_slot("option-a")
    assert child.meta.parent_id == "default" and child.source.kind == "derived"
    assert child.source.parent_id == "default" and child.source.strategy.kind == "full"
    assert child.meta.message_count == 2 and child.meta.turns == 1
    assert child.meta.total_tokens == session.slot("default").meta.total_tokens
    assert session.messages("option-a") == session.messages("default")
    assert session.current_slot == "default"  # deriving does not switch


def test_derive_isolation_between_parent_and_siblings(session: Session) -> None:
    session.submit_turn("entry")
    session.derive_slot("a")
    session.derive_slot("b")
    session.submit_turn("only in a", slot="a")
    session.submit_turn("only in b", slot="b")
    session.submit_turn("only in default")
    assert contents(session.messages("a"))[::2] == ["entry", "only in a"]
    assert contents(session.messages("b"))[::2] == ["entry", "only in b"]
    assert contents(session.messages("default"))[::2] == ["entry", "only in default"]
    # grandchildren see their own line only
    session.derive_slot("a2", parent="a")
    session.submit_turn("only in a2", slot="a2")
    assert contents(session.messages("a2"))[::2] == ["entry", "only in a", "only in a2"]
    assert contents(session.messages("a"))[::2] == ["entry", "only in a"]
    assert [t.number for t in session.history.turns("a2")] == [1, 2, 3]


def test_derive_at_an_earlier_point(session: Session) -> None:
    for text in ["one", "two", "three"]:
        session.submit_turn(text)
    turns = session.history.turns()
    fork = session.derive_slot("retry", at=turns[1].start)  # just before turn 2
    assert fork.meta.message_count == 2 and fork.meta.turns == 1
    assert fork.meta.total_tokens == sum(m.tokens for m in session.messages()[:2])
    reply = session.submit_turn("two, edited", slot="retry")
    assert reply.turn == 2
    assert contents(session.messages("retry"))[::2] == ["one", "two, edited"]
    assert contents(session.messages())[::2] == ["one", "two", "three"]
    with pytest.raises(ConfigError, match="cannot fork 'default' at message 99: it holds 6 messages"):
        session.derive_slot("bad", at=99)


def test_derive_from_a_fork_point_inside_the_grandparent(session: Session) -> None:
    session.submit_turn("g1")
    session.submit_turn("g2")
    session.derive_slot("p")
    session.submit_turn("p1", slot="p")
    session.derive_slot("c", parent="p", at=2)  # inside the part p shares with default
    session.submit_turn("c1", slot="c")
    assert contents(session.messages("c"))[::2] == ["g1", "c1"]


def test_focused_derive_shares_history_and_filters_the_view(session: Session) -> None:
    for text in ["q1", "q2", "q3"]:
        session.submit_turn(text)
    child = session.derive_slot("focus", strategy=FocusedConfig(keep_system=False, recent_messages=2))
    assert child.mode is SlotMode.FOCUSED and child.source.strategy.kind == "focused"
    assert len(session.messages("focus")) == 6  # nothing copied, nothing lost
    assert [m.role for m in session.view("focus")] == ["user", "assistant"]
    reply = session.submit_turn("q4", slot="focus")
    assert "received 3 messages" in reply.text  # the last 2 (q3, its reply), then q4


def test_derive_from_readonly_parent_is_writable(session: Session) -> None:
    session.create_slot("ref", SlotConfig.readonly(), messages=[Message.system("Reference: lease text")])
    child = session.derive_slot("work", parent="ref")
    assert child.mode is SlotMode.FULL
    reply = session.submit_turn("what does the lease say?", slot="work")
    assert reply.turn == 1


# -- modes ---------------------------------------------------------------------------------


def test_readonly_slot_refuses_turns_and_appends(session: Session) -> None:
    session.submit_turn("before")
    session.configure_slot(mode=SlotMode.READONLY)
    before = session.messages()
    with pytest.raises(SlotReadonly, match="derive a writable slot"):
        session.submit_turn("after")
    with pytest.raises(SlotReadonly):
        session.append([Message.user("sneaky")])
    assert session.messages() == before


def test_readonly_slot_is_saved(db_path: Path) -> None:
    with reopen(db_path) as session:
        session.create_slot("ro", SlotConfig.readonly(system="ref"))
        session.create_slot("ro-static", SlotConfig.readonly(), messages=[Message.user("doc")])
        session.configure_slot("default", mode="readonly")
    with reopen(db_path) as session:
        assert session.slot("ro").config == SlotConfig.readonly(system="ref")
        assert session.slot("ro-static").mode is SlotMode.READONLY
        assert contents(session.messages("ro-static")) == ["doc"]
        assert session.slot("default").mode is SlotMode.READONLY


def test_focused_view_in_session(session: Session) -> None:
    session.system = "sys"
    for text in ["q1", "q2", "q3"]:
        session.submit_turn(text)
    session.configure_slot(config=SlotConfig.focused_mode(recent_messages=2, summary_override="q1 and q2 settled"))
    view = session.view()
    assert [m.role for m in view] == ["system", "system", "user", "assistant"]
    assert view[0].content == "sys" and view[1].content == SUMMARY_PREFIX + "q1 and q2 settled"
    assert view[2].content == "q3"
    assert all(entry.tokens > 0 for entry in session.preview().entries)
    session.configure_slot(focused=FocusedConfig(keep_system=True, recent_messages=0))
    assert contents(session.view()) == ["sys"]
    session.configure_slot(focused=FocusedConfig(keep_system=False, recent_messages=0))
    assert session.view() == []
    assert len(session.messages()) == 6  # the filter never deletes


def test_configure_slot_refuses_unknown_fields(session: Session) -> None:
    with pytest.raises(ConfigError, match="cannot configure slot 'default'"):
        session.configure_slot(colour="blue")


def test_a_kept_preview_follows_every_change_from_here_and_from_another_kernel(db_path: Path) -> None:
    """A preview asked for again is the one made before (widgets and %slot preview ask often),
    until anything it was made from changes: a write here or in another kernel, a rolled-back
    write, the session's settings."""
    with Session.open("kept", db_path=db_path, model="echo") as here, reopen(db_path, "kept") as other:
        here.submit_turn("first question")
        first = here.preview()
        assert here.preview() is first and here.view() == list(first.messages)

        other.submit_turn("a turn from another kernel")
        assert contents(here.view())[-2:] == ["a turn from another kernel", other.messages()[-1].content]

        other.history.exclude(0)
        assert "first question" not in contents(here.view())
        other.history.unmark(0)
        assert "first question" in contents(here.view())

        here.history.exclude(1)
        stored = contents(here.messages())
        assert contents(here.view()) == stored[:1] + stored[2:]
        here.history.unmark(1)
        other.context.add_goal("settle the deposit")
        assert any("settle the deposit" in m.content for m in here.view() if m.role == "system")
        other.workflows.define("claim", "draft -> file")
        assert any("draft" in e.message.content for e in here.preview().entries if e.kind == "workflow")

        before = here.preview()
        with pytest.raises(RuntimeError), here.store.atomic():
            here.append([Message.user("rolled back"), Message.assistant("never stored")])
            assert contents(here.view())[-1] == "never stored"  # inside the transaction: seen
            raise RuntimeError
        assert "rolled back" not in contents(here.view())
        assert here.preview().messages == before.messages

        here.system = "a new system prompt"
        assert here.view()[0].content == "a new system prompt"
        allowed = here.preview().report
        here.options.context_windows = {"echo": 4_000}
        assert here.preview().report != allowed
        assert here.preview("default", model="openai:gpt-4o").encoding == "o200k_base"
        assert here.preview().encoding != "o200k_base"


def test_kept_previews_are_bounded(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic._engine.view import cache

    for name in ("a", "b"):
        session.create_slot(name)
        session.submit_turn(f"to {name}", slot=name)
    monkeypatch.setattr(cache, "KEPT_ENTRIES", 3)  # each of these views holds 2 entries
    a = session.preview("a")
    assert session.preview("a") is a
    b = session.preview("b")  # 4 entries in all: the older view goes, the newest stays
    assert session.preview("b") is b and session.preview("a") is not a
    monkeypatch.setattr(cache, "KEPT_ENTRIES", 1_000)
    views = {}
    for i in range(cache.KEPT_VIEWS + 1):
        session.create_slot(f"s{i}")
        views[i] = session.preview(f"s{i}")
    assert session.preview("s0") is not views[0]  # past 8 views, the least recent went
    assert session.preview(f"s{cache.KEPT_VIEWS}") is views[cache.KEPT_VIEWS]


def test_the_store_tells_of_another_kernels_write_and_not_of_its_own(db_path: Path) -> None:
    with Session.open("live", db_path=db_path, model="echo") as here, reopen(db_path, "live") as other:
        assert isinstance(here.store, SupportsChanges)
        heard = threading.Event()
        stop = here.store.subscribe(heard.set)
        here.submit_turn("my own turn")
        assert not heard.wait(1.0)  # its own writes are not news
        other.submit_turn("a turn from another kernel")
        assert heard.wait(5.0)
        assert contents(here.messages())[-2] == "a turn from another kernel"
        stop()
        heard.clear()
        other.submit_turn("after unsubscribing")
        assert not heard.wait(1.0)


def test_view_is_what_the_model_is_sent(session: Session) -> None:
    session.system = "system line"
    session.submit_turn("one")
    view = session.view()
    reply = session.submit_turn("two")
    assert f"received {len(view) + 1} messages" in reply.text


# -- static slots --------------------------------------------------------------------------


def test_static_slot_holds_its_preset_messages(session: Session) -> None:
    doc = [Message.system("You answer from this lease."), Message.user("LEASE: deposit is $1,200.")]
    slot = session.create_slot("lease", messages=doc)
    assert slot.source.kind == "static" and slot.meta.message_count == 2 and slot.meta.turns == 0
    assert session.messages("lease") == doc
    assert session.history.turns("lease")[0].number == 0
    reply = session.submit_turn("What is the deposit?", slot="lease")
    assert reply.turn == 1 and "received 3 messages" in reply.text


# -- deleting ------------------------------------------------------------------------------


def test_delete_then_load_finds_nothing(db_path: Path) -> None:
    with reopen(db_path) as session:
        session.create_slot("gone")
        session.submit_turn("bye", slot="gone")
        session.switch_slot("gone")
        session.delete_slot("gone", force=True)
        assert session.current_slot == "default"
    with reopen(db_path) as session:
        assert [s.id for s in session.list_slots()] == ["default"]
        with pytest.raises(SlotNotFound):
            session.messages("gone")
    assert _rows(db_path, "messages") == 0 and _rows(db_path, "slots") == 1


def test_deleting_a_parent_keeps_every_childs_history(db_path: Path) -> None:
    with reopen(db_path) as session:
        session.create_slot("parent")
        session.submit_turn("p1", slot="parent")
        session.derive_slot("kid", parent="parent")
        session.submit_turn("p2", slot="parent")
        session.submit_turn("k1", slot="kid")
        session.derive_slot("grandkid", parent="kid")
        session.submit_turn("g1", slot="grandkid")
        session.delete_slot("parent", force=True)
        session.delete_slot("kid", force=True)
        assert [s.id for s in session.list_slots()] == ["default", "grandkid"]
        assert session.slot("grandkid").meta.parent_id is None
        # the name is free again, and reusing it does not disturb the kept history
        session.create_slot("parent")
    with reopen(db_path) as session:
        assert contents(session.messages("grandkid"))[::2] == ["p1", "k1", "g1"]
        assert session.messages("parent") == []
        session.delete_slot("grandkid", force=True)
    # with the last descendant gone, the kept rows go too
    assert _rows(db_path, "messages") == 0
    assert _rows(db_path, "slots") == 2  # default and the new 'parent'


def test_deleted_slot_in_the_middle_hands_children_to_its_parent(session: Session) -> None:
    session.derive_slot("mid")
    session.derive_slot("leaf", parent="mid")
    session.delete_slot("mid")
    assert session.slot("leaf").meta.parent_id == "default"


# -- persistence ---------------------------------------------------------------------------


def test_roundtrip_restores_slots_configs_messages_and_current_slot(db_path: Path) -> None:
    config = SlotConfig.focused_mode(recent_messages=3, summary_override="earlier", system="clerk")
    with reopen(db_path) as session:
        session.submit_turn("hello")
        session.create_slot("focused", config)
        session.submit_turn("focused turn", slot="focused")
        session.derive_slot("branch")
        session.switch_slot("branch")
        before = {s.id: (s.config, s.meta, session.messages(s.id)) for s in session.list_slots()}
    with reopen(db_path) as session:
        assert session.current_slot == "branch"
        after = {s.id: (s.config, s.meta, session.messages(s.id)) for s in session.list_slots()}
        assert after == before
        assert session.slot("focused").config == config
        assert [m.tokens for m in session.messages("branch")] == [m.tokens for m in before["branch"][2]]


def test_empty_slot_roundtrip(db_path: Path) -> None:
    with reopen(db_path) as session:
        session.create_slot("empty")
    with reopen(db_path) as session:
        assert session.messages("empty") == []
        meta = session.slot("empty").meta
        assert (meta.message_count, meta.total_tokens, meta.turns) == (0, 0, 0)


def test_sessions_are_isolated_in_one_file(db_path: Path) -> None:
    store = open_store(db_path)
    one = Session(store, "one")
    two = Session(store, "two")
    one.create_slot("shared-name")
    two.create_slot("shared-name")
    one.submit_turn("for one", slot="shared-name")
    two.switch_slot("shared-name")
    assert session_contents(two, "shared-name") == []
    assert one.current_slot == "default" and two.current_slot == "shared-name"
    two.delete_slot("shared-name")
    assert session_contents(one, "shared-name")[0] == "for one"
    assert set(store.sessions()) == {"one", "two"}
    store.close()


def session_contents(session: Session, slot: str) -> list[str]:
    return contents(session.messages(slot))


def test_store_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "state.sqlite3"
    with Session.open("p", db_path=path) as session:
        session.submit_turn("secret plans")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_default_path_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path / "env.sqlite3"))
    with Session.open("env") as session:
        session.submit_turn("hi")
    assert (tmp_path / "env.sqlite3").exists()
    monkeypatch.delenv("SLOTMAGIC_DB")
    monkeypatch.chdir(tmp_path)
    with Session.open("cwd") as session:
        assert session.session_id == "cwd"
    assert (tmp_path / ".slotmagic" / "state.sqlite3").exists()


def test_memory_store_and_generated_session_ids() -> None:
    with Session.open(db_path=":memory:") as session:
        assert session.session_id.startswith("session-")
        session.submit_turn("gone when closed")


def test_not_a_database_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="move the file aside"):
        Session.open("x", db_path=path)


def _rows(db_path: Path, table: str) -> int:
    return count_rows(db_path, table)


def test_an_unwritable_store_path_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match=r"cannot create the state file .*a-file/state.sqlite3 .*writable place"):
        Session.open("x", db_path=blocker / "state.sqlite3")


def test_last_message_reads_the_end_of_a_long_history(session: Session) -> None:
    session.append([Message.user("the first question")])
    session.append([Message.assistant(f"note {i}") for i in range(500)])
    found = session.history.last_message()
    assert found is not None and found.content == "the first question"
    assert session.history.last_message(role="assistant").content == "note 499"  # type: ignore[union-attr]
    assert session.history.last_message(role="tool") is None


def test_the_tree_read_in_a_new_kernel_shows_each_slots_last_question(db_path: Path) -> None:
    """The tree's listing and last questions (``Store.tree_slots``) agree with the slots listed
    one by one, on either store: branches that share history, one forked before its parent's
    last question, one whose parent was deleted, one undone, a question PostgreSQL stores
    escaped; and after a turn, the tree made again is the tree made whole."""
    from slotmagic._snapshot import last_user_text
    from slotmagic._tree import build_tree

    with reopen(db_path) as session:
        session.submit_turn("the root question")
        session.derive_slot("mid", "default")
        session.submit_turn("on mid", slot="mid")
        session.derive_slot("leaf", "mid")
        session.submit_turn("after the fork \x00", slot="mid")
        session.derive_slot("early", "mid", at=4)  # before mid's last question
        session.derive_slot("gone", "default")
        session.submit_turn("on gone", slot="gone")
        session.derive_slot("orphan", "gone")
        session.delete_slot("gone", force=True)
        session.submit_turn("undone", slot="leaf")
        session.history.undo("leaf")
        session.switch_slot("early")
    with reopen(db_path) as session:
        tree = session.tree()
        slots = session.list_slots()
        asked = {s.id: session.history.last_message(s.id) for s in slots}
        assert [(n.id, n.parent, n.messages, n.current) for n in tree.nodes] == [
            (s.id, s.meta.parent_id, s.meta.message_count, s.current) for s in slots
        ]
        assert {n.id: n.last_user for n in tree.nodes} == {
            slot: None if m is None else last_user_text(m.content) for slot, m in asked.items()
        }
        assert (tree.node("early").last_user, tree.node("leaf").last_user) == ("on mid", "on mid")
        assert (tree.node("orphan").parent, tree.node("orphan").last_user) == ("default", "on gone")
        session.submit_turn("one more", slot="orphan")
        assert session.tree() == build_tree(session) and session.tree().node("orphan").last_user == "one more"


def test_opening_a_session_of_many_slots_reads_none_of_them_until_asked(tmp_path: Path) -> None:
    path = tmp_path / "many.sqlite3"
    with Session.open("many", db_path=path) as session:
        for i in range(30):
            session.derive_slot(f"b{i}", "default")
    from slotmagic import SQLiteStore

    store = SQLiteStore(path)
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    with Session.open("many", store=store) as session:
        assert not any("FROM slots" in sql for sql in seen)  # %load_ext stays flat in the slots
        assert session.current_slot == "default" and len(session.list_slots()) == 31
    with Session.open("new", store=store) as fresh:  # a session not there yet is made as before
        assert [s.id for s in fresh.list_slots()] == ["default"]
    store.close()


def test_the_session_keeps_the_verbs_and_the_groups_the_rest() -> None:
    public = {n for n in vars(Session) if not n.startswith("_")}
    assert public >= {"submit_turn", "stream_turn", "fan_out", "create_slot", "derive_slot", "switch_slot", "append"}
    assert not public & {"add_goal", "undo", "compact", "max_tool_rounds", "workflow"}
