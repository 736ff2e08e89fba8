"""The widgets' models, without a browser: their state after what other cells (magics, the
Python API) do, front-end messages as the comm delivers them, and the text fallbacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import slotmagic
from slotmagic import FocusedConfig, Message, Session
from slotmagic._core.messages import ToolCall
from slotmagic._core.slots import SlotMode
from slotmagic._engine.view.view import Omitted, View, ViewEntry, view_data, view_html, view_summary
from slotmagic._tree import SlotTree
from slotmagic.widgets import (
    SlotBudgetWidget,
    SlotPreviewWidget,
    SlotTreeWidget,
    WorkflowWidget,
    live_widgets,
    workflow_widget,
)
from slotmagic.widgets._live import LiveWidgets
from slotmagic.widgets._tree import COLLAPSE_OVER

XSS = "<img src=x onerror=alert(1)>"


def front_sends(widget: Any, content: dict[str, Any]) -> None:
    """A custom message from the widget's front end, as ipywidgets' comm hands it over."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def shown(ip: Any, line: str) -> Any:
    """Run a ``%slot`` line that displays a widget; return the widget (the newest live one)."""
    ip.run_cell(line)
    return live_widgets(ip).widgets()[-1]  # type: ignore[union-attr]


def followed(ip: Any, line: str) -> Any:
    """As :func:`shown`, then "follow live" clicked: the widget follows the session from then on."""
    widget = shown(ip, line)
    front_sends(widget, {"type": "follow"})
    return widget


def nodes(widget: SlotTreeWidget) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in widget.shown()}


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("notes", db_path=db_path, model="echo") as s:
        yield s


# -- the plain objects ----------------------------------------------------------------------------


def test_the_tree_of_a_session(session: Session) -> None:
    session.submit_turn("I need help with a rental deposit dispute.")
    session.derive_slot("court")
    session.derive_slot("short", parent="court", strategy=FocusedConfig(recent_messages=2))
    session.derive_slot("letter", parent="default")
    session.derive_slot("firm", parent="letter")
    session.switch_slot("court")
    session.submit_turn(f"And {XSS}?")

    tree = session.tree()
    assert isinstance(tree, SlotTree) and tree.current == "court" and len(tree) == 5
    assert [n.id for n in tree.nodes] == ["default", "court", "short", "letter", "firm"]
    court = tree.node("court")
    assert (court.parent, court.children, court.depth, court.fork_at, court.messages) == (
        "default",
        ("short",),
        1,
        2,
        4,
    )
    assert court.current and court.last_user == f"And {XSS}?"
    assert tree.node("short").mode == "focused" and tree.node("short").guides == (True,)  # letter comes after court
    assert tree.node("firm").guides == (False,) and tree.node("firm").last
    assert tree.to_text().splitlines() == [
        "session notes · 5 slots · current slot court",
        "  default  (full · 1 turn, 2 messages, 54 tokens · “I need help with a rental deposit dispute.”)",
        f"* ├─ court  (full · 2 turns, 4 messages, {court.tokens} tokens · forked at 2 messages · “And {XSS}?”)",
        "  │  └─ short  (focused · 1 turn, 2 messages, 54 tokens · forked at 2 messages · "
        "“I need help with a rental deposit dispute.”)",
        "  └─ letter  (full · 1 turn, 2 messages, 54 tokens · forked at 2 messages · "
        "“I need help with a rental deposit dispute.”)",
        "     └─ firm  (full · 1 turn, 2 messages, 54 tokens · forked at 2 messages · "
        "“I need help with a rental deposit dispute.”)",
    ]
    page = tree._repr_html_()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert json.loads(json.dumps(tree.to_dict()))["nodes"][1]["children"] == ["short"]


def test_the_tree_of_a_chain_deeper_than_pythons_recursion_limit(session: Session) -> None:
    import sys

    depth = sys.getrecursionlimit() + 50
    parent = "default"
    for i in range(depth):
        session.derive_slot(f"c{i}", parent=parent)
        parent = f"c{i}"
    tree = session.tree()
    assert [n.depth for n in tree.nodes] == list(range(depth + 1))
    assert tree.node(parent).guides == (False,) * (depth - 1) and tree.node(parent).last


def test_html_of_a_view_and_a_budget_escapes_every_text(session: Session) -> None:
    session.submit_turn(XSS)
    for page in (session.preview()._repr_html_(), session.budget()._repr_html_()):
        assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in session.preview()._repr_html_()
    assert "<details>" in session.preview()._repr_html_()  # bodies collapsed
    assert "<td>history</td>" in session.budget()._repr_html_()


def test_view_data_marks_injected_blocks_of_any_kind_and_places_what_was_left_out() -> None:
    entries = (
        ViewEntry(Message.system("Be brief."), "system", None, 4),
        ViewEntry(Message.system("GOALS: win"), "context", None, 5),  # type: ignore[arg-type]
        ViewEntry(Message.system("STEP 2 of 3"), "workflow", None, 6),  # type: ignore[arg-type]
        ViewEntry(Message.system("Summary …"), "compaction", None, 7),
        ViewEntry(Message.user("see namespace://results/7 for the rest"), "history", 6, 8),
        ViewEntry(Message.assistant("", tool_calls=(ToolCall("c1", "search", "{}"),)), "history", 7, 3),
    )
    view = View("s", entries, (Omitted(0, 4, "compacted"), Omitted(4, 6, "filtered")), 8)
    data = view_data(view, "focused: last 2 messages")
    rows = data["rows"]
    assert [r["type"] for r in rows] == ["entry"] * 4 + ["omitted", "omitted", "entry", "entry"]
    assert [r["label"] for r in rows[:4]] == ["system prompt", "context", "workflow", "compaction summary"]
    assert all(r["injected"] for r in rows[:4]) and not rows[6]["injected"]
    assert rows[4]["text"] == "4 stored messages folded into the compaction summary (stored messages 1-4)"
    assert rows[5]["text"] == "2 stored messages left out by the focused filter (stored messages 5-6)"
    assert rows[6]["refs"] == ["namespace://results/7"] and rows[7]["calls"] == ["search({})"]
    assert data["omitted"] == 6 and data["tokens"] == 33


def test_a_long_view_shows_its_latest_entries(session: Session) -> None:
    for i in range(30):
        session.append([Message.user(f"q{i}"), Message.assistant(f"a{i}")])
    data = view_data(session.preview(), row_limit=10)
    assert data["hidden"] == 50 and data["rows"][0]["type"] == "hidden"
    assert [r["text"] for r in data["rows"][1:3]] == ["q25", "a25"] and len(data["rows"]) == 11


def test_a_preview_says_which_bare_tool_definitions_it_counts(session: Session) -> None:
    """A history of tool calls sent in a turn that offers no tools carries their definitions:
    the widget's and the HTML preview's line names them, as %slot preview does."""
    call = ToolCall("c1", "search", "{}")
    session.append([Message.user("find it"), Message.assistant("", (call,)), Message.tool("c1", "found", "search")])
    view = session.preview(model="openai:gpt-4o-mini")
    data = view_data(view)
    assert data["bare_tools"] == ["search"]
    assert view_summary(data).endswith(" · with bare tool definitions (search)")
    assert "with bare tool definitions (search)" in view_html(view)
    assert view_data(session.preview(model="echo"))["bare_tools"] == []  # echo is sent none


# -- the tree widget in a shell, following other cells ------------------------------------------


def test_the_tree_is_as_of_its_cell_then_follows_every_cell_when_asked(ip: Any, db_path: Path) -> None:
    ip.run_cell("%%turn\nMy landlord kept my deposit.")
    tree = shown(ip, "%slot tree")
    assert isinstance(tree, SlotTreeWidget)
    assert tree.current == "default" and list(nodes(tree)) == ["default"]
    assert nodes(tree)["default"]["messages"] == 2
    ip.run_cell("x = 1")  # nothing changed: nothing to say
    assert tree.as_of == "" and not tree.can_follow

    ip.run_cell("%slot derive court")  # derive (and switch): the tree stays as of its cell, and says so
    assert list(nodes(tree)) == ["default"] and tree.current == "default"
    assert tree.as_of.startswith("as of cell [") and tree.as_of.endswith("the session has changed since")
    assert tree.can_follow
    front_sends(tree, {"type": "follow"})  # "follow live"
    assert tree.as_of == "" and not tree.can_follow
    assert list(nodes(tree)) == ["default", "court"] and tree.current == "court"
    ip.run_cell("%%turn\nHow do I file?")  # a turn
    assert nodes(tree)["court"]["messages"] == 4 and nodes(tree)["court"]["last_user"] == "How do I file?"
    ip.run_cell("%slot switch default")  # a switch
    assert tree.current == "default" and nodes(tree)["default"]["current"]
    ip.run_cell("%slot rename court small-claims")  # a rename
    assert list(nodes(tree)) == ["default", "small-claims"]
    ip.run_cell("%slot delete small-claims --force")  # a delete
    assert list(nodes(tree)) == ["default"]

    # the Python API, on the same store (another connection)
    mine = _magic_session(ip)
    with Session.open(mine.session_id, db_path=mine.store.path) as other:
        other.derive_slot("letter")
        other.switch_slot("letter")
    ip.run_cell("pass")  # any cell
    assert list(nodes(tree)) == ["default", "letter"] and tree.current == "letter"
    assert tree.error == ""


def _magic_session(ip: Any) -> Session:
    magic = next(c for c in ip.configurables if type(c).__name__ == "SlotMagic")
    return magic.session()  # type: ignore[no-any-return]


def test_a_click_switches_the_kernels_slot_and_every_widget_says_so(ip: Any) -> None:
    ip.run_cell("%%turn\nFirst question.")
    ip.run_cell("%slot derive court")
    tree = shown(ip, "%slot tree")
    budget = shown(ip, "%slot budget")
    following = followed(ip, "%slot preview")
    assert budget.budget["slot"] == "court"
    front_sends(tree, {"type": "switch", "slot": "default"})  # the tree shows the session now: it acts
    assert tree.current == "default" and following.view["slot"] == "default"  # no cell ran
    assert tree.as_of == "" and not tree.pinned  # the tree acted: it follows from now on
    assert budget.budget["slot"] == "court" and "changed since" in budget.as_of  # as of its cell, and says so
    assert tree.status["kind"] == "ok" and tree.status["text"] == "switched to slot default"
    assert tree.status["current"] == "default"  # the view hides the line once another slot is current
    out = _printed(ip, "%slot")
    assert out.startswith("current slot: default")


def _printed(ip: Any, line: str) -> str:
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        ip.run_cell(line)
    return captured.stdout


def test_derive_rename_and_delete_from_the_tree(ip: Any) -> None:
    ip.run_cell("%%turn\nFirst question.")
    tree = shown(ip, "%slot tree")
    front_sends(tree, {"type": "derive", "slot": "default", "new": "branch"})
    assert list(nodes(tree)) == ["default", "branch"] and tree.current == "branch"
    front_sends(tree, {"type": "rename", "slot": "branch", "new": "plan-b"})
    assert list(nodes(tree)) == ["default", "plan-b"]
    front_sends(tree, {"type": "rename", "slot": "plan-b", "new": "not valid!"})
    assert tree.status["kind"] == "error" and "invalid slot id 'not valid!'" in tree.status["text"]
    assert list(nodes(tree)) == ["default", "plan-b"]

    ip.run_cell("%%turn\nOnly on plan-b.")
    front_sends(tree, {"type": "delete", "slot": "plan-b"})  # holds a turn no other slot has
    assert tree.status["error"] == "SlotNotEmpty" and tree.status["action"] == "delete"
    assert tree.status["slot"] == "plan-b" and "plan-b" in nodes(tree)
    assert tree.status["text"] == "Slot plan-b holds 1 turn that no other slot has."
    front_sends(tree, {"type": "delete", "slot": "plan-b", "force": True})
    assert list(nodes(tree)) == ["default"] and tree.current == "default"
    assert tree.status["text"] == "deleted slot plan-b; current slot is now default"

    front_sends(tree, {"type": "jump"})  # nonsense from a front end: one line, no traceback
    assert tree.status["kind"] == "error"
    front_sends(tree, {"type": "switch"})
    assert "has no 'slot'" in tree.status["text"]


def test_model_and_user_text_is_state_as_text(ip: Any) -> None:
    ip.run_cell(f"%%turn\nPlease repeat {XSS}")
    tree = shown(ip, "%slot tree")
    preview = shown(ip, "%slot preview")
    assert nodes(tree)["default"]["last_user"] == f"Please repeat {XSS}"
    reply = next(r for r in preview.view["rows"] if r.get("role") == "assistant")
    assert XSS in reply["text"]  # the echo model's reply holds it: a plain string in the state
    for widget in (tree, preview):
        bundle, _ = widget._repr_mimebundle_()
        assert "<img" not in bundle["text/html"] and "&lt;img" in bundle["text/html"]
        assert XSS in bundle["text/plain"]


def test_budget_follows_turns_and_is_computed_only_when_something_changed(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = followed(ip, "%slot budget")
    assert [c["name"] for c in budget.budget["categories"]] == [
        "system",
        "history",
        "tools",
        "tool_results",
        "reserve",
    ]
    assert budget.budget["used"] == 3 and budget.budget["threshold_at"] == 512 + budget.budget["threshold"]
    ip.run_cell("%%turn\nA question.")
    used = budget.budget["used"]
    assert used > 3
    calls: list[str | None] = []
    real = Session.budget

    def counting(self: Session, slot: str | None = None, **kw: Any) -> Any:
        calls.append(slot)
        return real(self, slot, **kw)

    monkeypatch.setattr(Session, "budget", counting)
    ip.run_cell("x = 1")
    assert calls == []  # nothing changed: not computed again
    ip.run_cell("%%turn\nAnother one.")
    assert len(calls) == 1 and budget.budget["used"] > used
    bundle, _ = budget._repr_mimebundle_()
    assert bundle["text/plain"].startswith("slot default · echo · window 8,192 tokens")


def test_a_widget_for_a_slot_that_goes_away_says_so(ip: Any) -> None:
    ip.run_cell("%slot derive gone --no-switch")
    preview = followed(ip, "%slot preview gone")
    ip.run_cell("%slot delete gone")
    assert preview.error == "slot gone is gone (deleted or renamed): shown as it was last"
    assert preview.view["slot"] == "gone"  # the last state stays shown


def test_widgets_off_prints_the_text_forms(ip: Any) -> None:
    ip.run_cell("%%turn\nA question.")
    ip.run_cell("%config SlotMagic.widgets = False")
    before = len(live_widgets(ip).widgets())  # type: ignore[union-attr]
    tree = _printed(ip, "%slot tree")
    assert tree.startswith("session ") and "* default  (full · 1 turn, 2 messages" in tree
    assert _printed(ip, "%slot budget").startswith("slot default · echo · window 8,192 tokens")
    assert _printed(ip, "%slot preview").startswith("slot default (full) would send 2 messages")
    assert len(live_widgets(ip).widgets()) == before  # type: ignore[union-attr]


def test_a_big_tree_starts_with_subtrees_off_the_current_path_collapsed(session: Session) -> None:
    for i in range(10):
        session.derive_slot(f"b{i}", parent="default")
        for j in range(9):
            session.derive_slot(f"b{i}.{j}", parent=f"b{i}")
            session.derive_slot(f"b{i}.{j}.x", parent=f"b{i}.{j}")
    session.switch_slot("b3.4.x")
    tree = SlotTreeWidget(session, live=LiveWidgets())
    assert len(tree.nodes) == 191 > COLLAPSE_OVER
    assert "b3" not in tree.collapsed and "b3.4" not in tree.collapsed  # the way to the current slot
    assert "b2" in tree.collapsed and "b3.5" in tree.collapsed and "default" not in tree.collapsed
    tree.collapsed = ["b2"]  # what the front end sets
    session.delete_slot("b2.0.x")
    tree.refresh()
    assert tree.collapsed == ["b2"] and "b2.0.x" not in nodes(tree)


def test_the_tree_sends_the_slots_that_changed_not_the_whole_tree(session: Session) -> None:
    session.submit_turn("first")
    for i in range(5):
        session.derive_slot(f"b{i}", parent="default")
    session.switch_slot("default")
    tree = SlotTreeWidget(session, live=LiveWidgets())
    sent: list[str] = []
    tree.observe(lambda change: sent.append(change["name"]), names=["nodes", "changed"])
    whole = tree.nodes
    assert tree.changed == {}

    tree.refresh()  # nothing written since: the session hands back the same tree, nothing is sent
    assert sent == [] and session.tree() is session.tree()

    session.submit_turn("a turn on b2", slot="b2")
    tree.refresh()
    assert sent == ["changed"] and tree.nodes is whole  # the whole tree did not travel again
    assert list(tree.changed) == ["b2"] and tree.changed["b2"]["last_user"] == "a turn on b2"
    assert nodes(tree)["b2"]["messages"] == 4 and nodes(tree)["b1"]["messages"] == 2

    session.switch_slot("b4")  # the current mark moves: two slots change
    tree.refresh()
    assert set(tree.changed) == {"b2", "default", "b4"} and nodes(tree)["b4"]["current"]
    assert not nodes(tree)["default"]["current"] and tree.nodes is whole

    sent.clear()
    session.derive_slot("b5", parent="b1")  # a new slot changes the tree's shape: all of it again
    tree.refresh()
    assert "nodes" in sent and tree.changed == {} and "b5" in nodes(tree)
    assert nodes(tree)["b2"]["messages"] == 4  # what was sent as a change is in the whole tree now
    assert "b5" in tree.to_text() and "b5" in tree.to_html()


def test_a_cell_run_again_replaces_its_widget(ip: Any) -> None:
    live = live_widgets(ip)
    assert live is not None
    info = type("Info", (), {"cell_id": "cell-1", "raw_cell": "%slot tree"})()
    live.pre_run_cell(info)
    first = SlotTreeWidget(live.session, live=live)
    live.pre_run_cell(info)  # the same cell again
    second = SlotTreeWidget(live.session, live=live)
    assert first.closed and not second.closed and live.widgets() == [second]


def test_after_unload_widgets_keep_their_state(ip: Any) -> None:
    import slotmagic

    tree = followed(ip, "%slot tree")
    slotmagic.unload_ipython_extension(ip)
    tree.refresh()
    assert "slotmagic is not loaded" in tree.error and list(nodes(tree)) == ["default"]
    slotmagic.load_ipython_extension(ip)
    ip.run_cell("%slot derive again")
    assert list(nodes(tree)) == ["default", "again"] and tree.error == ""


def test_a_widget_action_tells_the_listeners(session: Session) -> None:
    live, told = LiveWidgets(), []
    live.listeners.append(lambda: told.append(1))
    tree = SlotTreeWidget(session, live=live)
    session.derive_slot("b")
    front_sends(tree, {"type": "switch", "slot": "b"})
    assert told == [1] and tree.current == "b"


# -- the workflow widget -------------------------------------------------------------------------


GRAPH = {
    "name": "demand letter",
    "current": "draft",
    "nodes": [
        {"id": "research", "status": "done", "slot": "default"},
        {"id": "draft", "status": "in_progress", "slot": "letter"},
        {"id": "review", "status": "pending", "slot": None},
        {"id": "legal", "status": "blocked", "slot": None},
        {"id": "send", "status": "pending", "slot": None},
    ],
    "edges": [
        {"from": "research", "to": "draft", "label": None},
        {"from": "draft", "to": "review", "label": "first version"},
        {"from": "draft", "to": "legal", "label": None},
        {"from": "review", "to": "send", "label": "approved"},
        {"from": "legal", "to": "send", "label": None},
        {"from": "research", "to": "send", "label": None},
    ],
}


def test_workflow_widget_lays_out_and_switches(session: Session) -> None:
    session.derive_slot("letter", parent="default")
    widget = workflow_widget(session, GRAPH, live=LiveWidgets())
    assert isinstance(widget, WorkflowWidget)
    layout = widget.placement
    assert {k: v[0] for k, v in layout["nodes"].items()} == {
        "research": 0,
        "draft": 1,
        "review": 2,
        "legal": 2,
        "send": 3,
    }
    long_edge = next(e for e in layout["edges"] if e["index"] == 5)
    assert [p[0] for p in long_edge["points"]] == [0, 1, 2, 3]  # through a waypoint in each layer
    assert widget.current_slot == "default"
    front_sends(widget, {"type": "switch", "node": "draft"})
    assert session.current_slot == "letter" and widget.current_slot == "letter"
    front_sends(widget, {"type": "switch", "node": "review"})
    assert widget.status["kind"] == "error" and "no slot attached" in widget.status["text"]
    text = widget._repr_mimebundle_()[0]["text/plain"]
    assert text.splitlines()[:3] == [
        "workflow demand letter · 1 of 5 done · current node draft",
        "  research [done] · slot default -> draft, send",
        "* draft [in_progress] · slot letter (current) -> review (first version), legal",
    ]


def test_workflow_widget_follows_a_graph_source(session: Session) -> None:
    graph = json.loads(json.dumps(GRAPH))
    widget = WorkflowWidget(session, lambda: graph, live=LiveWidgets())
    graph["nodes"][1]["status"] = "done"
    graph["current"] = "review"
    widget.refresh()
    assert widget.graph["current"] == "review" and widget.graph["nodes"][1]["status"] == "done"


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ([], "a workflow graph is a dict"),
        ({"nodes": [{"id": "a"}, {"id": "a"}]}, "names node 'a' twice"),
        ({"nodes": [{"id": "a"}], "edges": [{"from": "a", "to": "b"}]}, "no node 'b'"),
        ({"nodes": [{"id": "a"}], "current": "z"}, "current node 'z'"),
        ({"nodes": [{"id": 3}]}, "node id must be a string"),
    ],
)
def test_a_malformed_graph_is_one_line(session: Session, graph: Any, message: str) -> None:
    from slotmagic._errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        WorkflowWidget(session, graph, live=LiveWidgets())


def test_layout_of_cycles_self_loops_and_disconnected_parts() -> None:
    from slotmagic.widgets._layout import layered_layout

    out = layered_layout(["a", "b", "c", "x", "y"], [("a", "b"), ("b", "c"), ("c", "a"), ("x", "x"), ("y", "x")])
    assert {k: v[0] for k, v in out["nodes"].items()} == {"a": 0, "b": 1, "c": 2, "x": 1, "y": 0}
    back = [e for e in out["edges"] if e["back"]]
    assert [e["index"] for e in back] == [2]  # c -> a closes the cycle: drawn back, from c to a
    assert back[0]["points"][0] == out["nodes"]["c"] and back[0]["points"][-1] == out["nodes"]["a"]
    assert all(e["index"] != 3 for e in out["edges"])  # a self loop is not drawn
    for row in out["layers"]:  # every place in a layer is distinct
        assert len({tuple(out["nodes"].get(n, [0, i])) for i, n in enumerate(row)}) == len(row)
    assert layered_layout([], []) == {"layers": [], "nodes": {}, "edges": []}


def test_barycentre_ordering_removes_a_crossing() -> None:
    from slotmagic.widgets._layout import layered_layout

    out = layered_layout(["a", "b", "c", "d"], [("a", "d"), ("b", "c")])
    # a above b, so d (a's) goes above c (b's): no crossing
    assert out["nodes"]["d"][1] < out["nodes"]["c"][1]


def test_tree_preview_budget_widgets_from_plain_python(session: Session) -> None:
    session.submit_turn("Hello")
    live = LiveWidgets()
    widgets = [
        SlotTreeWidget(session, live=live),
        SlotPreviewWidget(session, live=live),
        SlotBudgetWidget(session, live=live),
    ]
    session.derive_slot("b")
    session.switch_slot("b")
    session.submit_turn("On b")
    live.refresh()  # what post_execute does in a kernel
    tree, preview, budget = widgets
    assert tree.current == "b" and preview.view["slot"] == "b" and budget.budget["slot"] == "b"
    assert preview.view["count"] == 4


def test_a_click_in_the_sidebar_refreshes_the_widgets(session: Session) -> None:
    from slotmagic._magics.sidebar import Sidebar

    class Comm:
        def __init__(self) -> None:
            self.sent: list[dict[str, Any]] = []
            self.on_msg = lambda callback: setattr(self, "callback", callback)
            self.on_close = lambda callback: None

        def send(self, data: dict[str, Any]) -> None:
            self.sent.append(data)

    live = LiveWidgets()
    tree = SlotTreeWidget(session, live=live)
    session.derive_slot("b")
    sidebar = Sidebar(lambda: session, manager=None, on_action=live.refresh)
    comm = Comm()
    sidebar._watch(comm)
    comm.callback({"content": {"data": {"type": "switch", "slot": "b"}}})  # type: ignore[attr-defined]
    assert comm.sent[-1]["current"] == "b" and tree.current == "b"


def test_widgets_off_from_the_environment(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import slotmagic

    monkeypatch.setenv("SLOTMAGIC_WIDGETS", "0")
    slotmagic.load_ipython_extension(ip)  # settings are read when the extension loads
    assert _printed(ip, "%slot tree").startswith("session ")
    monkeypatch.setenv("SLOTMAGIC_WIDGETS", "1")
    slotmagic.load_ipython_extension(ip)
    assert _printed(ip, "%slot tree") == ""  # a widget (displayed, not printed)


def test_workflow_show_draws_the_active_workflow_and_follows_it(ip: Any) -> None:
    from slotmagic.widgets import WorkflowWidget

    ip.run_cell("%%workflow claim\nintake -> letter\nletter -> file [if no answer]")
    widget = followed(ip, "%workflow show")
    assert isinstance(widget, WorkflowWidget)
    assert "* intake [pending] -> letter" in widget.to_text() and "(if no answer)" in widget.to_text()
    ip.run_cell("%workflow status intake done")  # another cell: the drawing follows
    assert "* intake [done] -> letter" in widget.to_text() and "1 of 3 done" in widget.to_text()


def test_the_preview_widget_shows_pins_and_exclusions(session: Session) -> None:
    session.submit_turn("Keep this in view.")
    session.submit_turn("Never send this.")
    live = LiveWidgets()
    preview = SlotPreviewWidget(session, live=live)
    session.history.pin(0)
    session.history.exclude(2)
    live.refresh()  # a pin changes no slot row: the widget still sees it
    rows = preview.view["rows"]
    pinned = [r for r in rows if r["type"] == "entry" and r["pinned"]]
    assert [(r["position"], r["label"]) for r in pinned] == [(0, "pinned")]
    [gap] = [r for r in rows if r["type"] == "omitted"]
    assert gap["reason"] == "excluded" and "the model never sees it" in gap["text"]


def test_the_preview_and_budget_widgets_follow_what_changes_no_slot_row(session: Session) -> None:
    # The working context and the workflow go into the system side of the request without a
    # new message: the widgets follow them too, and draw nothing when nothing changed.
    session.submit_turn("How do I get my deposit back?")
    live = LiveWidgets()
    preview, budget = SlotPreviewWidget(session, live=live), SlotBudgetWidget(session, live=live)
    system_used = budget.budget["categories"][0]["used"]
    session.context.add_goal("get the deposit back")
    live.refresh()
    assert any(r["type"] == "entry" and "get the deposit back" in r["text"] for r in preview.view["rows"])
    assert budget.budget["categories"][0]["used"] > system_used
    session.workflows.define("claim", "letter -> small-claims-court")
    live.refresh()
    assert any(r["type"] == "entry" and "small-claims-court" in r["text"] for r in preview.view["rows"])
    drawn = preview.view
    live.refresh()
    assert preview.view is drawn  # nothing changed: not drawn again


def test_left_out_messages_are_numbered_as_slot_show_numbers_them() -> None:
    from slotmagic._engine.view.view import stored_range

    assert stored_range(5, 6) == "stored message 6"  # was "positions 5-5"
    assert stored_range(0, 4) == "stored messages 1-4"


def test_a_slot_with_its_own_budget_is_measured_against_it_everywhere(session: Session) -> None:
    """The bar, its headline, the static form and the sidebar all say the slot's 800 tokens,
    as the preview does, not the model's 8,192."""
    from slotmagic import ContextBudget, SlotConfig
    from slotmagic._engine.view.budgeting import budget_data, budget_html
    from slotmagic._snapshot import session_snapshot
    from slotmagic.widgets import SlotBudgetWidget

    session.create_slot("lease", SlotConfig(budget=ContextBudget.auto(800)))
    session.switch_slot("lease")
    session.submit_turn("How long may the landlord keep my deposit?")
    data = budget_data(session.budget("lease"))
    assert data["window"] == 8192 and data["total"] == 800 and data["scale"] == 800 and data["own_budget"]
    assert sum(c["allowed"] for c in data["categories"]) == 800
    assert 0 < data["threshold_at"] <= 800
    widget = SlotBudgetWidget(session, "lease", live=None)
    assert widget.budget["scale"] == 800
    widget.close()
    assert "of budget 800 (window 8,192) tokens" in budget_html(session.budget("lease"))
    assert "budget 800" in session.preview("lease")._repr_html_()  # the preview says the same
    state = session_snapshot(session)
    assert state["budget"]["total"] == 800 and state["budget"]["window"] == 8192
    # a slot without a budget of its own: the window, as before
    assert budget_data(session.budget("default"))["scale"] == 8192


def test_a_tree_made_again_after_a_change_is_the_tree_built_whole(session: Session) -> None:
    from slotmagic._tree import build_tree

    session.submit_turn("first")
    for i in range(6):
        session.derive_slot(f"b{i}", parent="default" if i < 3 else f"b{i - 3}")
    before = session.tree()
    changes = [
        lambda: session.submit_turn("on b4", slot="b4"),
        lambda: session.switch_slot("b1"),
        lambda: session.configure_slot("b2", mode=SlotMode.FOCUSED),
        lambda: session.submit_turn("on b1"),
        lambda: session.rename_slot("b5", "five"),
        lambda: session.derive_slot("b6", parent="b0"),
        lambda: session.delete_slot("b3", force=True),
    ]
    for change in changes:
        change()
        after = session.tree()
        assert after == build_tree(session)  # made again from the last one: the same as built whole
        if len(after) == len(before) and [n.id for n in after.nodes] == [n.id for n in before.nodes]:
            kept = sum(a is b for a, b in zip(before.nodes, after.nodes, strict=True))
            assert kept >= len(after) - 2  # a turn or a switch makes one or two nodes again, not all
        before = after


def test_a_record_names_a_widget_class_by_its_module_old_or_new() -> None:
    from slotmagic.widgets._snapshot_widget import widget_class

    for module in ("slotmagic.widgets._tree", "slotmagic.widgets.tree"):  # as now, as slotmagic 0.1 wrote it
        assert widget_class({"module": module, "class": "SlotTreeWidget"}) is SlotTreeWidget
    for module in ("os", "slotmagic._store.sqlite", "slotmagic.widgetsx.tree"):
        with pytest.raises(ValueError, match="not a slotmagic widget's module"):
            widget_class({"module": module, "class": "SlotTreeWidget"})


def test_a_replayed_read_rebuilds_its_widget_as_of_its_cell_and_follows_live_on_request(ip: Any) -> None:
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets._snapshot_widget import SnapshotWidget

    cells = [("w1", "%%turn\nFirst question."), ("w2", "%slot tree"), ("w3", "%slot derive court")]
    for cell_id, source in cells:
        ip.run_cell(source, cell_id=cell_id)
    first = live_widgets(ip).widgets()[-1]  # type: ignore[union-attr]
    assert list(nodes(first)) == ["default"] and "changed since" in first.as_of  # the first run's: as of its cell
    slotmagic.unload_ipython_extension(ip)  # a restart
    delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)
    for cell_id, source in cells:  # Run All
        ip.run_cell(source, cell_id=cell_id)
    snapshot = [w for w in _instances.values() if isinstance(w, SnapshotWidget)][-1]
    assert [n["id"] for n in snapshot.nodes] == ["default"]  # as of its cell: before the derive
    assert snapshot.as_of.startswith("as of cell [") and "changed since" in snapshot.as_of
    assert snapshot._esm == SlotTreeWidget._esm  # drawn by the tree's own view
    front_sends(snapshot, {"type": "follow"})
    assert snapshot.as_of == "" and [n["id"] for n in snapshot.nodes] == ["default", "court"]
    ip.run_cell("%slot derive letter")  # a later cell: the snapshot follows the session now
    assert [n["id"] for n in snapshot.nodes] == ["default", "court", "letter"]
    front_sends(snapshot, {"type": "switch", "slot": "default"})  # and acts on it
    assert _magic_session(ip).current_slot == "default" and snapshot.current == "default"


def test_the_as_of_mark_names_the_cells_own_execution_count(ip: Any) -> None:
    """``In [n]`` of the cell that shows the widget, under IPython 8 (which advances the count
    after a cell) and 9 (before it): the count a cell runs under, not the next one."""
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets._snapshot_widget import SnapshotWidget

    cells = [("w1", "%%turn\nFirst question."), ("w2", "%slot tree"), ("w3", "%slot derive court")]
    for cell_id, source in cells:
        ip.run_cell(source, store_history=True, cell_id=cell_id)
    slotmagic.unload_ipython_extension(ip)  # a restart
    delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)
    counts = {
        cell_id: ip.run_cell(source, store_history=True, cell_id=cell_id).execution_count for cell_id, source in cells
    }
    snapshot = [w for w in _instances.values() if isinstance(w, SnapshotWidget)][-1]
    assert snapshot.as_of.startswith(f"as of cell [{counts['w2']}] ·"), (snapshot.as_of, counts)


def test_a_click_on_a_view_of_an_earlier_moment_says_so_in_place_and_acts_once_following(ip: Any) -> None:
    ip.run_cell("%%turn\nFirst question.")
    tree = shown(ip, "%slot tree")
    ip.run_cell("%slot derive court")  # the session moves on; the tree stays as of its cell
    front_sends(tree, {"type": "switch", "slot": "default"})
    assert _magic_session(ip).current_slot == "court"  # nothing done...
    assert tree.status["kind"] == "error" and tree.status["text"].startswith("Not done: this view is as of cell [")
    assert "Follow live" in tree.status["text"]  # ...and said where the click was, with what does act
    front_sends(tree, {"type": "follow"})
    front_sends(tree, {"type": "switch", "slot": "default"})
    assert _magic_session(ip).current_slot == "default" and tree.current == "default"


def test_replayed_views_that_cannot_act_say_so_on_the_click(ip: Any) -> None:
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets._snapshot_widget import SnapshotWidget

    cells = [(f"f{n}", f"%%turn\nQuestion {n} about the lease.") for n in range(4)]
    cells += [("c1", "%slot compact --edit --keep 2"), ("t1", "%slot tree"), ("d1", "%slot derive court")]
    for cell_id, source in cells:
        ip.run_cell(source, cell_id=cell_id)
    slotmagic.unload_ipython_extension(ip)  # a restart, then Run All
    delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)
    before = set(_instances)
    for cell_id, source in cells:
        ip.run_cell(source, cell_id=cell_id)
    editor, tree = [w for k, w in _instances.items() if k not in before and isinstance(w, SnapshotWidget)]
    front_sends(editor, {"type": "apply", "text": "my summary"})  # a change's widget, shown again
    assert editor.failed and editor.status.startswith("Not done: this view is as of cell [")
    assert "Edit the cell to run it again" in editor.status and _magic_session(ip).compactions() == []
    front_sends(tree, {"type": "switch", "slot": "default"})  # a read's, the session changed since
    assert tree.status["kind"] == "error" and "Follow live" in tree.status["text"]
    assert _magic_session(ip).current_slot == "court"


def test_a_stored_workflow_is_drawn_from_its_graph_and_never_as_a_layout() -> None:
    """The graph's placement is ``placement``, not ``layout`` (every DOM widget's Layout model:
    the front end drew a dict there as a child view, and a snapshot left it out). A record
    written before the placement was stored gets it made from its graph."""
    from slotmagic.widgets._snapshot_widget import checked_widget

    nodes = [{"id": "a", "status": "done", "slot": None}, {"id": "b", "status": "pending", "slot": None}]
    graph = {"name": "claim", "current": "a", "nodes": nodes, "edges": [{"from": "a", "to": "b", "label": None}]}
    saved = {"module": "slotmagic.widgets._workflow", "class": "WorkflowWidget", "static_id": "0" * 32}
    kind, state = checked_widget({**saved, "state": {"graph": graph, "current_slot": "default"}})
    assert state["placement"]["nodes"] == {"a": [0, 0], "b": [1, 0]}
    planted = {"graph": graph, "placement": {"layers": "x"}}  # a record's own placement is not taken
    assert checked_widget({**saved, "state": planted})[1]["placement"] == state["placement"]
    assert "layout" not in kind.class_traits(sync=True) or kind.class_traits()["layout"].__class__.__name__ != "Dict"
