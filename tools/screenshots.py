"""Take the README's and the docs' screenshots from a real JupyterLab in headless Chromium.

python tools/screenshots.py  # writes docs/images/*.png

It runs what a newcomer runs (a short notebook on the offline echo model), with the Slots
sidebar open, through the same JupyterLab and Chromium set-up as the UI tests
(tests/ui/conftest.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS, Lab  # noqa: E402

IMAGES = ROOT / "docs" / "images"
CELLS = (
    "%load_ext slotmagic",
    "%%turn\nMy landlord kept my $1,200 deposit. What are my options?",
    "%slot derive small-claims",
    "%%turn\nHow do I file in small claims court?",
    "%slot derive letter --from default --no-switch\n%slot create lease-review --budget 800 --no-switch",
    "%slot tree",
    "%slot budget",
    "%slot preview",
)


def main() -> None:
    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    # The kernel runs this checkout, as under the tests, and the store is the notebook's own.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "work", Path(tmp) / "home"
        root.mkdir()
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
        notebook.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
        nbformat.write(notebook, root / "tour.ipynb")
        lab = Lab(root, home)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1180, "height": 760})
                page.set_default_timeout(60_000)
                page.goto(f"{lab.url}/lab/tree/tour.ipynb?reset")
                idle = page.locator(".jp-StatusBar-TextItem:has-text('Idle')").first
                idle.wait_for()
                page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slotmagic-slots']").click()
                cells = page.locator(".jp-NotebookPanel .jp-Cell")
                for i in range(cells.count()):
                    cells.nth(i).locator(".jp-InputPrompt").click()
                    page.keyboard.press("Shift+Enter")
                    page.wait_for_timeout(300)
                    idle.wait_for()
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.jp-OutputArea-output.lm-Panel')]"
                    ".every(o => o.querySelector('.sm-widget'))"
                )
                page.wait_for_timeout(800)
                tree = page.locator(".sm-tree")
                tree.scroll_into_view_if_needed()
                page.evaluate("() => document.querySelector('.sm-tree').scrollIntoView({block: 'center'})")
                page.wait_for_timeout(300)
                page.screenshot(path=str(IMAGES / "tree-and-sidebar.png"))
                budget = page.locator(".sm-budget")
                budget.scroll_into_view_if_needed()
                page.evaluate("() => document.querySelector('.sm-budget').scrollIntoView({block: 'start'})")
                page.wait_for_timeout(300)
                page.screenshot(path=str(IMAGES / "budget-and-preview.png"))
                browser.close()
        finally:
            lab.close()
    print(json.dumps({p.name: p.stat().st_size for p in sorted(IMAGES.glob("*.png"))}))


if __name__ == "__main__":
    main()
