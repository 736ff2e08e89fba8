"""The tutorials in a real kernel, the way JupyterLab runs them (each from a copy of its
committed text, tools/tutorials.py): the kernel knows the notebook's path (JPY_SESSION_NAME)
and each execution carries its cell id. Run All twice, restart, Run All again: the slots come
back, and unchanged turn cells replay instead of calling the model."""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_core.utils import run_sync
from nbclient import NotebookClient

from conftest import ROOT
from slotmagic import Session
from tools.tutorials import copy_committed

NOTEBOOKS = ROOT / "notebooks"
pytestmark = pytest.mark.slow


class LabLikeClient(NotebookClient):
    """nbclient, but each execute_request carries the cell's id in its metadata, as
    JupyterLab sends it (plain nbclient and nbval send none)."""

    def cell_id(self, cell: Any, index: int) -> str:
        return str(cell.id)

    async def async_execute_cell(
        self, cell: Any, cell_index: int, execution_count: int | None = None, store_history: bool = True
    ) -> Any:
        kc = self.kc
        assert kc is not None

        def execute(code: str, **options: Any) -> str:
            content = {
                "code": code,
                "silent": False,
                "store_history": options.get("store_history", True),
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": options.get("stop_on_error", True),
            }
            msg = kc.session.msg("execute_request", content, metadata={"cellId": self.cell_id(cell, cell_index)})
            kc.shell_channel.send(msg)
            return str(msg["header"]["msg_id"])

        original = kc.execute
        kc.execute = execute  # type: ignore[method-assign]
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            kc.execute = original  # type: ignore[method-assign]


class VSCodeLikeClient(LabLikeClient):
    """As VS Code sends it when a cell has no nbformat id of its own: a cell URI with a
    fragment per cell (``vscode-notebook-cell:/path/nb.ipynb#W1sZmlsZQ==``)."""

    def cell_id(self, cell: Any, index: int) -> str:
        return f"vscode-notebook-cell:/home/user/project/deposit.ipynb#W{index}sZmlsZQ%3D%3D"


def lab_env(notebook: Path, db: Path) -> dict[str, str]:
    return {**os.environ, "JPY_SESSION_NAME": str(notebook), "SLOTMAGIC_DB": str(db)}


def run_all(
    notebook: Path, env: dict[str, str], times: int = 1, client_class: type[LabLikeClient] = LabLikeClient
) -> list[nbformat.NotebookNode]:
    """Run All ``times`` times in one fresh kernel (a restart before the first); the cells as
    each run left them."""
    runs = []
    nb = nbformat.read(notebook, as_version=4)
    client = client_class(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
    )
    with client.setup_kernel(env=env):
        for _ in range(times):
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    cell.outputs = []
                    run_sync(client.async_execute_cell)(cell, index)  # execute_cell skips overrides
            runs.append(nbformat.reads(nbformat.writes(nb), as_version=4))  # a copy
    return runs


def turn_outputs(nb: nbformat.NotebookNode) -> Iterator[dict[str, Any]]:
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%turn"):
            # a fan-out's columns are a widget: its view, then its static form (widgets/_static.py)
            (output,) = [
                o
                for o in cell.outputs
                if o.output_type == "display_data" and "application/vnd.jupyter.widget-view+json" not in o.data
            ]
            meta = output.metadata["slotmagic"]
            if "fan_out" in meta:  # one output, a turn per column
                for column in meta["fan_out"]:
                    yield {"text": f"{column['slot']} turn {column['turn']}", **column}
            else:
                yield {"text": output.data["text/plain"], **meta}


def state(db: Path, session_id: str) -> dict[str, Any]:
    with Session.open(session_id, db_path=db) as session:
        return {
            "current": session.current_slot,
            "slots": {s.id: [(m.role, m.content) for m in session.messages(s.id)] for s in session.list_slots()},
        }


@pytest.mark.parametrize(
    ("name", "deleted"),
    [
        ("01-getting-started.ipynb", set()),
        ("02-branching.ipynb", {"court"}),
        ("05-working-context-and-workflow.ipynb", set()),
    ],
)
def test_run_all_twice_restart_and_run_all_again(name: str, deleted: set[str], tmp_path: Path) -> None:
    notebook, db = copy_committed(NOTEBOOKS / name, tmp_path / "notebooks"), tmp_path / "lab.sqlite3"
    first, second = run_all(notebook, lab_env(notebook, db), times=2)
    after_first = state(db, name)  # the session is named after the notebook
    (third,) = run_all(notebook, lab_env(notebook, db))  # a new kernel: the restart
    assert state(db, name) == after_first  # Run All after a restart changed nothing ...
    for run in (second, third):  # ... and asked the model only for branches deleted meanwhile
        for before, again in zip(turn_outputs(first), turn_outputs(run), strict=True):
            assert again["replayed"] is (before["slot"] not in deleted)
            assert again["text"].split("\n\n[")[0] == before["text"].split("\n\n[")[0]
    assert not any(o["replayed"] for o in turn_outputs(first))


def _sanitize(text: str) -> str:
    config = configparser.ConfigParser()
    config.read(ROOT / "tests" / "nbval_sanitize.cfg")
    for section in config.sections():
        text = re.sub(config[section]["regex"], config[section]["replace"], text)
    return text


def _texts(nb: nbformat.NotebookNode) -> list[str]:
    """Each cell's outputs as text; a stream split into several messages reads as one (how it
    is chunked depends on when the kernel flushed, as nbval also ignores)."""
    out = []
    for cell in nb.cells:
        previous = None
        for o in cell.get("outputs", []):
            text = _sanitize(o.get("text") or o.get("data", {}).get("text/plain", ""))
            stream = o.get("name") if o.output_type == "stream" else None
            if stream is not None and stream == previous:
                out[-1] += text
            else:
                out.append(text)
            previous = stream
    return out


@pytest.mark.parametrize(
    "name", ["01-getting-started.ipynb", "02-branching.ipynb", "05-working-context-and-workflow.ipynb"]
)
def test_outputs_match_the_committed_ones_twice_against_one_store(name: str, tmp_path: Path) -> None:
    """As under nbval (no notebook path, no cell ids): each run is a new session, so two runs in
    a row on the same store print what the committed notebook shows."""
    notebook = copy_committed(NOTEBOOKS / name, tmp_path / "notebooks")  # as git holds it
    committed = _texts(nbformat.read(notebook, as_version=4))
    env = {**os.environ, "SLOTMAGIC_DB": str(tmp_path / "same.sqlite3")}
    env.pop("JPY_SESSION_NAME", None)
    for _ in range(2):
        nb = nbformat.read(notebook, as_version=4)
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
        ).execute(env=env)
        assert _texts(nb) == committed


def test_run_all_after_a_restart_on_a_notebook_left_on_another_slot(tmp_path: Path) -> None:
    notebook = tmp_path / "left-elsewhere.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "%load_ext slotmagic",
            "%%turn\nWhat is a deposit?",
            "%%turn\nAnd a lease?",
            "%slot create scratch",  # the notebook ends on a fresh, unrelated slot
        )
    ]
    nbformat.write(nb, notebook)
    db = tmp_path / "lab.sqlite3"
    run_all(notebook, lab_env(notebook, db))
    before = state(db, notebook.name)  # the session is named after the notebook
    assert before["current"] == "scratch"
    (again,) = run_all(notebook, lab_env(notebook, db))  # restart, Run All
    assert state(db, notebook.name) == before
    assert [o["replayed"] for o in turn_outputs(again)] == [True, True]
    assert [o["slot"] for o in turn_outputs(again)] == ["default", "default"]


def test_nbclient_sends_no_cell_ids_yet_a_second_execution_calls_no_model(tmp_path: Path) -> None:
    """nbconvert --execute and papermill (nbclient) send no cell ids: a turn cell is known by
    its position among the turn cells run in the kernel, so executing the notebook again
    replays every turn, and an edited cell forks as in JupyterLab."""
    from reflect_server import ReflectServer

    notebook = tmp_path / "batch.ipynb"
    sources = [
        "%load_ext slotmagic",
        "%%turn\nWhat is a deposit?",
        "%slot derive side",
        "%%turn\nAnd a lease?",
        "%%turn --slot default\nBack on the main line.",
    ]
    with ReflectServer() as server:
        env = {
            **os.environ,
            "JPY_SESSION_NAME": str(notebook),  # a stable session, as papermill users name one
            "SLOTMAGIC_DB": str(tmp_path / "batch.sqlite3"),
            "SLOTMAGIC_MODEL": "openai:reflect",
            "OPENAI_BASE_URL": server.url,
        }
        env.pop("OPENAI_API_KEY", None)

        def execute(cells: list[str]) -> list[dict[str, Any]]:
            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
            NotebookClient(nb, timeout=60, kernel_name="python3").execute(env=env)
            return list(turn_outputs(nb))

        first = execute(sources)
        assert server.requests == 3 and not any(o["replayed"] for o in first)
        second = execute(sources)
        assert server.requests == 3 and all(o["replayed"] for o in second)
        assert [o["text"].split("\n\n[")[0] for o in second] == [o["text"].split("\n\n[")[0] for o in first]
        assert [o["slot"] for o in second] == ["default", "side", "default"]
        edited = execute([*sources[:3], "%%turn\nAnd a lease, briefly?", sources[4]])
        assert server.requests == 4 and [o["replayed"] for o in edited] == [True, False, True]
        assert edited[1]["slot"] == "side.2"


def test_vs_code_cell_ids_replay_too(tmp_path: Path) -> None:
    notebook = tmp_path / "deposit.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(s)
        for s in ("%load_ext slotmagic", "%%turn\nWhat is a deposit?", "%slot derive b", "%%turn\nAnd rent?")
    ]
    nbformat.write(nb, notebook)
    db = tmp_path / "vscode.sqlite3"
    first, second = run_all(notebook, lab_env(notebook, db), times=2, client_class=VSCodeLikeClient)
    assert [o["replayed"] for o in turn_outputs(first)] == [False, False]
    assert [o["replayed"] for o in turn_outputs(second)] == [True, True]
    assert [o["slot"] for o in turn_outputs(second)] == ["default", "b"]


def test_run_all_after_an_undo_and_a_merge_replays_and_changes_nothing(tmp_path: Path) -> None:
    """A turn undone in the first run replays from the slot's undo history (no model call, the
    slot stays where the undo left it); the undo and the merge cells, run again, undo and merge
    nothing more. Twice in one kernel, then after a restart."""
    notebook = tmp_path / "explore.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "%load_ext slotmagic",
            "%%turn\nWhat is a deposit?",
            "%%turn\nAnd a lease?",
            "%%turn\nAnd pets?",
            "%slot undo",
            "%%turn\nAnd the move-out inspection?",
            "%slot derive research",
            "%%turn\nWhat does the statute say?",
            "%slot switch default\n%slot merge research\n%slot pin 1",
        )
    ]
    nbformat.write(nb, notebook)
    db = tmp_path / "lab.sqlite3"
    first, second = run_all(notebook, lab_env(notebook, db), times=2)
    after_first = state(db, notebook.name)
    assert [m for _, m in after_first["slots"]["default"] if m.startswith("And")] == [
        "And a lease?",
        "And the move-out inspection?",
    ]
    (third,) = run_all(notebook, lab_env(notebook, db))  # restart, Run All
    assert state(db, notebook.name) == after_first
    assert not any(o["replayed"] for o in turn_outputs(first))
    printed = ["".join(o.get("text", "") for o in cell.outputs) for cell in first.cells]
    assert "undid 1 turn" in printed[4] and "merged" in printed[8]
    for run in (second, third):  # the undo and the merge print what they printed, and do nothing
        assert all(o["replayed"] for o in turn_outputs(run))
        outputs = ["".join(o.get("text", "") for o in cell.outputs) for cell in run.cells]
        assert outputs[4] == printed[4] and outputs[8] == printed[8]
    with Session.open(notebook.name, db_path=db) as session:
        assert len(session.history.undo_steps()) == 1 and session.history.turns()[-1].info.kind == "merge"
