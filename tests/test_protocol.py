"""The sidebar's protocol is typed on both sides and the two cannot drift: each interface of
``labextension/src/protocol.ts`` has the fields of its TypedDict in
``slotmagic/_core/sidebar_protocol.py`` (and the same ``TARGET`` and ``PROTOCOL``), and what a
real session's sidebar sends, through the comm seam ipykernel fills in a kernel, is what those
TypedDicts say."""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from test_sidebar import FakeComm, FakeManager

from conftest import ROOT
from slotmagic import Session, SlotConfig
from slotmagic._core import sidebar_protocol
from slotmagic._core.sidebar_protocol import (
    PROTOCOL,
    TARGET,
    Action,
    BudgetInfo,
    BudgetPart,
    DeleteAction,
    DeriveAction,
    ErrorMessage,
    KernelMessage,
    RefreshAction,
    RenameAction,
    SlotInfo,
    StateMessage,
    SwitchAction,
    WorkflowInfo,
)
from slotmagic._magics.sidebar import Sidebar

SOURCE = (ROOT / "labextension" / "src" / "protocol.ts").read_text(encoding="utf-8")

# Each interface of protocol.ts and the TypedDict it copies.
PAIRS: dict[str, Any] = {
    "ISlotInfo": SlotInfo,
    "IBudgetPart": BudgetPart,
    "IBudget": BudgetInfo,
    "IWorkflow": WorkflowInfo,
    "IStateMessage": StateMessage,
    "IErrorMessage": ErrorMessage,
    "IRefreshAction": RefreshAction,
    "ISwitchAction": SwitchAction,
    "IDeriveAction": DeriveAction,
    "IRenameAction": RenameAction,
    "IDeleteAction": DeleteAction,
}


# -- protocol.ts, read ---------------------------------------------------------------------------


def constant(name: str) -> str:
    found = re.search(rf"^export const {name} = (.+);$", SOURCE, re.M)
    assert found is not None, f"protocol.ts has no {name}"
    return found[1]


def interfaces() -> dict[str, dict[str, bool]]:
    """Each exported interface's fields (its own lines, two spaces in), and whether each is
    optional (``name?:``)."""
    found = {}
    for name, body in re.findall(r"^export interface (\w+) \{\n(.*?)^\}", SOURCE, re.M | re.S):
        found[name] = {field: mark == "?" for field, mark in re.findall(r"^  (\w+)(\??):", body, re.M)}
    return found


def kinds(name: str) -> dict[str, str]:
    """The ``type`` each interface of a union type alias of protocol.ts carries, by interface."""
    found = re.search(rf"^export type {name} = (.+);$", SOURCE, re.M)
    assert found is not None, f"protocol.ts has no type {name}"
    out = {}
    for member in found[1].split(" | "):
        tag = re.search(rf"^export interface {member} \{{\n  type: '(\w+)';", SOURCE, re.M)
        assert tag is not None, member
        out[member] = tag[1]
    return out


def front_extras() -> dict[str, bool]:
    """The fields ``FrontMessage`` adds to every action."""
    found = re.search(r"^export type FrontMessage = Action & \{ (.+) \};$", SOURCE, re.M)
    assert found is not None, "protocol.ts has no FrontMessage"
    return {field: mark == "?" for field, mark in re.findall(r"(\w+)(\??): \w+", found[1])}


# -- the TypedDicts, read ------------------------------------------------------------------------


def fields(typed: Any) -> dict[str, bool]:
    """A TypedDict's fields, and whether each may be left out."""
    return {**{k: False for k in typed.__required_keys__}, **{k: True for k in typed.__optional_keys__}}


def tag(typed: Any) -> str:
    [value] = get_args(get_type_hints(typed)["type"])
    return str(value)


# -- the two sides against each other ------------------------------------------------------------


def test_the_constants_are_the_same() -> None:
    assert constant("TARGET") == repr(TARGET) and constant("PROTOCOL") == str(PROTOCOL)


def test_every_interface_and_every_typeddict_is_paired() -> None:
    assert set(interfaces()) == set(PAIRS)
    module = {name for name, value in vars(sidebar_protocol).items() if is_typeddict(value)}
    assert module == {typed.__name__ for typed in PAIRS.values()}


@pytest.mark.parametrize("interface", sorted(PAIRS))
def test_each_interface_has_its_typeddicts_fields(interface: str) -> None:
    typed = PAIRS[interface]
    ts = interfaces()[interface]
    if typed in get_args(Action):
        ts = {**ts, **front_extras()}  # FrontMessage: every action may carry a request
    py = fields(typed)
    assert sorted(ts) == sorted(py)
    # what the kernel may leave out, the front end reads as optional
    assert [name for name, optional in py.items() if optional and not ts[name]] == []


@pytest.mark.parametrize(("alias", "union"), [("KernelMessage", KernelMessage), ("Action", Action)])
def test_the_unions_hold_the_same_messages_by_type(alias: str, union: Any) -> None:
    ts = kinds(alias)
    assert {PAIRS[member] for member in ts} == set(get_args(union))
    assert {member: tag(PAIRS[member]) for member in ts} == ts


def test_a_field_the_typescript_drops_fails_the_pairing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading is not blind: protocol.ts without a field of the state differs."""
    monkeypatch.setitem(globals(), "SOURCE", SOURCE.replace("  model: string;\n", "", 1))
    assert sorted(interfaces()["IStateMessage"]) != sorted(fields(StateMessage))


# -- what a real session's sidebar sends ---------------------------------------------------------


def problems(value: Any, hint: Any, where: str = "message") -> list[str]:
    """How ``value`` (as sent, after JSON) differs from the type ``hint``: missing or unknown
    keys, values of another type."""
    origin = get_origin(hint)
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where} is not an object"]
        hints = get_type_hints(hint)
        found = [f"{where} lacks {key!r}" for key in sorted(hint.__required_keys__ - set(value))]
        found += [f"{where} has {key!r}, which {hint.__name__} does not" for key in sorted(set(value) - set(hints))]
        for key in set(value) & set(hints):
            found += problems(value[key], hints[key], f"{where}.{key}")
        return found
    if origin in (Union, types.UnionType):
        options = [problems(value, option, where) for option in get_args(hint)]
        return [] if [] in options else min(options, key=len)
    if origin is Literal:
        return [] if value in get_args(hint) else [f"{where} is {value!r}, not one of {get_args(hint)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where} is not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, get_args(hint)[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where} is not an object"]
        return [p for key, item in value.items() for p in problems(item, get_args(hint)[1], f"{where}.{key}")]
    if hint is object:
        return []  # anything the front end sent, echoed
    if hint is type(None):
        return [] if value is None else [f"{where} is not null"]
    if hint is int and isinstance(value, bool):
        return [f"{where} is a bool, not an int"]
    assert hint in (int, str, bool), f"no check for {hint!r}"
    return [] if isinstance(value, hint) else [f"{where} is {type(value).__name__}, not {hint.__name__}"]


@pytest.fixture
def panel(db_path: Path) -> Iterator[tuple[Session, Sidebar, FakeComm]]:
    with Session.open("notes", db_path=db_path, model="echo") as session:
        manager = FakeManager()
        sidebar = Sidebar(lambda: session, manager)
        sidebar.start()
        comm = manager.front_opens()
        yield session, sidebar, comm
        sidebar.close()


def sent_in_a_session(session: Session, sidebar: Sidebar, comm: FakeComm) -> list[dict[str, Any]]:
    """A panel's life: opened, a turn, a workflow, each action, and the errors it can meet."""
    session.submit_turn("a question")
    session.workflows.define("letter", "draft -> review")
    sidebar.post_execute()
    comm.front_sends({"type": "refresh", "request": 1})
    comm.front_sends({"type": "derive", "slot": "default", "new": "draft", "request": 2})
    comm.front_sends({"type": "switch", "slot": "default"})
    comm.front_sends({"type": "rename", "slot": "draft", "new": "second", "request": 3})
    comm.front_sends({"type": "delete", "slot": "default", "force": False, "request": 4})  # holds turns
    comm.front_sends({"type": "delete", "slot": "second", "force": True})
    comm.front_sends({"type": "switch"})  # no slot
    comm.front_sends({"type": "jump", "request": 5})
    session.create_slot("notes", SlotConfig.readonly())
    sidebar.post_execute()
    return comm.sent


def test_what_the_sidebar_sends_is_what_the_typeddicts_say(panel: tuple[Session, Sidebar, FakeComm]) -> None:
    sent = sent_in_a_session(*panel)
    assert [problems(message, KernelMessage) for message in sent] == [[]] * len(sent)
    seen = {(m["type"], "request" in m, "kind" in m, m.get("workflow") is not None) for m in sent}
    assert seen >= {
        ("state", False, False, False),  # the first, on opening
        ("state", False, False, True),  # pushed, with the workflow
        ("state", True, False, True),  # an action's answer
        ("error", True, True, False),  # SlotNotEmpty, to the asker
        ("error", False, False, False),  # a bad message
    }
    assert all(m["budget"] is not None for m in sent if m["type"] == "state")
    assert json.loads(json.dumps(sent)) == sent


def test_a_message_off_its_typeddict_is_found() -> None:
    """The check finds what it is for: a key too many, one missing, a value of another type."""
    good = {"type": "error", "message": "x", "request": 1}
    assert problems(good, KernelMessage) == []
    assert problems({**good, "extra": 1}, KernelMessage) != []
    assert problems({"type": "error"}, KernelMessage) != []
    assert problems({**good, "request": "1"}, KernelMessage) != []
    assert problems({**good, "request": True}, KernelMessage) != []


def test_the_actions_the_kernel_takes_are_the_typeddicts(panel: tuple[Session, Sidebar, FakeComm]) -> None:
    """What ``_action`` makes of a front end's message is the TypedDict of its type."""
    from slotmagic._magics.sidebar import _action

    for message in (
        {"type": "refresh"},
        {"type": "switch", "slot": "a"},
        {"type": "derive", "slot": "a", "new": "b"},
        {"type": "rename", "slot": "a", "new": "b"},
        {"type": "delete", "slot": "a", "force": True},
    ):
        made = _action({**message, "request": 7})
        assert problems(made, Action) == [] and made == message


# -- the widgets' answers ------------------------------------------------------------------------


def test_a_widgets_answers_are_action_statuses(db_path: Path) -> None:
    """What the tree widget says of each action (done, refused, failed) is an ``ActionStatus``."""
    from test_widgets import front_sends

    from slotmagic.widgets._messages import ActionStatus
    from slotmagic.widgets._tree import SlotTreeWidget

    with Session.open("tree", db_path=db_path, model="echo") as session:
        session.submit_turn("a question")
        session.derive_slot("draft")
        session.submit_turn("a turn of its own", slot="draft")
        widget = SlotTreeWidget(session, live=None)
        said = []
        for content in (
            {"type": "derive", "slot": "default", "new": "other"},  # done
            {"type": "delete", "slot": "draft", "force": False},  # SlotNotEmpty
            {"type": "jump"},  # no such action
        ):
            front_sends(widget, content)
            said.append(json.loads(json.dumps(widget.status)))
        assert [s["kind"] for s in said] == ["ok", "error", "error"]
        assert said[1]["error"] == "SlotNotEmpty" and said[1]["slot"] == "draft"
        assert [problems(s, ActionStatus) for s in said] == [[]] * 3
        widget.close()
