"""In a real JupyterLab: the cell id JupyterLab sends with each execution lets a re-run
``%%turn`` cell replay its stored reply, and an edited one fork a sibling branch; after a
kernel restart, Run All replays everything."""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

from slotmagic import Session

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def wait_idle(page: Any) -> None:
    page.wait_for_timeout(300)  # let a just-sent execution mark the kernel busy first
    page.locator(".jp-StatusBar-TextItem:has-text('Idle')").first.wait_for()


def run_all(page: Any) -> None:
    page.locator(".jp-Notebook").click()
    page.keyboard.press("Escape")
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    wait_idle(page)
    # The kernel is idle between two cells too: wait until no cell is still queued ([*]).
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')].some(p => p.textContent.includes('*'))"
    )


def cell_text(page: Any, index: int) -> str:
    return str(page.locator(".jp-Notebook .jp-Cell").nth(index).inner_text())


def test_rerun_replays_edit_forks_and_restart_run_all_replays(lab: Any, page: Any) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "%load_ext slotmagic",
            "%%turn\nWhat is a deposit?",
            "%slot list",
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "deposit.ipynb")

    page.goto(f"{lab.url}/lab/tree/deposit.ipynb?reset")
    wait_idle(page)
    run_all(page)
    first = cell_text(page, 1)
    assert "slot default · turn 1" in first and "replayed" not in first

    run_all(page)  # the same cells again: nothing is asked twice
    assert "replayed from the store, no model call · slot default · turn 1" in cell_text(page, 1)

    editor = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text(" Briefly.")
    page.keyboard.press("Shift+Enter")
    wait_idle(page)
    edited = cell_text(page, 1)
    assert "edited: new branch default.2 from default before turn 1" in edited
    assert "last user message: What is a deposit? Briefly." in edited

    page.get_by_role("menuitem", name="Kernel", exact=True).click()
    page.get_by_text("Restart Kernel and Run All Cells…", exact=True).click()
    page.get_by_role("button", name="Confirm Kernel Restart").click()
    page.wait_for_timeout(2000)
    wait_idle(page)
    page.get_by_text("replayed from the store, no model call · slot default.2").wait_for()
    assert "*  default.2" in cell_text(page, 2)
    page.screenshot(path=str(lab.root.parent / "lab.png"))

    # The store sits beside the notebook, in the session named after it.
    with Session.open("deposit.ipynb", db_path=lab.root / ".slotmagic" / "state.sqlite3") as session:
        assert {s.id for s in session.list_slots()} == {"default", "default.2"}
        assert session.messages("default")[0].content == "What is a deposit?"
        assert session.messages("default.2")[0].content == "What is a deposit? Briefly."
