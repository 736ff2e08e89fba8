"""A click acts where it says, in a real JupyterLab (issue 41, point 4): tutorial 02, Run All
twice, a new ``%slot`` cell run; in the tree "follow live", then a slot clicked; the ``%slot``
cell run again shows that slot current (a read never restores one); a click in the Slots panel
does the same; a new ``%%turn`` lands on the slot clicked last. A click on a view of an earlier
moment says so in place."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

from .actions import VISIBLE_NOTEBOOK, run_all, run_cell, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NAME = "02-branching.ipynb"
PANEL = "#slotmagic-slots"


def add_cell(page: Any, source: str) -> tuple[int, str]:
    """A new code cell at the end with ``source``, run; returns its index among the cells and
    its output's text."""
    page.locator(f"{VISIBLE_NOTEBOOK} .jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")
    index = page.locator(f"{VISIBLE_NOTEBOOK} .jp-Cell").count() - 1
    return index, run_cell(page, index)


def test_clicks_in_the_tree_and_the_panel_hold_for_reads_and_the_next_turn(
    lab: Any, page: Any, artifacts: Path
) -> None:
    shutil.copy(ROOT / "notebooks" / NAME, lab.root / NAME)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(lab.tree_url(NAME))
    wait_idle(page)
    run_all(page)
    run_all(page)  # the second Run All, in the same kernel
    reading, shown = add_cell(page, "%slot")
    assert shown.startswith("current slot: default")

    tree_output = page.locator(f"{VISIBLE_NOTEBOOK} .jp-OutputArea-output:has(.sm-tree)").first
    tree_output.scroll_into_view_if_needed()
    # the tree is as of its cell (court current, three slots; court deleted since): a click
    # there says so in place and does nothing
    tree_output.locator(".sm-tree-row[data-slot-id='letter']").click()
    tree_output.locator(".sm-message.sm-error", has_text="Not done: this view is as of cell [").wait_for()
    tree_output.screenshot(path=str(artifacts / "1-refused.png"))
    assert run_cell(page, reading).startswith("current slot: default")

    tree_output.get_by_role("button", name="follow live").click()
    tree_output.locator(".sm-tree-row[data-slot-id='court']").wait_for(state="detached")
    tree_output.locator(".sm-tree-row[data-slot-id='letter']").click()
    tree_output.get_by_text("switched to slot letter").wait_for()
    tree_output.screenshot(path=str(artifacts / "2-switched.png"))
    assert run_cell(page, reading).startswith("current slot: letter")  # the session now, nothing restored

    page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slotmagic-slots']").click()
    page.locator(f"{PANEL} .jp-SlotsPanel-row[data-slot-id='default']").click()
    page.wait_for_function(
        f'() => document.querySelector("{PANEL} .jp-SlotsPanel-row.jp-mod-current")?.dataset.slotId === "default"'
    )
    assert run_cell(page, reading).startswith("current slot: default")
    page.locator(f"{PANEL} .jp-SlotsPanel-row[data-slot-id='letter']").click()
    page.wait_for_function(
        f'() => document.querySelector("{PANEL} .jp-SlotsPanel-row.jp-mod-current")?.dataset.slotId === "letter"'
    )
    assert run_cell(page, reading).startswith("current slot: letter")

    _, replied = add_cell(page, "%%turn\nOne more question.")
    assert "slot letter · turn" in replied
    page.screenshot(path=str(artifacts / "3-turn.png"))
    assert errors == []
