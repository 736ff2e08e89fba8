"""Stored data is data, in a real JupyterLab: cell records planted with script (HTML with
event handlers, a JavaScript form, an ES module and a style sheet in a widget's state, a record
that is not JSON), in a SQLite file beside the notebook and in a PostgreSQL schema, then
Restart Kernel and Run All. Nothing of them runs; the tree is drawn by its own view from its
data; each record refused says so in one line and its cell acts anew."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hostile_records import code_in_widget_state, html_in_displays, not_json, plant, prints, shows_widget

from .actions import cell_text, open_new_notebook, restart_and_run_all, run_all

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SKIPPED = "skipped this cell's stored record"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_planted_records_never_run_in_the_page(
    lab: Any, page: Any, artifacts: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    name = "stored.ipynb"
    if kind == "postgres":
        target = request.getfixturevalue("postgres_url")
        setup = f'%load_ext slotmagic\n%config SlotMagic.db_path = "{target}"'
    else:
        target = str(lab.root / ".slotmagic" / "state.sqlite3")
        setup = "%load_ext slotmagic"
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: errors.append(f"dialog: {dialog.message}"))
    open_new_notebook(
        page,
        lab,
        name,
        setup,
        "%%turn\nWhat is a deposit?",
        "%slot tree",
        "%slot budget",
        "%slot list",
        "%slot derive side",
    )
    run_all(page)
    planted = plant(
        target,
        name,
        [
            (shows_widget("SlotTreeWidget"), html_in_displays),
            (shows_widget("SlotBudgetWidget"), code_in_widget_state),
            (prints("messages  tokens"), not_json),
        ],
    )
    assert planted == 3

    restart_and_run_all(page)
    page.wait_for_timeout(1000)  # an image's onerror fires after it fails to load
    page.screenshot(path=str(artifacts / f"planted-{kind}.png"), full_page=True)
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(".jp-Notebook [onerror]").count() == 0
    assert page.locator(".jp-Notebook").is_visible()  # the planted style sheet hid nothing
    # the tree: drawn by its own view from the record's data, as of its cell (before "side")
    tree = page.locator(".jp-Notebook .jp-Cell").nth(2)
    assert tree.locator(".sm-tree .sm-tree-row").count() == 1
    assert "as of cell [3]" in tree.inner_text()
    # the budget (code in its state) and the list (not JSON): a line each, then the cell anew
    budget, listed = cell_text(page, 3), cell_text(page, 4)
    assert SKIPPED in budget and page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".sm-budget").count() == 1
    assert SKIPPED in listed and "side" in listed
    assert "esm" not in page.locator(".jp-Notebook").inner_text().split()
    assert errors == []
