"""What a user does in JupyterLab, as the UI tests do it (menus, keys, waiting for the kernel)."""

from __future__ import annotations

from typing import Any


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
    its cell (the first run's live widgets have followed the session to its end since; the
    replayed ones are as of their cells, and say so)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-OutputArea')].map(area => {
                   const statics = [...area.querySelectorAll('.slotmagic-static')];
                   if (!area.querySelector('.sm-widget')) return area.textContent;
                   return statics.map(s => s.textContent).join('\\n');
               })"""
        )
    )


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
