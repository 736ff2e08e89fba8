"""The tutorials in a real JupyterLab: Run All, then with the session left on each other slot
in turn, Restart Kernel and Run All. Every output is what the first run showed (replies come
from the store; a widget, by its static form, as of its cell), the session ends on the slot the
first run ended on, and a new turn cell added at the end lands there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from slotmagic import Session
from tools.tutorials import copy_committed

from .actions import outputs_as_of_their_cells, restart_and_run_all, run_all, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPLAYED = "replayed from the store, no model call · "


def same_view(outputs: list[str]) -> list[str]:
    """Outputs as a reader compares them: a replayed reply reads as the first one did."""
    return [re.sub(r"\b1[6-9]\d{8}(\.\d+)?\b", "<TIME>", o.replace(REPLAYED, "")) for o in outputs]


@pytest.mark.parametrize("name", ["01-getting-started.ipynb", "02-branching.ipynb"])
def test_restart_and_run_all_from_every_slot_reproduces_the_tutorial(lab: Any, page: Any, name: str) -> None:
    copy_committed(ROOT / "notebooks" / name, lab.root)  # as git holds it, not as a user last saved it
    store = lab.root / ".slotmagic" / "state.sqlite3"
    page.goto(lab.tree_url(name))
    wait_idle(page)
    run_all(page)
    first = outputs_as_of_their_cells(page)
    assert not any(REPLAYED in o for o in first)
    with Session.open(name, db_path=store) as session:
        ended_on = session.current_slot
        others = [s.id for s in session.list_slots() if s.id != ended_on]
    assert others
    for other in others:
        with Session.open(name, db_path=store) as session:
            session.switch_slot(other)  # the notebook is left elsewhere, as a user might
        restart_and_run_all(page)
        again = outputs_as_of_their_cells(page)
        assert same_view(again) == same_view(first), other
        assert any(REPLAYED in o for o in again)
        with Session.open(name, db_path=store) as session:
            assert session.current_slot == ended_on
    page.screenshot(path=str(lab.root.parent / f"{Path(name).stem}.png"))

    # A new turn cell after them lands where it would have after the first run.
    page.locator(".jp-Notebook .jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.insert_text("%%turn\nOne more question.")
    page.keyboard.press("Shift+Enter")
    wait_idle(page)
    page.get_by_text(f"slot {ended_on} · turn", exact=False).last.wait_for()
    with Session.open(name, db_path=store) as session:
        assert session.messages(ended_on)[-2].content == "One more question."
