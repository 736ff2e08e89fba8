"""Tools from a notebook: ``@slotmagic.tool`` in a cell is all it takes; ``%%turn`` runs the loop
and shows each call compactly; ``%slot tools`` lists them; ``--tools``/``--no-tools`` choose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_magics_slot import run, session
from test_magics_turn import displays

import slotmagic

CELL = '''
import slotmagic

@slotmagic.tool
def lease_clause(number: int) -> str:
    """One clause of the lease.

    Args:
        number: The clause's number.
    """
    return {3: "The deposit is returned within 30 days."}.get(number, "no such clause")
'''


@pytest.fixture
def with_tool(ip: Any) -> Iterator[Any]:
    ip.run_cell(CELL)
    yield ip
    slotmagic.default_registry.remove("lease_clause")  # the registry is the process's


def test_a_decorated_function_is_called_and_shown(with_tool: Any) -> None:
    outputs = displays(with_tool, '%%turn\nWhat does clause 3 say?\ncall lease_clause {"number": 3}')
    data = outputs[-1]["data"]
    assert "<summary>🔧 lease_clause(number=3) → The deposit is returned within 30 days.</summary>" in data["text/html"]
    assert data["text/plain"].startswith("[tool] lease_clause(number=3) → The deposit is returned within 30 days.")
    reply = with_tool.user_ns["_"]
    assert "lease_clause: The deposit is returned within 30 days." in reply.text
    assert [m.role for m in session(with_tool).messages()] == ["user", "assistant", "tool", "assistant"]


def test_no_tools_and_a_chosen_set(with_tool: Any) -> None:
    with_tool.run_cell('%%turn --no-tools\ncall lease_clause {"number": 3}')
    assert [m.role for m in session(with_tool).messages()] == ["user", "assistant"]  # nothing offered, nothing called
    with_tool.run_cell('%%turn --tools lease_clause\ncall lease_clause {"number": 9}')
    assert session(with_tool).messages()[-2].content == "no such clause"


def test_slot_tools_lists_them(with_tool: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(with_tool, "%slot tools", capsys)
    assert out.splitlines()[:3] == [
        "lease_clause(number: integer) — One clause of the lease.",
        "    enabled on every slot",
        "    number: The clause's number.",
    ]
    session(with_tool).configure_slot(tools=[])
    with_tool.run_cell("%slot create other")
    assert "enabled on slots other" in run(with_tool, "%slot tools", capsys)


def test_show_expand_gives_large_results_whole(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell(CELL.replace("return {3:", "return 'x' * 5000 + {3:"))
    try:
        ip.run_cell('%%turn\ncall lease_clause {"number": 3}')
        short = run(ip, "%slot show", capsys)
        assert "namespace://lease_clause/" in short and "x" * 5000 not in short
        assert "x" * 5000 in run(ip, "%slot show --expand", capsys)
    finally:
        slotmagic.default_registry.remove("lease_clause")
