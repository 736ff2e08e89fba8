"""Test set-up shared by every test, notebooks included.

Kernels and subprocesses started by the tests import slotmagic from this checkout, and every
test gets a store of its own: nothing touches a user's real state.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Subprocesses (nbval and nbclient kernels, crash-test writers) inherit this environment.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
_run_dir = tempfile.mkdtemp(prefix="slotmagic-tests-")
os.environ["SLOTMAGIC_DB"] = str(Path(_run_dir) / "notebooks.sqlite3")


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path / "state.sqlite3"))
    yield


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "slots.sqlite3"
