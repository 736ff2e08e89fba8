"""The code stays lint-clean and fully typed: checked with every test run, on what git tracks
(a notebook of one's own, or what ``%slot export`` wrote, is not the project's code), the
tutorials as committed (tools/tutorials.py)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
from mypy_cache import shared_mypy_cache

from conftest import ROOT
from tools.tutorials import committed_text, tracked_files, tutorials

LINTED = (".py", ".pyi", ".ipynb", ".md")  # ruff formats the code blocks of Markdown pages too


def run(*command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, input=stdin)


def sources() -> list[str]:
    """The files ruff reads: those git tracks, less the tutorials (read as committed); every
    file outside a git checkout."""
    if not tracked_files():
        return ["."]
    notebooks = {p.relative_to(ROOT).as_posix() for p in tutorials()}
    return [
        name
        for name in tracked_files()
        if (name.endswith(LINTED) or name == "pyproject.toml") and name not in notebooks and (ROOT / name).is_file()
    ]


def ruff(*command: str) -> str:
    """What ``ruff`` says of the tracked files and of each committed tutorial; "" when clean."""
    done = run("ruff", *command, *sources())
    said = [] if done.returncode == 0 else [done.stdout + done.stderr]
    if tracked_files():
        for notebook in tutorials():
            name = notebook.relative_to(ROOT).as_posix()
            one = run("ruff", *command, "--stdin-filename", name, "-", stdin=committed_text(notebook))
            if one.returncode != 0:
                said.append(f"{name} (as committed):\n{one.stdout}{one.stderr}")
    return "\n".join(said)


def test_ruff() -> None:
    said = ruff("check")
    assert not said, said


def test_mypy_strict(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Incremental on this run's own cache, which reports what a cold run does (mypy_cache.py):
    # test_turn_args.py has most likely checked slotmagic into it already, or will from it.
    with shared_mypy_cache(tmp_path_factory) as cache:
        done = run("mypy", "--cache-dir", str(cache))
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    said = ruff("format", "--check")
    assert not said, said


def test_a_notebook_of_ones_own_and_an_export_are_not_read() -> None:
    """What a user makes beside the tutorials is not the project's code; a tutorial's working
    copy is read as committed."""
    if not tracked_files():
        pytest.skip("not a git checkout")
    probe = ROOT / "notebooks" / f"my-own-{secrets.token_hex(4)}"
    bad = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
                      "source": ["import os\n"]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    try:
        probe.with_suffix(".ipynb").write_text(json.dumps(bad), encoding="utf-8")
        probe.with_suffix(".py").write_text("import os\n", encoding="utf-8")
        assert run("ruff", "check", str(probe.with_suffix(".py"))).returncode != 0  # bad, as a check shows
        assert probe.with_suffix(".ipynb").name not in " ".join(sources())
        assert ruff("check") == ""
    finally:
        probe.with_suffix(".ipynb").unlink(missing_ok=True)
        probe.with_suffix(".py").unlink(missing_ok=True)
    name = tutorials()[0].relative_to(ROOT).as_posix()
    as_committed = run("ruff", "check", "--stdin-filename", name, "-", stdin=json.dumps(bad))
    assert as_committed.returncode != 0 and "F401" in as_committed.stdout  # what a committed tutorial is held to
