"""A notebook reopened reads clean: each widget output shows its static form (what the widget
showed, as of its cell) and never ipywidgets' "Error displaying widget: model not found" (the
saved view's model belongs to a kernel that is gone), with a kernel or without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .actions import menu, open_new_notebook, run_all, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NAME = "reopen.ipynb"


def _reads_clean(page: Any, artifacts: Path, shot: str, *, drawn: bool, gone: bool = False) -> None:
    """No error line; each widget shows once: its view where it is ``drawn`` (the kernel that
    made it still runs), else its static form. Where the models are ``gone`` (a new kernel),
    ipywidgets does write its error into each view's part, which takes no room."""
    if gone:
        page.wait_for_function(
            """() => { const parts = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output.lm-Panel')];
                       return parts.length === 2 && parts.every(p => p.textContent.includes('model not found')); }""",
            timeout=90_000,
        )
    if drawn:  # the widget manager finds each model in the kernel again: on a busy machine, late
        page.wait_for_function(
            """() => [...document.querySelectorAll('.jp-Notebook .sm-widget')]
                     .filter(view => view.offsetParent !== null).length === 2""",
            timeout=90_000,
        )
    else:
        page.wait_for_timeout(3000)  # the widget manager gives up on a model it cannot find
    page.screenshot(path=str(artifacts / f"{shot}.png"))
    text = page.locator(".jp-Notebook").inner_text()
    assert "model not found" not in text and "Loading widget" not in text, shot
    statics = page.locator(".jp-Notebook .slotmagic-static")
    views = page.locator(".jp-Notebook .sm-widget")
    assert statics.count() == 2, shot
    assert [statics.nth(i).is_visible() for i in range(2)] == [not drawn] * 2, shot
    assert [views.nth(i).is_visible() for i in range(views.count())] == [True] * (2 if drawn else 0), shot
    assert "default" in text and "history" in text, shot


def test_a_reopened_notebook_shows_static_forms_without_errors(lab: Any, page: Any, artifacts: Path) -> None:
    open_new_notebook(
        page, lab, NAME, "%load_ext slotmagic", "%%turn\nWhat is a deposit?", "%slot tree", "%slot budget"
    )
    run_all(page)
    assert page.locator(".jp-Notebook .sm-tree").count() == 1
    page.keyboard.press("Control+s")
    page.wait_for_function("""() => !document.querySelector('.jp-mod-dirty')""")

    page.reload()  # the page reloaded: the kernel that made the widgets still runs
    wait_idle(page)
    _reads_clean(page, artifacts, "reloaded", drawn=True)

    menu(page, "Kernel", "Shut Down Kernel")
    page.wait_for_timeout(1000)
    page.reload()  # reopened the next day: a new kernel, the widgets' models gone
    wait_idle(page)
    _reads_clean(page, artifacts, "reopened-with-kernel", drawn=False, gone=True)

    menu(page, "Kernel", "Shut Down Kernel")  # no kernel at all, then the file read again
    page.locator(".jp-StatusBar-TextItem:has-text('No Kernel')").first.wait_for()
    menu(page, "File", "Reload Notebook from Disk")
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
    _reads_clean(page, artifacts, "reopened-without-kernel", drawn=False)


def test_a_reopened_notebook_reads_clean_in_notebook_7(lab: Any, page: Any, artifacts: Path) -> None:
    open_new_notebook(
        page, lab, NAME, "%load_ext slotmagic", "%%turn\nWhat is a deposit?", "%slot tree", "%slot budget"
    )
    run_all(page)
    page.keyboard.press("Control+s")
    page.wait_for_function("""() => !document.querySelector('.jp-mod-dirty')""")
    menu(page, "Kernel", "Shut Down Kernel")
    page.locator(".jp-StatusBar-TextItem:has-text('No Kernel')").first.wait_for()

    page.goto(lab.notebook7_url(NAME))  # Notebook 7, a new kernel: the widgets' models are gone
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
    page.locator(".jp-Notebook .slotmagic-static").first.wait_for(state="attached")
    _reads_clean(page, artifacts, "notebook7-reopened", drawn=False, gone=True)

    menu(page, "Kernel", "Shut Down Kernel")  # Notebook 7 with no kernel at all, the file read again
    page.locator(".jp-KernelStatus, .jp-Toolbar-kernelName").filter(has_text="No Kernel").first.wait_for()
    menu(page, "File", "Reload Notebook from Disk")
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
    _reads_clean(page, artifacts, "notebook7-without-kernel", drawn=False)
