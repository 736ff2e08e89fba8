"""The benchmarks' contract with ``bench/run_all.py``: a target line over is a reading, and
only a crash exits non-zero (run_all reports non-zero exits as "exited with an error")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))


def test_there_are_benchmarks() -> None:
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_main_exits_zero_whatever_its_readings(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    mains = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
    assert mains, f"{script.name} has no main()"
    returns = [node for node in ast.walk(mains[0]) if isinstance(node, ast.Return) and node.value is not None]
    for node in returns:
        assert isinstance(node.value, ast.Constant) and node.value.value == 0, (
            f"{script.name}:{node.lineno} main() returns {ast.unparse(node.value)}: 'over' must exit 0"
        )
