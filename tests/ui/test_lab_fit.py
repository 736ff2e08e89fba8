"""In a real JupyterLab, at 1,000 and 1,400 px, with the Slots sidebar open and closed: the
tree's menus open inside the window, the workflow graph stays within its output (scrolling
with a scrollbar shown) with its edge labels clear of every node, the budget's scale labels
never overlap, each widget's static form is hidden behind its live view, and buttons and menus
carry JupyterLab's own classes. Screenshots in tests/ui/artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .actions import WIDGET_OUTPUTS, open_new_notebook, run_cell, wait_widgets

pytestmark = [pytest.mark.slow, pytest.mark.browser]

TREE = ".sm-tree"
ROW = f"{TREE} .sm-tree-row"

GRAPH = {
    "name": "claim",
    "current": "letter",
    "nodes": [
        {"id": "intake", "status": "done", "slot": "default"},
        {"id": "evidence", "status": "done", "slot": "default"},
        {"id": "letter", "status": "in_progress", "slot": "letter"},
        {"id": "gather-more", "status": "pending", "slot": None},
        {"id": "court filing", "status": "pending", "slot": None},
        {"id": "hearing", "status": "pending", "slot": None},
        {"id": "settlement", "status": "blocked", "slot": None},
    ],
    "edges": [
        {"from": "intake", "to": "evidence", "label": None},
        {"from": "evidence", "to": "letter", "label": "if the facts are clear"},
        {"from": "evidence", "to": "gather-more", "label": "if something is missing"},
        {"from": "gather-more", "to": "evidence", "label": "found it"},
        {"from": "letter", "to": "court filing", "label": "no answer in 14 days"},
        {"from": "court filing", "to": "hearing", "label": None},
        {"from": "letter", "to": "settlement", "label": "they offer to pay"},
        {"from": "hearing", "to": "settlement", "label": None},
    ],
}

CELLS = (
    "%load_ext slotmagic",
    "%%turn\nMy landlord kept my $1,200 deposit. What are my options?",
    "%slot derive letter --no-switch\n%slot derive court\n"
    "%slot derive appeal-with-a-long-name --from court --no-switch",
    "%slot create lease-review --budget 800 --no-switch",
    "%slot tree",
    "%slot budget lease-review",
    "%slot budget",
    f"from slotmagic.widgets import live_widgets, workflow_widget\nworkflow_widget(live_widgets().session, {GRAPH!r})",
)


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, "not shown"
    return dict(found)


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def inside_window(page: Any, found: dict[str, float]) -> bool:
    size = page.viewport_size
    return (
        found["x"] >= 0
        and found["y"] >= 0
        and found["x"] + found["width"] <= size["width"]
        and found["y"] + found["height"] <= size["height"]
    )


def set_sidebar(page: Any, open_: bool) -> None:
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slotmagic-slots']")
    panel = page.locator("#slotmagic-slots")
    if panel.is_visible() != open_:
        tab.click()
    page.wait_for_timeout(400)  # the notebook lays itself out again


def check_menus(page: Any, name: str, artifacts: Path) -> None:
    """The ⋯ menu of the last row and a right-click at the right and bottom edges of the tree."""
    last = page.locator(ROW).last
    last.scroll_into_view_if_needed()
    last.hover()
    last.locator(".sm-more").click()
    menu = page.locator(".sm-menu:not([hidden])")
    menu.wait_for()
    found = box(menu)
    assert inside_window(page, found), (name, found, page.viewport_size)
    labels = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert labels == ["Switch to", "Derive…", "Rename…", "Delete…"]
    for item in menu.locator(".sm-menu-item").all():  # every item whole, none cut
        assert inside_window(page, box(item))
    page.screenshot(path=str(artifacts / f"{name}-menu.png"))
    page.keyboard.press("Escape")
    menu.wait_for(state="hidden")
    # right-click where a menu opening right and down of the pointer would leave the window
    row = box(last)
    x = min(row["x"] + row["width"] - 3, page.viewport_size["width"] - 4)
    y = min(row["y"] + row["height"] / 2, page.viewport_size["height"] - 4)
    page.mouse.click(x, y, button="right")
    menu.wait_for()
    found = box(menu)
    assert inside_window(page, found), (name, found)
    page.screenshot(path=str(artifacts / f"{name}-context-menu.png"))
    page.keyboard.press("Escape")


def check_workflow(page: Any, name: str, artifacts: Path) -> None:
    workflow = page.locator(".sm-workflow")
    workflow.scroll_into_view_if_needed()
    output = box(workflow.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea-output')][1]"))
    canvas = box(workflow.locator(".sm-canvas"))
    assert canvas["x"] >= output["x"] - 0.5 and canvas["x"] + canvas["width"] <= output["x"] + output["width"] + 0.5
    sizes = workflow.locator(".sm-canvas").evaluate("c => ({scroll: c.scrollWidth, client: c.clientWidth})")
    bar = workflow.locator(".sm-hscroll")
    if sizes["scroll"] > sizes["client"] + 1:
        # a scrollbar is shown (headless Chromium draws none of its own), and it reaches the end
        track = box(bar)
        assert track["height"] > 0 and track["width"] >= canvas["width"] - 1, name
        thumb = box(bar.locator(".sm-hscroll-thumb"))
        page.mouse.move(thumb["x"] + thumb["width"] / 2, thumb["y"] + thumb["height"] / 2)
        page.mouse.down()
        page.mouse.move(track["x"] + track["width"] + 50, thumb["y"] + thumb["height"] / 2, steps=5)
        page.mouse.up()
        last = box(workflow.locator(".sm-node[data-node-id='settlement']"))
        assert last["x"] + last["width"] <= canvas["x"] + canvas["width"] + 1, (name, last, canvas)
    else:
        assert not bar.is_visible()
    nodes = [box(n) for n in workflow.locator(".sm-node").all()]
    labels = workflow.locator(".sm-edge-label").all()
    assert len(labels) == 5
    for label in labels:
        found = box(label)
        for node in nodes:
            assert not overlap(found, node), (name, label.text_content(), found, node)
    workflow.screenshot(path=str(artifacts / f"{name}-workflow.png"))


def check_budget(page: Any, name: str, artifacts: Path) -> None:
    for budget in page.locator(".sm-budget").all():
        budget.scroll_into_view_if_needed()
        zero, label, end = (box(budget.locator(f".sm-scale .{c}")) for c in ("sm-zero", "sm-threshold-label", "sm-end"))
        assert not overlap(zero, label) and not overlap(label, end) and not overlap(zero, end), name
        widget = box(budget)
        assert label["x"] >= widget["x"] and label["x"] + label["width"] <= widget["x"] + widget["width"]
    budget = page.locator(".sm-budget").first  # lease-review's own 800 tokens, not the window
    assert "of 800 tokens (the slot's own budget; window 8,192)" in budget.locator(".sm-head").inner_text()
    assert budget.locator(".sm-end").inner_text() == "800"
    budget.screenshot(path=str(artifacts / f"{name}-budget.png"))


def test_widgets_fit_their_outputs_and_the_window(lab: Any, page: Any, artifacts: Path) -> None:
    open_new_notebook(page, lab, "fit.ipynb", *CELLS)
    for i in range(len(CELLS)):
        run_cell(page, i)
    wait_widgets(page)
    page.screenshot(path=str(artifacts / "0-run.png"))
    assert page.locator(WIDGET_OUTPUTS).count() == 4

    # Each widget's static form is in the page, behind its live view: none shows.
    statics = page.locator(".slotmagic-static")
    assert statics.count() == 4
    for static in statics.all():
        assert not static.is_visible()
    # JupyterLab's own classes on buttons and the tree's marker said in words.
    assert page.locator(f"{TREE} .sm-head button.jp-Button.jp-mod-minimal").all_inner_texts() == [
        "Expand all",
        "Collapse all",
    ]
    fork = page.locator(f"{ROW}[data-slot-id='letter'] .sm-fork")
    assert fork.inner_text() == "forked at 2"
    assert fork.get_attribute("aria-label") == "forked from default after 2 messages"

    for width in (1000, 1400):
        page.set_viewport_size({"width": width, "height": 800})
        for sidebar in (False, True):
            set_sidebar(page, sidebar)
            name = f"{width}-{'sidebar' if sidebar else 'no-sidebar'}"
            check_menus(page, name, artifacts)
            check_workflow(page, name, artifacts)
            check_budget(page, name, artifacts)

    # The tree's "switched to" line goes once the sidebar makes another slot current.
    set_sidebar(page, True)
    court = "#slotmagic-slots .jp-SlotsPanel-row[data-slot-id='court']"
    page.eval_on_selector(court, "row => { row.keptAcrossStates = true; }")
    page.locator(f"{ROW}[data-slot-id='letter']").click()
    message = page.locator(f"{TREE} .sm-message")
    message.filter(has_text="switched to slot letter").wait_for()
    page.locator("#slotmagic-slots .jp-SlotsPanel-row.jp-mod-current[data-slot-id='letter']").wait_for()
    # The sidebar's rows outlive a new state (a state arriving mid-click loses no click).
    assert page.eval_on_selector(court, "row => row.keptAcrossStates === true")
    page.locator(court).click()
    page.locator(f"{ROW}.sm-current[data-slot-id='court']").wait_for()
    page.wait_for_function("() => !document.querySelector('.sm-tree .sm-message').textContent.includes('letter')")

    # A state that arrives while a tree row is held down waits for the release, so the row is
    # still there to take the click: here the sidebar switches to default in the meantime.
    held = page.locator(f"{ROW}[data-slot-id='letter']")
    held.evaluate("row => { row.keptAcrossStates = true; }")
    found = box(held)
    page.mouse.move(found["x"] + found["width"] / 2, found["y"] + found["height"] / 2)
    page.mouse.down()
    page.eval_on_selector("#slotmagic-slots .jp-SlotsPanel-row[data-slot-id='default']", "row => row.click()")
    page.locator(f"{TREE} .sm-head", has_text="current default").wait_for()
    assert held.evaluate("row => row.keptAcrossStates === true")
    page.mouse.up()
    page.locator(f"{ROW}.sm-current[data-slot-id='letter']").wait_for()

    # The menu's items act: derive asks for a name, with JupyterLab's dialog buttons.
    page.locator(f"{ROW}[data-slot-id='court']").click(button="right")
    page.locator(".sm-menu .sm-menu-item[data-label='Derive…']").click()
    assert page.locator(f"{TREE} .sm-message button.jp-mod-styled.jp-mod-accept").inner_text() == "Derive"
    assert page.locator(f"{TREE} .sm-message button.jp-mod-styled.jp-mod-reject").inner_text() == "Cancel"
