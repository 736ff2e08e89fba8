"""Stored data is data: what a cell record holds is shown again through the same cleaning as
live output (slotmagic/_sanitize.py), a widget is rebuilt from its own data traits only, and a
record that fails validation is skipped with one line while its cell acts anew. Records are
planted in a real SQLite file and a PostgreSQL schema (tests/hostile_records.py); the browser
run of the same is tests/ui/test_lab_stored_data.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hostile_records import code_in_widget_state, html_in_displays, not_json, plant, prints, shows_widget

import slotmagic
from conftest import ROOT
from slotmagic._magics.publishing import publishing_through
from slotmagic._sanitize import clean_bundle, clean_html, clean_metadata

HOSTILE = [
    '<img src=x onerror="alert(1)">',
    "<script>alert(1)</script>",
    "<svg/onload=alert(1)>",
    "<svg><g onload=alert(1)></g></svg>",
    '<a href="javascript:alert(1)">x</a>',
    '<a href=" jav&#x09;ascript:alert(1)">x</a>',
    '<a href="data:text/html,<script>alert(1)</script>">x</a>',
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<div style="position:fixed;inset:0;z-index:99999">cover</div>',
    "<style>body{display:none}</style>",
    '<img src="https://tracker.example/p.png">',
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
    '<form action="https://e.example"><input name=a></form>',
    '<details open ontoggle="alert(1)">x</details>',
    '<base href="https://e.example/">',
    '<meta http-equiv="refresh" content="0;url=https://e.example">',
    "<!--><img src=x onerror=alert(1)>-->",
    '<img src=x onerror="alert(1)"',
    "&lt;img src=x onerror=alert(1)&gt;",  # markup as text: it stays text
    """<img alt='x" onerror="alert(1)'>""",  # a quote in a kept attribute's value stays inside it
]


class _Parsed(HTMLParser):
    """Tags, attributes and text, as a browser would read them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[Any] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.items.append((tag, tuple(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.items.append(("/" + tag,))

    def handle_data(self, data: str) -> None:
        if self.items and self.items[-1][0] == "#text":
            self.items[-1] = ("#text", self.items[-1][1] + data)
        else:
            self.items.append(("#text", data))


def parsed(markup: str) -> list[Any]:
    reader = _Parsed()
    reader.feed(markup)
    reader.close()
    return reader.items


def attributes(markup: str) -> set[str]:
    return {name for item in parsed(markup) if len(item) == 2 and item[0] != "#text" for name, _ in item[1]}


@pytest.mark.parametrize("markup", HOSTILE)
def test_nothing_of_a_hostile_html_can_run_or_reach_out(markup: str) -> None:
    cleaned = clean_html(markup)
    tags = {item[0] for item in parsed(cleaned) if item[0] not in ("#text",) and not item[0].startswith("/")}
    assert tags <= {"a", "div", "details", "img", "b"}, cleaned
    assert not any(name.startswith("on") for name in attributes(cleaned)), cleaned
    assert "href" not in attributes(cleaned) and "src" not in attributes(cleaned), cleaned
    assert "url(" not in cleaned and "position" not in cleaned, cleaned
    assert clean_html(cleaned) == cleaned  # cleaning what is clean changes nothing


@pytest.mark.parametrize("tag", ["script", "style", "textarea", "svg"])
def test_what_a_dropped_tag_holds_is_left_out_with_it(tag: str) -> None:
    assert clean_html(f"<p>before <{tag}><b>alert(1)</b></{tag}>after</p>") == "<p>before after</p>"


def test_a_bundle_keeps_only_what_slotmagic_shows() -> None:
    data = {
        "text/plain": "hi",
        "text/html": "<b onclick=x>hi</b>",
        "text/markdown": "<img src=x onerror=alert(1)>",
        "application/javascript": "alert(1)",
        "image/svg+xml": "<svg onload=alert(1)/>",
        "image/png": "iVBORw0KGgo=",
        "image/jpeg": "<script>",
        "application/vnd.jupyter.widget-view+json": {"model_id": "x"},
    }
    assert clean_bundle(data) == {"text/plain": "hi", "text/html": "<b>hi</b>", "image/png": "iVBORw0KGgo="}
    assert clean_metadata({"isolated": True, "slotmagic": {"slot": "a", "turn": 2, "x": {"y": 1}}}) == {
        "slotmagic": {"slot": "a", "turn": 2}
    }


def test_what_slotmagic_renders_passes_unchanged_in_meaning() -> None:
    """Every HTML output of the tutorials (replies, tables, trees, budgets, previews, graphs,
    columns) reads the same after cleaning: tags, attributes and text."""
    seen = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                markup = output.get("data", {}).get("text/html")
                if markup is None:
                    continue
                markup = "".join(markup) if isinstance(markup, list) else markup
                assert parsed(clean_html(markup)) == parsed(markup), (path.name, markup[:200])
                seen += 1
    assert seen > 30


# -- records planted in a store, read by a kernel -------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The store the shell's session lives in: a SQLite file, then a PostgreSQL schema."""
    where = str(tmp_path / "state.sqlite3") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    monkeypatch.setenv("SLOTMAGIC_DB", where)
    yield where


CELLS = [
    ("h1", "%%turn\nWhat is a deposit?"),
    ("h2", "%slot tree"),
    ("h3", "%slot budget"),
    ("h4", "%slot list"),
    ("h5", "%slot derive side"),
]


def _restart(ip: Any) -> None:
    slotmagic.unload_ipython_extension(ip)
    delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)


def test_planted_records_are_shown_as_data_or_skipped_with_a_line(
    target: str, ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets._budget import SlotBudgetWidget
    from slotmagic.widgets._snapshot_widget import SnapshotWidget
    from slotmagic.widgets._tree import SlotTreeWidget

    for cell_id, source in CELLS:
        ip.run_cell(source, cell_id=cell_id)
    _restart(ip)
    session_id = next(c for c in ip.configurables if type(c).__name__ == "SlotMagic").session().session_id
    planted = plant(
        target,
        session_id,
        [
            (shows_widget("SlotTreeWidget"), html_in_displays),
            (shows_widget("SlotBudgetWidget"), code_in_widget_state),
            (prints("parent  turns"), not_json),
        ],
    )
    assert planted == 3
    shown: list[dict[str, Any]] = []
    before = set(_instances)
    capsys.readouterr()

    def keep(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        shown.append({"data": dict(data), "metadata": dict(metadata or {})})

    with publishing_through(ip, keep):
        for cell_id, source in CELLS:
            ip.run_cell(source, cell_id=cell_id)
    out = capsys.readouterr()
    made = [w for k, w in _instances.items() if k not in before]

    # the tree's record: its static form shown cleaned, its widget rebuilt by the tree's own view
    assert not any("onerror" in str(d["data"]) or "application/javascript" in d["data"] for d in shown)
    assert not any("text/markdown" in d["data"] or "isolated" in d["metadata"] for d in shown)
    assert any("<b>planted</b>" in d["data"].get("text/html", "") for d in shown)  # the rest of it is there
    snapshots = [w for w in made if isinstance(w, SnapshotWidget)]
    assert [s._esm for s in snapshots] == [SlotTreeWidget._esm] and SlotBudgetWidget._esm != SlotTreeWidget._esm
    # the budget's record (an ES module in its state) and the list's (not JSON): one line each,
    # and the cells act anew: a live budget, the list printed again
    skipped = [line for line in out.err.splitlines() if "skipped this cell's stored record" in line]
    assert len(skipped) == 2, out.err
    assert any(type(w).__name__ == "SlotBudgetWidget" for w in made)
    assert "   side     full  default" in out.out and "Traceback" not in out.err  # the list now


def test_a_stored_fan_out_shows_each_reply_rendered_again_from_its_text() -> None:
    """The fan-out view inserts each column's HTML: a record's own is never taken, it is made
    again from the column's text by the same Markdown rendering as a live column."""
    from slotmagic._columns import column_data
    from slotmagic.widgets._snapshot_widget import checked_widget

    live = column_data("a", "a", "echo", "done", "**bold** <img src=x onerror=alert(1)>")
    planted = {**live, "html": '<img src=x onerror="alert(1)">'}
    saved = {"module": "slotmagic.widgets._fanout", "class": "FanOutWidget", "static_id": "0" * 32}
    _, state = checked_widget({**saved, "state": {"columns": [planted], "summary": "1 reply"}})
    assert state["columns"][0]["html"] == live["html"]
    assert "<strong>bold</strong>" in live["html"] and "<img" not in live["html"]


def test_a_stored_tree_is_taken_only_as_tree_nodes(tmp_path: Path) -> None:
    from slotmagic import Session
    from slotmagic._errors import DamagedRecord
    from slotmagic.widgets._snapshot_widget import checked_widget

    with Session.open("nb", db_path=tmp_path / "s.sqlite3", model="echo") as session:
        session.submit_turn("What is a deposit?")
        session.derive_slot("court")
        nodes = [n.to_dict() for n in session.tree().nodes]
    saved = {"module": "slotmagic.widgets._tree", "class": "SlotTreeWidget", "static_id": "0" * 32}
    _, state = checked_widget({**saved, "state": {"nodes": nodes, "current": "court"}})
    assert state["nodes"] == nodes  # what slotmagic wrote reads back as it was
    for field, value in (("guides", "x"), ("messages", "2"), ("current", 1), ("id", None)):
        bad = [{**nodes[0], field: value}, nodes[1]]
        with pytest.raises(DamagedRecord, match="cannot be drawn: a tree node's"):
            checked_widget({**saved, "state": {"nodes": bad}})


def test_what_a_cell_showed_is_kept_cleaned_in_its_record(ip: Any) -> None:
    """A display made while a magic runs (a tool's, say) is kept as it will be shown again:
    cleaned once, in its last form."""
    from IPython.display import HTML, display

    from slotmagic._magics.recording import capture

    with capture(ip) as outputs:
        handle = display(HTML("<i>first</i>"), display_id=True)
        handle.update(HTML('<b onclick="steal()">hi</b><script>steal()</script>'))  # type: ignore[union-attr]
    (kept,) = outputs
    assert kept.kind == "display" and kept.data["text/html"] == "<b>hi</b>"


def test_a_turn_cells_unreadable_record_is_said_once(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nWhat is a deposit?", cell_id="t1")
    _restart(ip)
    session_id = next(c for c in ip.configurables if type(c).__name__ == "SlotMagic").session().session_id
    target = os.environ["SLOTMAGIC_DB"]
    assert plant(target, session_id, [(lambda record: record["kind"] == "turn", not_json)]) == 1
    capsys.readouterr()
    ip.run_cell("%%turn\nWhat is a deposit?", cell_id="t1")
    ip.run_cell("%slot list", cell_id="l1")
    out = capsys.readouterr()
    assert out.err.count("skipped this cell's stored record") == 1, out.err
    assert "replayed from the store, no model call · slot default · turn 1" in out.out  # the turn itself is stored


def test_a_long_printout_is_kept_whole_in_linear_work(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Printed text is kept as shown, one stream output a run of prints between displays; the
    text built to keep it is linear in what was printed (joining at every write copied all the
    text so far: 100 MB of copies for 2,000 lines of 50 characters)."""
    from IPython.display import HTML, display

    import slotmagic._magics.recording as recording

    built = [0]  # characters of the stream outputs made while keeping them

    class Counted(recording.CellOutput):
        def __init__(self, kind: Any, text: str = "", *args: Any, **kwargs: Any) -> None:
            built[0] += len(text)
            super().__init__(kind, text, *args, **kwargs)

    monkeypatch.setattr(recording, "CellOutput", Counted)
    line = "x" * 49 + "\n"
    with recording.capture(ip) as outputs:
        for _ in range(2_000):
            print(line, end="")
        display(HTML("<i>between</i>"))
        print("after")
    assert [o.kind for o in outputs] == ["stream", "display", "stream"]
    assert outputs[0].text == line * 2_000 and outputs[2].text == "after\n"
    printed = 2_000 * len(line) + len("after\n")
    assert built[0] <= 3 * printed, built[0]
