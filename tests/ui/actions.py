"""What a user does in JupyterLab, as the UI tests do it (menus, keys, waiting for the kernel)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import nbformat
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

VISIBLE_NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELL_TIMEOUT = 300  # s: a busy shared machine runs a heavy cell slowly


def wait_idle(page: Any) -> None:
    page.wait_for_timeout(300)  # let a just-sent execution mark the kernel busy first
    page.locator(".jp-StatusBar-TextItem:has-text('Idle')").first.wait_for()


def menu(page: Any, top: str, item: str) -> None:
    page.get_by_role("menuitem", name=top, exact=True).click()
    page.get_by_text(item, exact=True).click()


def run_all(page: Any) -> None:
    page.locator(".jp-Notebook").click()
    page.keyboard.press("Escape")
    menu(page, "Run", "Run All Cells")
    wait_all_run(page)


def restart_and_run_all(page: Any) -> None:
    # Outputs and prompts of the run before are cleared first: nothing of it can pass for the
    # new run, however long the restart takes. A new kernel counts from 1, so Run All has
    # ended when the prompts read [1], [2], … in order.
    menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .every(p => !/\\d/.test(p.textContent))"""
    )
    menu(page, "Kernel", "Restart Kernel and Run All Cells…")
    page.get_by_role("button", name="Confirm Kernel Restart").click()
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .every((p, i) => (p.textContent.match(/\\[(\\d+)\\]/) || [])[1] === String(i + 1))"""
    )
    wait_idle(page)
    wait_widgets(page)


def cell_text(page: Any, index: int) -> str:
    return str(page.locator(".jp-Notebook .jp-Cell").nth(index).inner_text())


def outputs_as_of_their_cells(page: Any) -> list[str]:
    """Each code cell's output text; a widget's by its static form, which is the widget as of
    its cell as its view is (tests/ui/test_lab_run_all.py compares the views themselves)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-OutputArea')].map(area => {
                   const statics = [...area.querySelectorAll('.slotmagic-static')];
                   if (!area.querySelector('.sm-widget')) return area.textContent;
                   return statics.map(s => s.textContent).join('\\n');
               })"""
        )
    )


def widget_views(page: Any) -> list[dict[str, Any]]:
    """Every slotmagic widget view of the notebook in view: its cell's source, the cell's
    execution count, the "as of" line above the view (empty when hidden) and the view's text."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].flatMap(cell => {
                   const prompt = (cell.querySelector('.jp-InputPrompt').textContent.match(/\\[(\\d+)\\]/) || [])[1];
                   const source = cell.querySelector('.jp-InputArea-editor').textContent;
                   return [...cell.querySelectorAll('.sm-widget')].map(view => {
                       const bar = view.parentElement.querySelector(':scope > .sm-as-of');
                       return {source, count: prompt ? Number(prompt) : null, kind: view.className,
                               mark: bar && !bar.hidden ? bar.textContent.trim() : '', text: view.textContent,
                               nodes: view.querySelectorAll('.sm-node').length,
                               follow: !!bar && [...bar.querySelectorAll('button')].some(b => b.offsetParent !== null),
                               fits: [...view.querySelectorAll('.sm-canvas')]
                                   .every(c => c.scrollWidth <= c.clientWidth + 1),
                               labels: [...view.querySelectorAll('.sm-edge-label')].map(l => l.textContent)};
                   });
               })"""
        )
    )


def shoot_views(page: Any, folder: Path, prefix: str) -> None:
    """A screenshot of each widget output (its "as of" line and view), to look at."""
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output:has(.sm-widget)")
    for i in range(outputs.count()):
        output = outputs.nth(i)
        output.scroll_into_view_if_needed()
        output.screenshot(path=str(folder / f"{prefix}-{i:02d}.png"))


def wait_all_run(page: Any) -> None:
    """Until every code cell shows an execution count (Run All has reached the end): the
    kernel is idle between two cells too, so "Idle" alone is not enough."""
    page.wait_for_timeout(300)  # cells queued by the click show [*] first
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .every(p => /\\[\\d+\\]/.test(p.textContent))"""
    )
    wait_idle(page)
    wait_widgets(page)


# ipywidgets' renderer is a Panel; the renderers of other outputs are not.
WIDGET_OUTPUTS = ".jp-OutputArea-output.lm-Panel"


def wait_widgets(page: Any) -> None:
    """Until every widget output shows its view: views render after the kernel is idle, and
    after a restart an output shows "model not found" until its cell runs again."""
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('{WIDGET_OUTPUTS}')]
                 .every(o => o.querySelector('.sm-widget') && o.textContent.trim())"""
    )


def write_notebook(path: Path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def open_new_notebook(page: Any, lab: Any, name: str, *cells: str) -> None:
    """Write a notebook of these code cells into the lab's root, open it and wait for its kernel."""
    write_notebook(lab.root / name, *cells)
    page.goto(lab.tree_url(name))
    wait_idle(page)


def run_cell(page: Any, index: int) -> str:
    """Run one cell of the notebook in view; returns its output text."""
    cell = page.locator(f"{VISIBLE_NOTEBOOK} .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.inner_text().strip()
    prompt.click()
    page.keyboard.press("Shift+Enter")
    # A key pressed while a just-opened notebook still settles can be lost: the prompt then
    # never shows [*]. Press again (the cell was not queued, so it runs once).
    for _ in range(3):
        try:
            prompt.filter(has_not_text=before).wait_for(timeout=15_000)
            break
        except PlaywrightTimeoutError:
            prompt.click()
            page.keyboard.press("Shift+Enter")
    # Done when the prompt shows a new execution count: the kernel's status can read Idle
    # before a just-sent cell has started on a busy machine.
    done = re.compile(r"^\[\d+\]:$")
    deadline = time.monotonic() + CELL_TIMEOUT
    started = False  # seen as queued or running ([*]), for a count that may repeat after a restart
    while not (done.match(now := prompt.inner_text().strip()) and (started or now != before)):
        assert time.monotonic() < deadline, f"cell {index} still shows {now!r} after {CELL_TIMEOUT} s"
        started = started or "*" in now
        page.wait_for_timeout(100)
    wait_idle(page)
    return str(cell.locator(".jp-OutputArea").inner_text())
