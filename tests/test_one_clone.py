"""The README's two commands in one clone: after a user ran a tutorial in JupyterLab (which
autosaves its outputs), added a notebook of their own and exported a slot beside them, the
test command still passes; a tutorial whose working copy differs is named in one line when its
test fails (tools/tutorials.py, the hooks in conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_install import clone

from conftest import ROOT

TUTORIAL = "notebooks/01-getting-started.ipynb"
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT}, check=True, capture_output=True)


def pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLOTMAGIC_DB", "PYTEST_XDIST_WORKER")}
    quiet = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0"]  # -n 0: addopts ask for workers
    command = [sys.executable, "-m", "pytest", *quiet]
    return subprocess.run([*command, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def as_jupyterlab_saved_it(path: Path) -> None:
    """What running a tutorial in JupyterLab leaves: other counts, other outputs."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for number, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = 100 + number
        cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["replayed from the store\n"]}]
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


@pytest.mark.slow
def test_a_users_clone_passes_and_a_changed_tutorial_is_named(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    repo = clone(tmp_path)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "clone")

    as_jupyterlab_saved_it(repo / TUTORIAL)
    cell = {"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "source": ["import os\n1/0"]}
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x"]}]
    mine = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (repo / "notebooks" / "mine.ipynb").write_text(json.dumps(mine), encoding="utf-8")
    (repo / "notebooks" / "notes.md").write_text("# notes\n\n```python\nimport os\n```\n", encoding="utf-8")
    (repo / "notebooks" / "scratch.py").write_text("import os\n", encoding="utf-8")

    done = pytest_in(repo, "notebooks", "-k", "01-getting-started", "tests/test_lint.py::test_ruff")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "mine.ipynb" not in done.stdout and "passed" in done.stdout

    # A tutorial committed with a wrong output, changed in the working copy too: its failure
    # says first, in one line, that the working copy differs.
    notebook = json.loads((repo / TUTORIAL).read_text(encoding="utf-8"))
    git(repo, "checkout", "--", TUTORIAL)
    committed = json.loads((repo / TUTORIAL).read_text(encoding="utf-8"))
    status = next(c for c in committed["cells"] if c["cell_type"] == "code" and c["source"] == ["%slot"])
    status["outputs"][0]["text"] = ["not what %slot prints\n"]
    (repo / TUTORIAL).write_text(json.dumps(committed, indent=1), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "a wrong output")
    (repo / TUTORIAL).write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    done = pytest_in(repo, "notebooks", "-k", "01-getting-started")
    assert done.returncode == 1, done.stdout[-4000:]
    said = [line for line in done.stdout.splitlines() if "differs from its committed version" in line]
    assert said and said[0].startswith(f"{TUTORIAL} differs from its committed version"), done.stdout[-4000:]
    assert f"git checkout -- {TUTORIAL}" in said[0]
