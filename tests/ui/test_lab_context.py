"""In a real JupyterLab: an image attached to a turn shows as a thumbnail above the reply, and
a code block of the reply goes into a new cell below with its "Copy into a new cell" button
(the JupyterLab extension built in this checkout, src/codecells.ts)."""

from __future__ import annotations

from typing import Any

import pytest

from .actions import open_new_notebook, run_all, wait_all_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_thumbnail_and_code_into_a_new_cell(lab: Any, page: Any, built_extension: Any, artifacts: Any) -> None:
    open_new_notebook(
        page,
        lab,
        "context.ipynb",
        "%load_ext slotmagic",
        "from PIL import Image\npic = Image.new('RGB', (60, 40), (200, 30, 30))",
        "%%turn --attach pic\nWhat colour is it? Then run:\n```python\nprint('from the reply')\n```",
    )
    run_all(page)
    wait_all_run(page)
    turn = page.locator(".jp-Notebook .jp-Cell").nth(2)
    thumb = turn.locator("img.slotmagic-thumb")
    thumb.wait_for()
    assert thumb.get_attribute("alt") == "pic"
    assert thumb.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]") == [True, 60, 40]
    assert "image pic (image/png 60x40" in turn.inner_text()  # echo says what it received

    cells = page.locator(".jp-Notebook .jp-Cell")
    before = cells.count()
    button = turn.locator("button.slotmagic-code-to-cell")
    assert button.count() == 1  # one code block in the reply
    # the block is boxed (a background of its own, as in %slot compare) and the button is on it
    box = turn.locator(".slotmagic-codeblock")
    assert box.locator("pre code").count() == 1 and box.locator("button.slotmagic-code-to-cell").count() == 1
    assert box.evaluate("b => getComputedStyle(b).backgroundColor") not in ("rgba(0, 0, 0, 0)", "transparent")
    outer, inner = box.bounding_box(), button.bounding_box()
    assert outer is not None and inner is not None
    assert outer["x"] <= inner["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
    assert outer["y"] <= inner["y"] and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    box.screenshot(path=str(artifacts / "code-block.png"))
    button.click()
    page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {before + 1}")
    new = cells.nth(3)
    assert "jp-CodeCell" in (new.get_attribute("class") or "")
    assert new.locator(".cm-content").inner_text() == "print('from the reply')"
    page.screenshot(path=str(lab.root.parent / "context.png"))
