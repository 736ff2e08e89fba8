"""The sidebar's kernel side: the state snapshot (plain Python), and the comm protocol through a
real IPython shell with a fake comm manager (the seam ipykernel fills in a real kernel)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import slotmagic
from slotmagic import FocusedConfig, Message, Session, SlotConfig
from slotmagic._core.sidebar_protocol import TARGET
from slotmagic._magics.sidebar import Sidebar, attach_sidebar
from slotmagic._snapshot import LastUserCache, last_user_text, session_snapshot
from slotmagic._store.base import History
from slotmagic.session import SessionHistory

# -- the snapshot ---------------------------------------------------------------------------------


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("notes", db_path=db_path, model="echo") as s:
        yield s


def test_snapshot_of_a_tree(session: Session) -> None:
    session.submit_turn("I need help with a rental deposit dispute.")
    session.derive_slot("court")
    session.derive_slot("short", parent="court", strategy=FocusedConfig(recent_messages=2))
    session.switch_slot("court")
    session.submit_turn("Walk me through\n  small claims court.")
    session.create_slot("lease", SlotConfig.readonly(), messages=[Message.user("LEASE: …")])

    state = session_snapshot(session)
    assert json.loads(json.dumps(state)) == state  # JSON-ready as is
    assert {k: state[k] for k in ("type", "protocol", "session", "current", "model", "workflow")} == {
        "type": "state",
        "protocol": 1,
        "session": "notes",
        "current": "court",
        "model": "echo",
        "workflow": None,
    }
    budget = session.budget("court")  # the current slot's, as %slot budget reports it
    assert state["budget"] == {
        "window": 8192,
        "total": 8192,
        "used": budget.report.used,
        "threshold": budget.threshold,
        "parts": {name: {"used": u.used, "limit": u.allowed} for name, u in budget.report.categories.items()},
    }
    slots = {s["id"]: s for s in state["slots"]}
    assert [s["id"] for s in state["slots"]] == ["default", "court", "short", "lease"]  # parents first
    assert slots["default"] == {
        "id": "default",
        "parent": None,
        "mode": "full",
        "source": "new",
        "messages": 2,
        "tokens": session.slot("default").meta.total_tokens,
        "turns": 1,
        "current": False,
        "last_user": "I need help with a rental deposit dispute.",
    }
    assert slots["court"]["parent"] == "default" and slots["court"]["current"] is True
    assert slots["court"]["messages"] == 4 and slots["court"]["turns"] == 2
    assert slots["court"]["last_user"] == "Walk me through small claims court."  # on one line
    assert slots["short"]["mode"] == "focused" and slots["short"]["source"] == "derived"
    assert slots["short"]["last_user"] == "I need help with a rental deposit dispute."  # shared history
    assert slots["lease"]["mode"] == "readonly" and slots["lease"]["source"] == "static"
    assert slots["lease"]["parent"] is None and slots["lease"]["last_user"] == "LEASE: …"


def test_no_message_bodies_beyond_the_first_words(session: Session) -> None:
    secret = "SECRET-ANSWER-TEXT"
    session.append([Message.user("a question " * 30), Message.assistant(secret)])
    state = session_snapshot(session)
    assert secret not in json.dumps(state)
    last = state["slots"][0]["last_user"]
    assert len(last) <= 80 and last.startswith("a question a question") and last.endswith("…")


def test_an_empty_slot_has_no_last_user(session: Session) -> None:
    assert session_snapshot(session)["slots"][0]["last_user"] is None


def test_last_user_text() -> None:
    assert last_user_text("  one\n two\tthree ") == "one two three"
    assert last_user_text(" one two ") == "one two"  # single spaces: no pattern run
    assert last_user_text("one\u00a0two\u2028three") == "one two three"  # other spaces are not printable
    assert last_user_text("x" * 80) == "x" * 80
    assert last_user_text("x" * 81) == "x" * 79 + "…"  # no space to end on: cut inside
    cut = last_user_text("word " * 40)
    assert len(cut) <= 80 and cut.endswith("word…")


def test_messages_are_read_only_for_slots_whose_history_changed(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        session.submit_turn(f"question {i}")
    session.derive_slot("b")
    reads: list[str | None] = []
    real = SessionHistory.last_messages

    def counting(self: SessionHistory, slots: Iterable[str], role: str = "user") -> dict[str, Message | None]:
        slots = list(slots)
        reads.extend(slots)
        return real(self, slots, role)

    monkeypatch.setattr(SessionHistory, "last_messages", counting)
    cache = LastUserCache()
    first = session_snapshot(session, cache)
    assert sorted(reads) == ["b", "default"]
    reads.clear()
    assert session_snapshot(session, cache) == first and reads == []  # nothing changed, nothing read
    session.submit_turn("one more on b", slot="b")
    reads.clear()  # the turn itself read b's history
    after = session_snapshot(session, cache)
    assert reads == ["b"] and after["slots"][1]["last_user"] == "one more on b"
    reads.clear()
    session.switch_slot("default")
    session_snapshot(session, cache)
    assert reads == []  # a switch changes no history


def test_branches_that_share_history_read_it_once(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    session.submit_turn("the root question")
    for i in range(30):  # branches with no turn of their own: all end with the root's question
        session.derive_slot(f"b{i}", "default")
    session.derive_slot("mid", "default")
    session.submit_turn("on mid", slot="mid")
    session.derive_slot("leaf", "mid")
    session.submit_turn("after the fork", slot="mid")
    session.derive_slot("early", "mid", at=2)  # forked before mid's own turns
    session.switch_slot("default")
    session.derive_slot("gone", "default")
    session.submit_turn("on gone", slot="gone")
    session.derive_slot("orphan", "gone")
    session.switch_slot("default")
    session.delete_slot("gone", force=True)  # its rows stay for orphan, which shares them
    store = session.store
    read: list[tuple[int, int, int]] = []
    real = type(store).read_messages

    def counting(self: Any, key: int, lo: int, hi: int) -> list[Message]:
        read.append((key, lo, hi))
        return real(self, key, lo, hi)

    monkeypatch.setattr(type(store), "read_messages", counting)
    slots = [s.id for s in session.list_slots()]
    found = session.history.last_messages(slots)
    one_by_one = {slot: session.history.last_message(slot) for slot in slots}
    assert found == one_by_one and found["b7"] == found["default"]
    assert found["mid"].content == "after the fork"  # type: ignore[union-attr]
    assert found["b7"].content == "the root question"  # type: ignore[union-attr]
    assert found["leaf"].content == "on mid" and found["early"].content == "the root question"  # type: ignore[union-attr]
    assert found["orphan"].content == "on gone"  # type: ignore[union-attr]
    read.clear()
    session.history.last_messages(slots)
    assert len(read) <= 5  # default, mid (twice: its end and before leaf's fork), orphan's rows: not one per branch


def test_the_last_questions_of_many_slots_take_a_few_statements(session: Session) -> None:
    """A tree of many slots, each with turns of its own, is not one read per slot: where each
    row's last question is comes from one statement, and the questions from another."""
    session.submit_turn("the root question")
    for i in range(40):
        session.derive_slot(f"b{i}", "default")
        session.submit_turn(f"question {i}", slot=f"b{i}")
    session.derive_slot("quiet", "b3")  # no turn of its own: its parent's
    session.switch_slot("default")
    session.submit_turn("after the forks")
    slots = [s.id for s in session.list_slots()]
    statements: list[str] = []
    db = session.store._db  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    try:
        found = session.history.last_messages(slots)
    finally:
        db.set_trace_callback(None)
    assert found == {slot: session.history.last_message(slot) for slot in slots}
    assert found["b7"].content == "question 7" and found["quiet"].content == "question 3"  # type: ignore[union-attr]
    assert found["default"].content == "after the forks"  # type: ignore[union-attr]
    assert len([s for s in statements if not s.startswith("--")]) <= 4, statements


def test_a_long_history_is_read_from_its_end(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    session.append([Message.user("the first question")])
    for i in range(100):
        session.append([Message.assistant(f"answer {i}"), Message.assistant(f"more {i}")])
    read: list[int] = []
    real = History.messages

    def counting(self: History, lo: int = 0, hi: int | None = None) -> list[Message]:
        found = real(self, lo, hi)
        read.append(len(found))
        return found

    monkeypatch.setattr(History, "messages", counting)
    cache = LastUserCache()
    [slot] = session.list_slots()
    assert cache.get(session, slot) == "the first question"  # 201 messages back
    assert sum(read) == 201  # each message once, in growing chunks from the end
    session.append([Message.user("a later question"), Message.assistant("a")])
    read.clear()
    [slot] = session.list_slots()
    assert cache.get(session, slot) == "a later question"
    assert sum(read) == 8  # one chunk


# -- the comm protocol ---------------------------------------------------------------------------


class FakeComm:
    """What ipykernel's Comm offers the sidebar: send, close, on_msg, on_close."""

    def __init__(self, target_name: str = TARGET, data: Any = None) -> None:
        self.target_name = target_name
        self.opened_with = data
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self._on_msg: Callable[[dict[str, Any]], None] | None = None
        self._on_close: Callable[[dict[str, Any]], None] | None = None

    def send(self, data: dict[str, Any]) -> None:
        assert not self.closed
        self.sent.append(json.loads(json.dumps(data)))  # what goes over the wire

    def close(self) -> None:
        self.closed = True

    def on_msg(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self._on_msg = callback

    def on_close(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self._on_close = callback

    # the front end's side
    def front_sends(self, data: dict[str, Any]) -> dict[str, Any]:
        assert self._on_msg is not None
        before = len(self.sent)
        self._on_msg({"content": {"comm_id": "x", "data": data}})
        assert len(self.sent) == before + 1, "each action is answered exactly once"
        return self.sent[-1]

    def front_closes(self) -> None:
        assert self._on_close is not None
        self._on_close({"content": {"comm_id": "x", "data": {}}})


class FakeManager:
    """The comm manager seam: targets the kernel registers, comms it opens."""

    def __init__(self) -> None:
        self.targets: dict[str, Callable[..., None]] = {}
        self.opened: list[FakeComm] = []

    def register_target(self, name: str, callback: Callable[..., None]) -> None:
        self.targets[name] = callback

    def unregister_target(self, name: str, callback: Callable[..., None]) -> None:
        assert self.targets.pop(name) == callback

    def create_comm(self, target_name: str, data: Any = None) -> FakeComm:
        comm = FakeComm(target_name, json.loads(json.dumps(data)))
        self.opened.append(comm)
        return comm

    def front_opens(self) -> FakeComm:
        """A panel opens a comm to the kernel's target; ipykernel calls the target with it."""
        comm = FakeComm()
        self.targets[TARGET](comm, {"content": {"comm_id": "front", "target_name": TARGET, "data": {}}})
        return comm


@pytest.fixture
def kernel(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeManager]:
    """The test shell made to look like it runs in a kernel, with comm's seams faked, and
    slotmagic loaded again so that the sidebar attaches."""
    import comm

    manager = FakeManager()
    monkeypatch.setattr(comm, "get_comm_manager", lambda: manager)
    monkeypatch.setattr(comm, "create_comm", manager.create_comm)
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    slotmagic.load_ipython_extension(ip)
    yield manager
    slotmagic.unload_ipython_extension(ip)
    monkeypatch.delattr(ip, "kernel")
    slotmagic.load_ipython_extension(ip)  # for the ip fixture's teardown


def slot_ids(state: dict[str, Any]) -> list[str]:
    assert state["type"] == "state", state
    return [s["id"] for s in state["slots"]]


def test_loading_registers_the_target_and_opens_no_comm(ip: Any, kernel: FakeManager) -> None:
    """Where no front end listens (nbconvert --execute), a comm opened by the kernel would only
    be logged as "No handler found"; the panel opens one after each cell instead."""
    manager = kernel
    assert TARGET in manager.targets
    ip.run_cell("%slot derive b")
    assert manager.opened == []
    [state] = manager.front_opens().sent
    assert slot_ids(state) == ["default", "b"]


def test_a_panel_that_opens_a_comm_gets_the_state(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    ip.run_cell("%slot derive side")
    panel = manager.front_opens()
    [state] = panel.sent
    assert slot_ids(state) == ["default", "side"] and state["current"] == "side"


def test_actions_switch_derive_rename_delete(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    panel = manager.front_opens()
    ip.run_cell("%%turn\nfirst question")

    state = panel.front_sends({"type": "derive", "slot": "default", "new": "branch", "request": 1})
    assert state["request"] == 1 and slot_ids(state) == ["default", "branch"] and state["current"] == "branch"
    state = panel.front_sends({"type": "switch", "slot": "default", "request": 2})
    assert state["current"] == "default" and state["request"] == 2
    ip.run_cell("%slot")  # the kernel sees it: a %slot cell prints the current slot
    assert ip.find_line_magic("slot").__self__.session().current_slot == "default"
    state = panel.front_sends({"type": "rename", "slot": "branch", "new": "renamed"})
    assert slot_ids(state) == ["default", "renamed"] and "request" not in state
    ip.run_cell("%%turn --slot renamed\nonly here")
    refused = panel.front_sends({"type": "delete", "slot": "renamed", "force": False, "request": 3})
    assert refused["type"] == "error" and refused["request"] == 3 and refused["kind"] == "SlotNotEmpty"
    assert "renamed" in refused["message"] and "\n" not in refused["message"]
    state = panel.front_sends({"type": "delete", "slot": "renamed", "force": True})
    assert slot_ids(state) == ["default"]
    assert panel.front_sends({"type": "refresh"}) == state  # answered even when nothing changed


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"type": "switch", "slot": "nope"}, "no slot 'nope'"),
        ({"type": "switch", "slot": "defualt"}, "did you mean 'default'?"),
        ({"type": "derive", "slot": "default", "new": "bad id!"}, "bad id!"),
        ({"type": "rename", "slot": "default", "new": "default"}, "default"),
        ({"type": "delete", "slot": "default", "force": True}, "default"),
        ({"type": "switch"}, "no 'slot'"),
        ({"type": "explode"}, "unknown action 'explode'"),
        (["not", "an", "object"], "not an object"),
    ],
)
def test_a_bad_action_is_one_error_line(kernel: tuple[Any, FakeManager], data: Any, words: str) -> None:
    manager = kernel
    panel = manager.front_opens()
    answer = panel.front_sends(data)
    assert answer["type"] == "error" and words in answer["message"], answer
    assert "\n" not in answer["message"] and "Traceback" not in answer["message"]


def test_pushes_only_when_the_state_changed(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    other = manager.front_opens()
    panel = manager.front_opens()
    panel.sent.clear()
    other.sent.clear()
    ip.run_cell("x = 1")
    ip.run_cell("%slot list")
    assert panel.sent == [] and other.sent == []  # nothing changed: nothing sent
    ip.run_cell("%%turn\nhello there")
    [pushed] = panel.sent
    assert pushed["slots"][0]["messages"] == 2 and pushed["slots"][0]["last_user"] == "hello there"
    assert other.sent == [pushed]  # every open comm gets it
    ip.run_cell("%slot derive b")
    ip.run_cell("%slot switch default")
    assert [s["current"] for s in panel.sent[-1]["slots"]] == [True, False]
    assert len(panel.sent) == 3
    ip.run_cell("y = 2")
    assert len(panel.sent) == 3


def test_a_closed_comm_is_forgotten(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    gone = manager.front_opens()
    panel = manager.front_opens()
    gone.front_closes()  # e.g. a notebook closed
    gone.sent.clear()
    ip.run_cell("%slot derive b")
    assert gone.sent == [] and len(panel.sent) == 2


def test_unloading_unregisters_and_closes_everything(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    panel = manager.front_opens()
    slotmagic.unload_ipython_extension(ip)
    assert TARGET not in manager.targets and panel.closed
    # Other hooks may be plain functions (matplotlib's inline backend registers one).
    owners = [type(getattr(cb, "__self__", None)).__name__ for cb in ip.events.callbacks["post_execute"]]
    assert "Sidebar" not in owners
    slotmagic.load_ipython_extension(ip)


def test_reloading_keeps_one_sidebar(ip: Any, kernel: FakeManager) -> None:
    manager = kernel
    panel = manager.front_opens()
    ip.run_cell("%reload_ext slotmagic")
    ip.run_cell("%load_ext slotmagic")
    sidebars = [
        cb for cb in ip.events.callbacks["post_execute"] if type(getattr(cb, "__self__", None)).__name__ == "Sidebar"
    ]
    assert len(sidebars) == 1
    assert panel.closed and manager.opened == []  # the old sidebar's comm was closed


def test_a_store_that_cannot_open_is_one_error_line(ip: Any, tmp_path: Path) -> None:
    from slotmagic._errors import StoreError

    def broken() -> Session:
        raise StoreError("cannot open the state file /nowhere/state.sqlite3: no such folder")

    manager = FakeManager()
    sidebar = Sidebar(broken, manager)
    sidebar.start()
    [answer] = manager.front_opens().sent
    assert answer == {
        "type": "error",
        "message": "cannot open the state file /nowhere/state.sqlite3: no such folder",
    }
    sidebar.close()


def test_a_sidebar_that_cannot_start_never_stops_loading(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import comm

    manager = FakeManager()

    def broken(name: str, callback: Any) -> None:
        raise RuntimeError("no iopub here")

    monkeypatch.setattr(manager, "register_target", broken)
    monkeypatch.setattr(comm, "get_comm_manager", lambda: manager)
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    with pytest.warns(UserWarning, match=r"sidebar is off in this kernel \(no iopub here\)"):
        slotmagic.load_ipython_extension(ip)
    assert ip.find_line_magic("slot") is not None and TARGET not in manager.targets
    # Other hooks may be plain functions (matplotlib's inline backend registers one).
    owners = [type(getattr(cb, "__self__", None)).__name__ for cb in ip.events.callbacks["post_execute"]]
    assert "Sidebar" not in owners
    ip.run_cell("%slot derive fine")


def test_no_kernel_no_sidebar(ip: Any) -> None:
    """A terminal IPython has no front end: nothing is registered."""
    assert attach_sidebar(ip, lambda: Session.open("x", db_path=":memory:")) is None
    assert not [
        cb for cb in ip.events.callbacks["post_execute"] if type(getattr(cb, "__self__", None)).__name__ == "Sidebar"
    ]
