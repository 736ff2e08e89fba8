"""The code stays lint-clean and fully typed: checked with every test run."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True)


def test_ruff() -> None:
    done = run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    done = run("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr
