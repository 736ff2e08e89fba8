"""In a real JupyterLab: a tree of 5,000 slots renders, draws only the rows in sight while the
list scrolls, folds and unfolds, and once following shows a turn's new counts (sent as a
change, not as the whole tree again)."""

from __future__ import annotations

from typing import Any

import pytest

from .actions import run_cell, wait_idle, wait_widgets, write_notebook
from .test_lab_widgets import ROW, TREE, rows

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CELLS = (
    "%load_ext slotmagic",
    # 50 branches off the root and the rest 100 below each of those: 5,000 slots
    "from slotmagic.widgets import live_widgets\n"
    "session = live_widgets().session()\n"
    "for i in range(4_999):\n"
    "    session.derive_slot(f's{i}', parent='default' if i < 50 else f's{(i - 50) // 100}')\n"
    "session.switch_slot('default')",
    "%slot tree",
    "%%turn --slot s7\nA question of s7.",
)
ROWS = f"{TREE} .sm-tree-rows"
WAIT = 60_000  # ms: a shared, busy machine draws 5,000 slots slowly


def test_a_tree_of_5000_slots_draws_what_is_in_sight(lab: Any, page: Any) -> None:
    write_notebook(lab.root / "big.ipynb", *CELLS)
    page.goto(lab.tree_url("big.ipynb"))
    wait_idle(page)  # the kernel has started: a cell run before it would wait unseen
    for i in range(3):
        run_cell(page, i)
    wait_widgets(page)
    page.locator(ROW).nth(50).wait_for(timeout=WAIT)
    assert "5000 slots" in page.locator(f"{TREE} .sm-head").inner_text()
    # folded as it starts: the root and its 50 branches, each holding its 100
    shown = rows(page)
    assert shown[0] == "default" and len(shown) == 51 and set(shown[1:]) == {f"s{i}" for i in range(50)}

    page.locator(f"{TREE} button:has-text('Expand all')").click()
    page.wait_for_function(f"() => document.querySelector('{ROWS}').scrollHeight > 4_999 * 26", timeout=WAIT)
    assert 40 <= len(rows(page)) <= 200  # the rows in sight and a margin, not 5,000
    assert rows(page)[0] == "default"

    page.locator(ROWS).evaluate("el => { el.scrollTop = el.scrollHeight; }")
    page.wait_for_function(
        f"() => [...document.querySelectorAll('{ROW}')].some(r => r.dataset.slotId === 's999')", timeout=WAIT
    )
    assert rows(page)[-1] == "s999"  # the last slot in tree order (s9's last branch by name)
    assert "default" not in rows(page) and len(rows(page)) <= 200

    page.locator(f"{TREE} button:has-text('Collapse all')").click()
    page.wait_for_function(f"() => document.querySelectorAll('{ROW}').length === 1", timeout=WAIT)
    page.locator(f"{ROW}[data-slot-id='default'] .sm-toggle").click()
    page.wait_for_function(f"() => document.querySelectorAll('{ROW}').length === 51", timeout=WAIT)

    run_cell(page, 3)  # a turn on s7: the tree, as of its cell, says so; followed, only s7 changes
    page.locator(".jp-OutputArea-output:has(.sm-tree)").get_by_role("button", name="follow live").click()
    page.wait_for_function(
        "() => document.querySelector(\".sm-tree-row[data-slot-id='s7'] .sm-counts\")?.textContent.startsWith('2 msg')",
        timeout=WAIT,
    )
