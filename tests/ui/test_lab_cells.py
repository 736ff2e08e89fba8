"""In a real JupyterLab: the cell id JupyterLab sends with each execution lets a re-run
``%%turn`` cell replay its stored reply, and an edited one fork a sibling branch; after a
kernel restart, Run All replays everything."""

from __future__ import annotations

from typing import Any

import pytest

from slotmagic import Session

from .actions import cell_text, open_new_notebook, restart_and_run_all, run_all, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_rerun_replays_edit_forks_and_restart_run_all_replays(lab: Any, page: Any) -> None:
    open_new_notebook(
        page,
        lab,
        "deposit.ipynb",
        "%load_ext slotmagic",
        "%%turn\nWhat is a deposit?",
        "%slot list",
    )
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

    restart_and_run_all(page)
    page.get_by_text("replayed from the store, no model call · slot default.2").wait_for()
    assert "*  default.2" in cell_text(page, 2)
    page.screenshot(path=str(lab.root.parent / "lab.png"))

    # The store sits beside the notebook, in the session named after it.
    with Session.open("deposit.ipynb", db_path=lab.root / ".slotmagic" / "state.sqlite3") as session:
        assert {s.id for s in session.list_slots()} == {"default", "default.2"}
        assert session.messages("default")[0].content == "What is a deposit?"
        assert session.messages("default.2")[0].content == "What is a deposit? Briefly."


def test_a_hostile_reply_is_shown_as_text_and_its_tex_typeset(lab: Any, page: Any) -> None:
    """The echo model repeats the cell, so its reply holds what a hostile model might send:
    none of it runs in JupyterLab, which renders an output it trusts without sanitizing it;
    its Markdown and its TeX still render."""
    attacks = (
        "<img src=x onerror=\"document.title='pwned'\"> \\`<img src=x onerror=\"document.title='pwned'\">` "
        "``<img src=x onerror=\"document.title='pwned'\">` [click](javascript:alert(1)) "
        "`\na` <img src=x onerror=\"document.title='pwned'\"> `b"
    )
    open_new_notebook(
        page, lab, "hostile.ipynb", "%load_ext slotmagic", f"%%turn\nLet $x_1 + y_{{2}} * z_3$ be **bold**. {attacks}"
    )
    run_all(page)
    output = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output")
    output.locator("mjx-container").first.wait_for(timeout=30_000)  # MathJax typeset the TeX
    text = output.inner_text()
    assert "slot default · turn 1" in text
    assert text.count("<img src=x onerror=") == 4 and "[click](javascript:alert(1))" in text
    assert output.locator("img").count() == 0 and output.locator("a[href^='javascript']").count() == 0
    assert output.locator("strong", has_text="bold").count() == 1 and output.locator("code").count() == 2
    page.wait_for_timeout(500)
    assert page.title() != "pwned"
