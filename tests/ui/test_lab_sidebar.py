"""In a real JupyterLab: the "Slots" sidebar follows the notebook in focus, shows its slot tree
live from the kernel, switches slots on a click, and acts from its context menu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotmagic._snapshot import last_user_text

from .actions import open_new_notebook, run_cell, wait_idle, write_notebook

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PANEL = "#slotmagic-slots"
ROWS = f"{PANEL} .jp-SlotsPanel-row"
HINT = f"{PANEL} .jp-SlotsPanel-hint"
# A user message with markup in it: the panel must show it as text.
MARKUP = 'Is <b>bold</b> & <img src=x onerror="this.remove()"> shown as text?'


# Stands in for later work: the state the kernel sends gains a budget and a workflow.
BUDGET_CELL = """import slotmagic._magics.sidebar as sidebar
_snapshot = sidebar.session_snapshot
def _with_budget(session, cache=None):
    state = _snapshot(session, cache)
    parts = {"system": (200, 8000), "history": (3000, 80000), "tool_results": (19000, 20000)}
    used = {k: {"used": u, "limit": l} for k, (u, l) in parts.items()}
    state["budget"] = {"window": 128000, "used": 3200, "parts": used}
    state["workflow"] = {"name": "letter", "current": "draft", "completed": 1, "total": 3, "next": ["review", "send"]}
    return state
sidebar.session_snapshot = _with_budget"""


def open_notebook(page: Any, lab: Any, name: str) -> None:
    """Open a notebook from the file browser and wait for its kernel."""
    page.locator(".jp-SideBar .lm-TabBar-tab[data-id='filebrowser']").click()
    page.locator(f".jp-DirListing-item[title^='Name: {name}']").dblclick()
    page.locator(f".lm-DockPanel-tabBar .lm-TabBar-tab:has-text('{name}')").wait_for()
    wait_idle(page)


def show_panel(page: Any) -> Any:
    page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slotmagic-slots']").click()
    panel = page.locator(PANEL)
    panel.wait_for()
    return panel


def row(page: Any, slot: str) -> Any:
    return page.locator(f"{ROWS}[data-slot-id='{slot}']")


def wait_counts(page: Any, slot: str, start: str) -> None:
    """Wait until the slot's row shows counts starting with ``start``, e.g. "2 msg"."""
    page.wait_for_function(
        "([id, start]) => document.querySelector(`#slotmagic-slots [data-slot-id='${id}'] .jp-SlotsPanel-counts`)"
        "?.textContent.startsWith(start)",
        arg=[slot, start],
        timeout=15_000,
    )


def assert_legible(page: Any) -> None:
    """The panel's texts stand out from their backgrounds (WCAG AA: 4.5, AAA: 7)."""
    for text, background, least in (
        (f"{ROWS} .jp-SlotsPanel-id", PANEL, 7),
        (f"{ROWS} .jp-SlotsPanel-counts", PANEL, 4.5),
        (f"{ROWS} .jp-SlotsPanel-lastUser", PANEL, 4.5),
        (f"{PANEL} .jp-SlotsPanel-errorText", f"{PANEL} .jp-SlotsPanel-error", 4.5),
    ):
        ratio = page.evaluate(CONTRAST, [text, background])
        assert ratio >= least, (text, ratio)


def rows(page: Any) -> list[str]:
    return [str(x) for x in page.locator(ROWS).evaluate_all("rows => rows.map(r => r.dataset.slotId)")]


def test_panel_follows_the_notebook_and_updates_live(
    lab: Any, page: Any, built_extension: Path, artifacts: Path
) -> None:
    write_notebook(lab.root / "plain.ipynb", "1 + 1")
    open_new_notebook(
        page,
        lab,
        "story.ipynb",
        "%load_ext slotmagic",
        "%slot derive court\n%slot derive short --from default --focused --recent 2\n%slot switch court",
        f"%%turn\n{MARKUP}",
        "%slot",
        BUDGET_CELL,
    )
    show_panel(page)
    page.locator(HINT).get_by_text("slotmagic is not loaded").wait_for()
    assert page.locator(HINT).get_by_text("%load_ext slotmagic").is_visible()
    page.screenshot(path=str(artifacts / "1-not-loaded.png"))

    run_cell(page, 0)  # the kernel tells the open panel by itself
    row(page, "default").wait_for()
    assert page.locator(f"{PANEL} .jp-SlotsPanel-session").inner_text().startswith("story.ipynb")
    run_cell(page, 1)
    row(page, "short").wait_for()
    assert rows(page) == ["default", "court", "short"]
    levels = page.locator(ROWS).evaluate_all("rows => rows.map(r => r.getAttribute('aria-level'))")
    assert levels == ["1", "2", "2"]
    assert "jp-mod-current" in (row(page, "court").get_attribute("class") or "")
    assert row(page, "short").locator(".jp-SlotsPanel-badge").inner_text() == "focused"
    assert row(page, "court").locator(".jp-SlotsPanel-counts").inner_text() == "0 msg · 0 tok"

    run_cell(page, 2)  # a turn on court: its counts change with no click
    wait_counts(page, "court", "2 msg")
    last = row(page, "court").locator(".jp-SlotsPanel-lastUser")
    assert last.inner_text() == last_user_text(MARKUP)
    assert "<b>bold</b> & <img" in last.inner_text()  # shown as text, not markup
    assert page.locator(f"{PANEL} img, {PANEL} b").count() == 0
    page.screenshot(path=str(artifacts / "2-tree-after-turn.png"))

    row(page, "default").click()  # switches the kernel's current slot
    page.wait_for_function(
        '() => document.querySelector("#slotmagic-slots .jp-SlotsPanel-row.jp-mod-current")'
        "?.dataset.slotId === 'default'"
    )
    assert "current slot: default" in run_cell(page, 3)

    # A kernel that sends a budget and a workflow (later work will): the panel shows them.
    run_cell(page, 4)
    budget = page.locator(f"{PANEL} .jp-SlotsPanel-budget")
    budget.wait_for()
    assert budget.locator(".jp-SlotsPanel-label").inner_text() == "Budget of default: 3.2k of 128k tokens (3%)"
    assert budget.locator(".jp-SlotsPanel-budgetName").all_inner_texts() == ["system", "history", "tool results"]
    workflow = page.locator(f"{PANEL} .jp-SlotsPanel-workflow").inner_text()
    assert workflow == "Workflow: letter: draft (1 of 3 done) · next: review, send"
    page.locator(PANEL).screenshot(path=str(artifacts / "3-budget-and-workflow.png"))

    # Another notebook in focus: the panel follows it (slotmagic is not loaded there) ...
    open_notebook(page, lab, "plain.ipynb")
    show_panel(page)
    page.locator(HINT).get_by_text("slotmagic is not loaded").wait_for()
    assert page.locator(ROWS).count() == 0
    page.screenshot(path=str(artifacts / "4-other-notebook.png"))
    # ... and back.
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab:has-text('story.ipynb')").click()
    row(page, "court").wait_for()
    assert rows(page) == ["default", "court", "short"]
    assert "jp-mod-current" in (row(page, "default").get_attribute("class") or "")


def test_context_menu_dark_theme_restart_no_kernel(lab: Any, page: Any, built_extension: Path, artifacts: Path) -> None:
    # The panel's settings, before the page loads them: no token counts (put back after the test)
    settings = lab.settings / "slotmagic"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"showTokenCounts": false}')
    open_new_notebook(
        page,
        lab,
        "menu.ipynb",
        "%load_ext slotmagic",
        "%%turn\nA first question about a deposit.",
        "%slot list",
        "%%turn\nA question only this branch has.",
    )
    show_panel(page)
    run_cell(page, 0)
    run_cell(page, 1)
    row(page, "default").wait_for()
    assert row(page, "default").locator(".jp-SlotsPanel-counts").inner_text() == "2 msg"

    # derive, from the context menu
    row(page, "default").click(button="right")
    page.locator(".lm-Menu-item:has-text('Derive Slot…')").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("branch")
    dialog.get_by_role("button", name="Derive").click()
    row(page, "branch").wait_for()
    assert "jp-mod-current" in (row(page, "branch").get_attribute("class") or "")
    assert "*  branch" in run_cell(page, 2)  # the kernel's current slot

    # rename
    row(page, "branch").click(button="right")
    page.locator(".lm-Menu-item:has-text('Rename Slot…')").click()
    dialog.locator("input").fill("plan-b")
    dialog.get_by_role("button", name="Rename").click()
    row(page, "plan-b").wait_for()
    assert rows(page) == ["default", "plan-b"]

    # a mistake is one line in the panel
    row(page, "plan-b").click(button="right")
    page.locator(".lm-Menu-item:has-text('Rename Slot…')").click()
    dialog.locator("input").fill("not valid!")
    dialog.get_by_role("button", name="Rename").click()
    error = page.locator(f"{PANEL} .jp-SlotsPanel-error")
    error.wait_for()
    assert "invalid slot id 'not valid!'" in error.inner_text()
    page.screenshot(path=str(artifacts / "1-error.png"))
    assert_legible(page)

    # the dark theme
    page.get_by_role("menuitem", name="Settings", exact=True).click()
    page.get_by_text("Theme", exact=True).hover()
    page.get_by_text("JupyterLab Dark", exact=True).click()
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts / "2-dark-with-error.png"))
    page.locator(PANEL).screenshot(path=str(artifacts / "3-dark-panel.png"))
    assert_legible(page)
    error.locator(".jp-SlotsPanel-dismiss").click()
    assert error.count() == 0

    # delete, after a confirmation, and a second one for turns no other slot has
    run_cell(page, 3)
    wait_counts(page, "plan-b", "4 msg")
    row(page, "plan-b").click(button="right")
    page.locator(".lm-Menu-item:has-text('Delete Slot…')").click()
    dialog.get_by_role("button", name="Delete", exact=True).click()
    dialog.get_by_text("holds turns no other slot has").wait_for()
    dialog.get_by_role("button", name="Delete Anyway").click()
    page.wait_for_function("() => !document.querySelector(\"[data-slot-id='plan-b']\")")
    assert rows(page) == ["default"]

    # a kernel restart: the hint, until slotmagic is loaded again
    page.get_by_role("menuitem", name="Kernel", exact=True).click()
    page.get_by_text("Restart Kernel…", exact=True).click()
    page.get_by_role("button", name="Confirm Kernel Restart").click()
    page.locator(HINT).get_by_text("slotmagic is not loaded").wait_for(timeout=30_000)
    wait_idle(page)
    run_cell(page, 0)
    row(page, "default").wait_for()
    assert rows(page) == ["default"]

    # no kernel at all
    page.get_by_role("menuitem", name="Kernel", exact=True).click()
    page.get_by_text("Shut Down Kernel", exact=True).click()
    page.locator(HINT).get_by_text("No kernel").wait_for(timeout=30_000)
    assert page.locator(ROWS).count() == 0
    page.locator(PANEL).screenshot(path=str(artifacts / "4-no-kernel.png"))


# The WCAG contrast ratio of an element's text against another element's (opaque) background,
# with a translucent background blended over the panel's.
CONTRAST = """([textSel, backSel]) => {
  const rgba = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, bottom) => top.slice(0, 3).map((v, i) => v * top[3] + bottom[i] * (1 - top[3]));
  const lum = rgb => {
    const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const panel = rgba(getComputedStyle(document.querySelector('#slotmagic-slots')).backgroundColor);
  const back = over(rgba(getComputedStyle(document.querySelector(backSel)).backgroundColor), panel);
  const text = over(rgba(getComputedStyle(document.querySelector(textSel)).color), back);
  const [hi, lo] = [lum(text), lum(back)].sort((p, q) => q - p);
  return (hi + 0.05) / (lo + 0.05);
}"""


def test_a_budget_part_over_its_share_says_what_that_means(
    lab: Any, page: Any, built_extension: Path, artifacts: Path
) -> None:
    prompt = "You help a tenant with a deposit dispute. " * 12  # far past a 600-token budget's system share
    open_new_notebook(
        page,
        lab,
        "share.ipynb",
        f'%load_ext slotmagic\n%config SlotMagic.system = "{prompt}"',
        "%slot create tight --budget 600",
        "%%turn\nWhat now?",
    )
    for i in range(3):
        run_cell(page, i)
    show_panel(page)
    over = page.locator(f"{PANEL} .jp-SlotsPanel-budgetOver")
    over.first.wait_for()
    assert over.first.inner_text() == "system over its share: it leaves history less room, so compaction starts sooner"
    row = page.locator(f"{PANEL} .jp-SlotsPanel-budgetPart.jp-mod-over")
    assert (row.first.get_attribute("title") or "").startswith("system uses ")
    assert "taken from the room for history and tool results" in (row.first.get_attribute("title") or "")
    page.locator(f"{PANEL} .jp-SlotsPanel-budget").screenshot(path=str(artifacts / "over-share.png"))
