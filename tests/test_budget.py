"""ContextBudget: the existing split, and what a request uses of it by category (seed T1)."""

from __future__ import annotations

import pytest

from slotmagic.core.budget import BudgetReport, CategoryUse, ContextBudget


def test_auto_split_is_unchanged() -> None:
    assert ContextBudget.auto(128_000) == ContextBudget(8_000, 80_000, 10_000, 20_000, 10_000)
    assert ContextBudget.auto(200_000).total == 200_000


def test_history_available_is_the_history_budget_less_the_system_side() -> None:
    budget = ContextBudget.auto(128_000)
    assert budget.history_available(0) == 80_000
    assert budget.history_available(3_500) == 76_500  # system prompt + working context + tools
    assert budget.history_available(90_000) == 0
    with pytest.raises(ValueError, match="system-side"):
        budget.history_available(-1)


def test_report_used_versus_allowed() -> None:
    budget = ContextBudget.auto(128_000)
    report = budget.report(system=2_000, history=77_000, tools=1_500, tool_results=25_000, reserve=4_096)
    assert report.system == CategoryUse(2_000, 8_000)
    assert report.tool_results.over and report.tool_results.remaining == -5_000
    assert report.over == ("tool_results",)
    assert report.history_available == 80_000 - 3_500
    assert report.needs_compaction  # 77,000 > 76,500
    assert report.used == 2_000 + 77_000 + 1_500 + 25_000 + 4_096
    assert report.allowed == 128_000
    data = report.to_dict()
    assert data["history"] == {"used": 77_000, "allowed": 80_000}
    assert data["needs_compaction"] is True and data["history_available"] == 76_500


def test_a_small_request_needs_nothing() -> None:
    report = ContextBudget.auto(8_192).report(system=100, history=500)
    assert isinstance(report, BudgetReport)
    assert not report.needs_compaction and report.over == ()


def test_report_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="history"):
        ContextBudget().report(history=-3)
