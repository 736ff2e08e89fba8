"""Run All, Restart Kernel, Run All again, in a real JupyterLab: every output reads as the first
run's, the model is not called once in the second run (counted by the kernel's echo model), and
the store's rows are exactly as the first run left them (timestamps left out).

Every tutorial but 07 (see TUTORIALS); ``tests/test_run_all_headless.py`` also executes each
three times without a browser."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from store_digest import stored

from conftest import ROOT
from tools.tutorials import copy_committed, tutorials

from .actions import (
    WIDGET_OUTPUTS,
    outputs_as_of_their_cells,
    restart_and_run_all,
    run_all,
    shoot_views,
    wait_idle,
    widget_views,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPLAYED = "replayed from the store, no model call · "


@pytest.fixture
def calls(lab: Any) -> Path:
    """Where the kernels of the lab started after this fixture count the echo model's requests."""
    return lab.count_echo_calls()


def counted(path: Path) -> int:
    return len(path.read_text().splitlines())


def views(page: Any) -> list[str]:
    """The text of every widget view shown (each must have drawn something)."""
    return list(page.evaluate(f"() => [...document.querySelectorAll('{WIDGET_OUTPUTS}')].map(w => w.textContent)"))


def same_view(outputs: list[str]) -> list[str]:
    """Outputs as a reader compares them: a replayed reply says so in its footer, and a widget
    rebuilt as of its cell says that (with its follow-live button) above the same view."""
    out = []
    for o in outputs:
        o = o.replace(REPLAYED, "")
        o = re.sub(r"as of cell \[\d+\] · the session has changed since\s*follow live\s*", "", o)
        out.append(re.sub(r"\b1[6-9]\d{8}(\.\d+)?\b", "<TIME>", o))
    return out


# 07's `%%turn --code` adds a cell to the notebook on the first run (which Run All leaves unrun);
# tests/test_run_all_headless.py runs it three times without a browser.
TUTORIALS = sorted(p.name for p in tutorials() if not p.name.startswith("07-"))
# Tutorials whose widgets show a session that changes after their cell (drawn again as of it).
CHANGED_AFTER_WIDGETS = {"03-budgets-and-compaction.ipynb", "05-working-context-and-workflow.ipynb"}


# What a widget shows of its cell's moment, by tutorial: (the cell's source starts with, the view holds).
MOMENTS = {
    "02-branching.ipynb": [("%slot tree", "3 slots · current court")],
    "03-budgets-and-compaction.ipynb": [("%slot budget", "Budget of lease-review")],
}


def check_views(page: Any, name: str, run: str) -> list[dict[str, Any]]:
    """Each widget view as of its cell: its "as of" mark names its own cell's count; the
    tutorial's known moments read as they should; every workflow graph has its nodes."""
    views = widget_views(page)
    for view in views:
        mark = re.match(r"as of cell \[(\d+)\] · ", view["mark"])
        assert not view["mark"] or (mark and int(mark.group(1)) == view["count"]), (run, view["source"], view["mark"])
        # "follow live" is offered where the view can follow, never on a change's replayed view
        assert view["follow"] == ("changed since" in view["mark"]), (run, view["source"], view["mark"])
        if "sm-workflow" in view["kind"]:  # drawn, within its output, no label cut
            assert view["nodes"] > 0 and view["fits"], (run, view["source"])
            assert view["labels"] and not any("…" in label for label in view["labels"]), view["labels"]
    for starts, holds in MOMENTS.get(name, []):
        first = next(v for v in views if v["source"].startswith(starts))
        assert holds in first["text"], (run, starts, first["text"][:200])
    return views


@pytest.mark.parametrize("name", TUTORIALS)
def test_run_all_restart_run_all_reads_the_same_and_calls_no_model(
    lab: Any, calls: Path, page: Any, artifacts: Path, name: str
) -> None:
    copy_committed(ROOT / "notebooks" / name, lab.root)
    store = lab.root / ".slotmagic" / "state.sqlite3"
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(lab.tree_url(name))
    wait_idle(page)
    run_all(page)
    first = outputs_as_of_their_cells(page)
    first_views = check_views(page, name, "first run")
    shoot_views(page, artifacts, "first")
    asked, before = counted(calls), stored(store, name)
    assert asked > 0 and not any(REPLAYED in o for o in first)

    restart_and_run_all(page)
    again = outputs_as_of_their_cells(page)
    again_views = check_views(page, name, "after restart")
    # the same views, as of the same moments (a replayed one may say the session changed since)
    assert [same_view([v["text"]]) for v in again_views] == [same_view([v["text"]]) for v in first_views]
    shown = views(page)
    assert all(v.strip() for v in shown)  # every widget rebuilt and drawn
    if name in CHANGED_AFTER_WIDGETS:
        assert any("as of cell [" in v and "follow live" in v for v in shown), [v[:80] for v in shown]
    assert counted(calls) == asked  # not one model call
    assert stored(store, name) == before
    assert same_view(again) == same_view(first)
    assert any(REPLAYED in o for o in again)
    shoot_views(page, artifacts, "again")
    assert errors == []
