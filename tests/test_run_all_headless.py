"""Headless runs (nbclient: ``jupyter nbconvert --execute``, papermill) send no cell ids, yet a
notebook executed again replays every magic: the model is called once per turn cell, the store
is left as it was, and every output reads as the first run's. Two notebooks on one session,
executed one after the other, never take each other's cells as edits."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from store_digest import stored
from test_notebooks_kernel import _texts, turn_outputs

from conftest import ROOT
from slotmagic import Session
from tools.tutorials import copy_committed, tutorials

pytestmark = pytest.mark.slow
NOTEBOOKS = ROOT / "notebooks"
REPLAYED = "replayed from the store, no model call · "
TUTORIALS = [p.name for p in tutorials()]


def execute(cells: list[str] | Path, env: dict[str, str]) -> nbformat.NotebookNode:
    """A notebook executed by nbclient (no cell ids), as nbconvert and papermill do."""
    if isinstance(cells, Path):
        nb = nbformat.read(cells, as_version=4)
        path = str(cells.parent)
    else:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
        path = str(ROOT)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": path}}).execute(env=env)
    return nb


def read(texts: list[str]) -> list[str]:
    """Outputs as a reader compares them: a replayed reply says so in its footer (in a fan-out's
    text table that rewraps its columns: their words are compared there)."""
    out = []
    for text in texts:
        if "│" in text:
            out.append(" ".join(sorted(text.replace(REPLAYED.strip(), "").replace("│", " ").split())))
        else:
            out.append(text.replace(REPLAYED, ""))
    return out


def headless_env(db: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "SLOTMAGIC_NOTEBOOK")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, "SLOTMAGIC_DB": str(db), **more}


def test_a_notebook_executed_twice_calls_the_model_once_per_turn_cell(tmp_path: Path) -> None:
    from reflect_server import ReflectServer

    sources = [
        "%load_ext slotmagic\n%config SlotMagic.context_windows = {'openai:reflect': 100000}",
        "%slot",
        "%%turn\nWhat is a deposit?",
        "%%turn\nAnd a lease?",
        "%slot compact --keep 2",
        "%ctx goal add Get the $1,200 back\n%ctx step intake",
        "%%workflow claim\nintake -> letter",
        "%workflow status intake done\n%workflow current letter",
        "%slot derive side\n%slot pin 1",
        "%%turn\nWhat next?",
        "%slot list",
    ]
    with ReflectServer() as server:
        env = headless_env(
            tmp_path / "batch.sqlite3",
            SLOTMAGIC_SESSION="batch",
            SLOTMAGIC_MODEL="openai:reflect",
            OPENAI_BASE_URL=server.url,
        )
        env.pop("OPENAI_API_KEY", None)
        first = execute(sources, env)
        asked = server.requests
        assert asked == 4  # three turns and one compaction's summary
        before = stored(tmp_path / "batch.sqlite3", "batch")
        second = execute(sources, env)
        assert server.requests == asked
        assert stored(tmp_path / "batch.sqlite3", "batch") == before
        assert read(_texts(second)) == read(_texts(first))
        assert "0 turns" in _texts(second)[0]  # the status cell as of its cell


@pytest.mark.parametrize("named", [True, False])
def test_two_notebooks_on_one_session_never_fork_each_other(tmp_path: Path, named: bool) -> None:
    db = tmp_path / "shared.sqlite3"
    a = ["%load_ext slotmagic", *(f"%%turn\nNotebook A, question {n}." for n in range(6))]
    b = ["%load_ext slotmagic", "%%turn\nNotebook B asks something else.", "%slot list"]
    env = headless_env(db, SLOTMAGIC_SESSION="shared")
    execute(a, {**env, "SLOTMAGIC_NOTEBOOK": "a.ipynb"} if named else env)
    second = execute(b, {**env, "SLOTMAGIC_NOTEBOOK": "b.ipynb"} if named else env)
    with Session.open("shared", db_path=db) as session:
        assert [s.id for s in session.list_slots()] == ["default"]
        assert len(session.history.turns()) == 7  # B's turn came after A's six, with their context
    (reply,) = turn_outputs(second)
    assert "received 13 messages" in reply["text"] and not reply["replayed"]


@pytest.mark.parametrize("name", TUTORIALS)
def test_every_tutorial_executed_three_times_reads_the_same_and_stores_nothing_more(name: str, tmp_path: Path) -> None:
    """As nbconvert or papermill would, on one store and one session (named, as a batch user
    names it; the notebook itself is told by its cells' texts)."""
    shutil_copy = copy_committed(NOTEBOOKS / name, tmp_path)  # as git holds it
    db = tmp_path / "state.sqlite3"
    env = headless_env(db, SLOTMAGIC_SESSION=name)
    first = read(_texts(execute(shutil_copy, env)))
    after_first = stored(db, name)
    for _ in range(2):
        again = read(_texts(execute(shutil_copy, env)))
        assert again == first
        assert stored(db, name) == after_first


def test_a_widget_saved_by_a_headless_run_is_as_of_its_cell(tmp_path: Path) -> None:
    """Executed with widget state saved (``nbconvert --execute``'s default): each widget's
    saved state is its cell's moment, not the notebook's end. In 03 the first ``%slot budget``
    follows ``%slot create lease-review``; ``follow-up`` is made 13 cells later."""
    name = "03-budgets-and-compaction.ipynb"
    shutil.copy(NOTEBOOKS / name, tmp_path / name)
    nb = nbformat.read(tmp_path / name, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", store_widget_state=True, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=headless_env(tmp_path / "state.sqlite3"))
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    sources = [cell.source for cell in nb.cells]
    made = next(i for i, s in enumerate(sources) if "%slot create lease-review" in s)
    first = next(i for i, s in enumerate(sources) if i > made and s.strip().startswith("%slot budget"))
    (view,) = [o for o in nb.cells[first].outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    state = states[view["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]]["state"]
    assert state["budget"]["slot"] == "lease-review"
    static = "".join(o["data"]["text/plain"] for o in nb.cells[first].outputs if "text/html" in o.get("data", {}))
    assert "lease-review" in static  # the static form says the same
