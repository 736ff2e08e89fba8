"""In a real JupyterLab: the widgets of %slot tree, %slot budget, %slot preview and a workflow
render, show the session as of their cells and say when it has changed since, follow the
kernel without their cells running again once "follow live" is clicked, act on the kernel,
show model text as text, and stay legible in the dark theme. Screenshots of each in
tests/ui/artifacts/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .actions import (
    VISIBLE_NOTEBOOK,
    WIDGET_OUTPUTS,
    open_new_notebook,
    run_cell,
    wait_widgets,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

TREE = ".sm-tree"
ROW = f"{TREE} .sm-tree-row"
BUDGET = ".sm-budget"
PREVIEW = ".sm-preview"
WORKFLOW = ".sm-workflow"
MENU = ".sm-menu:not([hidden])"  # the open one: each tree has its own, on the page
XSS = '<img src=x onerror="window.__pwned = 1"> and <script>window.__pwned = 2</script>'

GRAPH = {
    "name": "demand letter",
    "current": "draft",
    "nodes": [
        {"id": "research", "status": "done", "slot": "default"},
        {"id": "draft", "status": "in_progress", "slot": "letter"},
        {"id": "review", "status": "pending", "slot": None},
        {"id": "legal check", "status": "blocked", "slot": "firm"},
        {"id": "send", "status": "pending", "slot": None},
    ],
    "edges": [
        {"from": "research", "to": "draft", "label": None},
        {"from": "draft", "to": "review", "label": "first version"},
        {"from": "draft", "to": "legal check", "label": None},
        {"from": "review", "to": "send", "label": "approved"},
        {"from": "legal check", "to": "send", "label": None},
        {"from": "review", "to": "draft", "label": "changes"},
    ],
}

CELLS = (
    "%load_ext slotmagic",
    "%%turn\nMy landlord kept my $1,200 deposit. What are my options?",
    "%slot derive court\n"
    "%slot derive short --from court --focused --recent 1 --no-switch\n"
    "%slot derive letter --from default --no-switch\n"
    "%slot derive firm --from letter --no-switch",
    "%slot tree",
    "%slot budget",
    "%slot preview short",
    "from slotmagic.widgets import live_widgets, workflow_widget\n"
    f"workflow_widget(live_widgets().session, {json.dumps(GRAPH).replace('null', 'None')})",
    "%slot",
    f"%%turn\nRepeat after me: {XSS}",
    "%%turn --slot appeal-2\nA question only appeal-2 asks.",
    # a hundred more slots, through the Python API, and a tree of them all
    "session = live_widgets().session()\n"
    "for i in range(10):\n"
    "    session.derive_slot(f'topic-{i}', parent='letter')\n"
    "    for j in range(9):\n"
    "        session.derive_slot(f'topic-{i}.{j}', parent=f'topic-{i}')\n"
    "session.switch_slot('topic-3.4')",
    "%slot tree",
)


def rows(page: Any) -> list[str]:
    return [str(x) for x in page.locator(ROW).evaluate_all("rows => rows.map(r => r.dataset.slotId)")]


def current_row(page: Any, slot: str) -> None:
    page.wait_for_function(
        "id => document.querySelector('.sm-tree .sm-tree-row.sm-current')?.dataset.slotId === id",
        arg=slot,
        timeout=15_000,
    )


def follow_live(page: Any, view: str) -> None:
    """Click "follow live" above the first ``view`` (shown once the session has changed since
    its cell)."""
    output = page.locator(f".jp-OutputArea-output:has({view})").first
    output.get_by_role("button", name="follow live").click()
    page.wait_for_function(
        "view => document.querySelector(view).parentElement.querySelector('.sm-as-of').hidden", arg=view
    )


def output_of(page: Any, index: int) -> Any:
    return page.locator(f"{VISIBLE_NOTEBOOK} .jp-Cell").nth(index).locator(".jp-OutputArea")


def test_widgets_render_follow_the_kernel_and_act_on_it(lab: Any, page: Any, artifacts: Path) -> None:
    open_new_notebook(page, lab, "widgets.ipynb", *CELLS)
    for i in range(7):
        run_cell(page, i)

    wait_widgets(page)
    assert page.locator(WIDGET_OUTPUTS).count() == 4  # tree, budget, preview, workflow

    # the tree: five slots, parents first, court current, drawn with its edges and fork points
    page.locator(ROW).nth(4).wait_for()
    assert rows(page) == ["default", "court", "short", "letter", "firm"]
    current_row(page, "court")
    levels = page.locator(ROW).evaluate_all("rows => rows.map(r => r.getAttribute('aria-level'))")
    assert levels == ["1", "2", "3", "2", "3"]
    short = page.locator(f"{ROW}[data-slot-id='short']")
    assert short.locator(".sm-mode").inner_text() == "focused"
    assert short.locator(".sm-fork").inner_text() == "forked at 2"
    assert short.locator(".sm-fork").get_attribute("title") == "forked from court after 2 messages"
    assert page.locator(f"{ROW}[data-slot-id='default'] .sm-counts").inner_text().startswith("2 msg · ")
    page.locator(TREE).screenshot(path=str(artifacts / "1-tree.png"))

    # the budget bar: five regions in the window, the threshold marked, numbers on hover
    budget = page.locator(BUDGET)
    assert budget.locator(".sm-region").count() == 5 and budget.locator(".sm-threshold").count() == 1
    history = budget.locator(".sm-region[data-category='history']")
    history.hover()
    tip = budget.locator(".sm-tip")
    tip.wait_for()
    assert tip.inner_text().startswith("history: ~") and "of 5,120 tokens" in tip.inner_text()
    budget.screenshot(path=str(artifacts / "2-budget.png"))
    used_before = budget.locator(".sm-legend-item[data-category='history'] .sm-legend-value").inner_text()

    # the preview: what the focused filter leaves out greyed where it was, bodies collapsed
    preview = page.locator(PREVIEW)
    assert preview.locator(".sm-gap").first.inner_text().startswith("… 1 stored message left out by the focused")
    assert preview.locator(".sm-body").count() == 0
    preview.locator(".sm-entry-head").last.click()
    assert "received" in preview.locator(".sm-body").inner_text()
    preview.screenshot(path=str(artifacts / "3-preview.png"))

    # the workflow: laid out left to right, coloured by status, the current node marked
    workflow = page.locator(WORKFLOW)
    workflow.locator(".sm-node").nth(4).wait_for()
    # measured in the page in one go: a node drawn again between calls has no bounding_box()
    boxes = workflow.locator(".sm-node").evaluate_all(
        "nodes => Object.fromEntries(nodes.map(n => [n.dataset.nodeId, n.getBoundingClientRect().toJSON()]))"
    )
    assert boxes["research"]["x"] < boxes["draft"]["x"] < boxes["review"]["x"] < boxes["send"]["x"]
    assert "sm-current" in (workflow.locator(".sm-node[data-node-id='draft']").get_attribute("class") or "")
    assert workflow.locator(".sm-edge").count() == 6 and workflow.locator(".sm-edge.sm-back").count() == 1
    assert workflow.locator(".sm-edge-label").all_text_contents() == ["first version", "approved", "changes"]
    workflow.screenshot(path=str(artifacts / "4-workflow.png"))

    # a click on a workflow node with a slot switches the kernel's slot; the tree, as of its
    # cell, says the session has changed since, and follows it when asked
    workflow.locator(".sm-node[data-node-id='draft']").click()
    page.locator(f".jp-OutputArea-output:has({TREE}) .sm-as-of:not([hidden])").wait_for()
    assert "the session has changed since" in page.locator(f".jp-OutputArea-output:has({TREE}) .sm-as-of").inner_text()
    assert current_row(page, "court") is None
    follow_live(page, TREE)
    current_row(page, "letter")
    # a click on a tree node switches the kernel's slot; the next %slot line prints it
    page.locator(f"{ROW}[data-slot-id='default']").click()
    current_row(page, "default")
    page.wait_for_function(
        "() => document.querySelector(\".sm-workflow .sm-node[data-node-id='research'] .sm-slot-current\")"
    )
    assert "current slot: default" in run_cell(page, 7)

    # a turn in another cell: the tree and the budget bar (following too) follow without running again
    follow_live(page, BUDGET)
    used_before = budget.locator(".sm-legend-item[data-category='history'] .sm-legend-value").inner_text()
    run_cell(page, 8)
    page.wait_for_function(
        "() => document.querySelector(\".sm-tree [data-slot-id='default'] .sm-counts\")"
        "?.textContent.startsWith('4 msg')"
    )
    page.wait_for_function(
        "before => document.querySelector(\".sm-budget .sm-legend-item[data-category='history'] "
        '.sm-legend-value").textContent !== before',
        arg=used_before,
    )
    assert "Repeat after me: <img src=x" in page.locator(f"{ROW}[data-slot-id='default'] .sm-last").inner_text()
    # the reply holds the markup: it ran nothing, and no element was made from it
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(".sm-widget img, .sm-widget script").count() == 0
    page.screenshot(path=str(artifacts / "5-after-turn.png"), full_page=True)

    # the tree's menu: derive (asks a name), rename, delete (confirmed; again for lost turns)
    page.locator(f"{ROW}[data-slot-id='court']").click(button="right")
    page.locator(f"{MENU} .sm-menu-item:has-text('Derive…')").click()
    page.locator(f"{TREE} .sm-message input").fill("appeal")
    page.locator(f"{TREE} .sm-message .sm-button:has-text('Derive')").click()
    current_row(page, "appeal")
    assert rows(page) == ["default", "court", "appeal", "short", "letter", "firm"]  # siblings by fork, then id
    page.locator(f"{ROW}[data-slot-id='appeal']").hover()  # shows its ⋯ button
    page.locator(f"{ROW}[data-slot-id='appeal'] .sm-more").click()
    page.locator(f"{MENU} .sm-menu-item:has-text('Rename…')").click()
    page.locator(f"{TREE} .sm-message input").fill("appeal-2")
    page.keyboard.press("Enter")
    page.locator(f"{ROW}[data-slot-id='appeal-2']").wait_for()
    run_cell(page, 9)  # a turn that only appeal-2 holds
    page.wait_for_function(
        "() => document.querySelector(\".sm-tree [data-slot-id='appeal-2'] .sm-counts\")"
        "?.textContent.startsWith('4 msg')"
    )
    page.locator(f"{ROW}[data-slot-id='appeal-2']").click(button="right")
    page.locator(f"{MENU} .sm-menu-item:has-text('Delete…')").click()
    assert "Delete slot appeal-2?" in page.locator(f"{TREE} .sm-message").inner_text()
    page.locator(f"{TREE} .sm-message .sm-danger").click()
    page.locator(f"{TREE} .sm-message .sm-danger:has-text('Delete anyway')").wait_for()
    assert page.locator(f"{TREE} .sm-message .sm-text").inner_text() == (
        "Slot appeal-2 holds 1 turn that no other slot has. Delete it and those turns anyway?"
    )
    page.locator(TREE).screenshot(path=str(artifacts / "6-tree-confirm.png"))
    page.locator(f"{TREE} .sm-message .sm-danger").click()
    page.wait_for_function("() => !document.querySelector(\".sm-tree [data-slot-id='appeal-2']\")")
    assert rows(page) == ["default", "court", "short", "letter", "firm"]

    # the dark theme
    page.get_by_role("menuitem", name="Settings", exact=True).click()
    page.get_by_text("Theme", exact=True).hover()
    page.get_by_text("JupyterLab Dark", exact=True).click()
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    page.wait_for_timeout(500)
    for name, selector in (("tree", TREE), ("budget", BUDGET), ("preview", PREVIEW), ("workflow", WORKFLOW)):
        page.locator(selector).scroll_into_view_if_needed()
        page.locator(selector).screenshot(path=str(artifacts / f"7-dark-{name}.png"))
    for text, least in (
        (f"{ROW} .sm-id", 7),
        (f"{ROW} .sm-counts", 4.5),
        (f"{ROW} .sm-last", 4.5),
        (f"{ROW}.sm-current .sm-id", 7),
        (f"{BUDGET} .sm-legend-value", 7),
        (f"{BUDGET} .sm-legend-name", 4.5),
        (f"{PREVIEW} .sm-role", 7),
        (f"{PREVIEW} .sm-gap", 4.5),
        (f"{WORKFLOW} .sm-node-id", 7),
        (f"{WORKFLOW} .sm-status", 4.5),
        (f"{WORKFLOW} .sm-node[data-status='blocked'] .sm-node-id", 7),
    ):
        ratio = page.evaluate(CONTRAST, text)
        assert ratio >= least, (text, ratio)

    # 105 slots: the first tree follows (and scrolls); a new one starts folded off the current path
    run_cell(page, 10)
    page.locator(f"{ROW}[data-slot-id='topic-9.8']").first.wait_for()
    run_cell(page, 11)
    big = page.locator(TREE).nth(1)
    big.locator(".sm-tree-row").first.wait_for()
    shown = big.locator(".sm-tree-row").evaluate_all("rows => rows.map(r => r.dataset.slotId)")
    assert "topic-3.4" in shown and "topic-2.0" not in shown and len(shown) < 40
    assert big.locator(".sm-tree-row[data-slot-id='topic-2'] .sm-hidden-count").inner_text() == "+9 below"
    assert big.locator(".sm-tree-row.sm-current").get_attribute("data-slot-id") == "topic-3.4"
    big.scroll_into_view_if_needed()
    big.screenshot(path=str(artifacts / "8-dark-big-tree.png"))
    big.locator(".sm-tree-row[data-slot-id='topic-2'] .sm-toggle").click()  # unfold one subtree
    big.locator(".sm-tree-row[data-slot-id='topic-2.0']").wait_for()
    rows_box = big.locator(".sm-tree-rows").bounding_box()
    assert rows_box is not None and rows_box["height"] <= 421  # it scrolls instead of growing


# The WCAG contrast ratio of an element's text against what is behind it: its own and its
# ancestors' backgrounds blended from the page's up.
CONTRAST = """(selector) => {
  const rgba = c => {
    const v = (c.match(/[\\d.]+/g) || [0, 0, 0, 0]).map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  };
  const over = (top, bottom) => top.slice(0, 3).map((v, i) => v * top[3] + bottom[i] * (1 - top[3]));
  const lum = rgb => {
    const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const node = document.querySelector(selector);
  const chain = [];
  for (let n = node; n; n = n.parentElement) chain.push(n);
  let back = [255, 255, 255];
  for (const n of chain.reverse()) back = over(rgba(getComputedStyle(n).backgroundColor), back);
  const text = over(rgba(getComputedStyle(node).color), back);
  const [hi, lo] = [lum(text), lum(back)].sort((p, q) => q - p);
  return (hi + 0.05) / (lo + 0.05);
}"""
