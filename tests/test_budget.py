"""ContextBudget: the split, and what a request uses of it by category, tool results included."""

from __future__ import annotations

import pytest

from slotmagic._core.budget import BudgetReport, CategoryUse, ContextBudget


def test_auto_split_is_unchanged() -> None:
    assert ContextBudget.auto(128_000) == ContextBudget(8_000, 80_000, 10_000, 20_000, 10_000)
    assert ContextBudget.auto(200_000).total == 200_000


def test_the_threshold_is_the_history_and_tool_result_budgets_less_the_system_side() -> None:
    budget = ContextBudget.auto(128_000)
    assert budget.history_available(0) == 100_000  # history 80k + tool results 20k
    assert budget.history_available(3_500) == 96_500  # system prompt + working context + tools
    assert budget.history_available(120_000) == 0
    with pytest.raises(ValueError, match="system-side"):
        budget.history_available(-1)


def test_the_threshold_never_lets_a_request_past_the_window_less_the_reply() -> None:
    budget = ContextBudget.auto(128_000)
    assert budget.request_limit() == 118_000 and budget.request_limit(4_096) == 118_000  # the reserve is 10k
    assert budget.request_limit(30_000) == 98_000  # a reply allowed more than the reserve
    assert budget.history_available(0, 30_000) == 98_000
    assert budget.history_available(3_000, 30_000) == 95_000
    # whatever the system side, what fits the threshold fits the window less the reply
    for side in (0, 5_000, 50_000, 99_000, 130_000):
        for reply in (0, 10_000, 25_000):
            room = budget.history_available(side, reply)
            assert room == 0 or side + room + max(reply, budget.reserve) <= budget.total


def test_report_counts_tool_results_toward_the_threshold() -> None:
    budget = ContextBudget.auto(128_000)
    report = budget.report(system=2_000, history=77_000, tools=1_500, tool_results=25_000, reserve=4_096)
    assert report.system == CategoryUse(2_000, 8_000)
    assert report.tool_results.over and report.tool_results.remaining == -5_000
    assert report.over == ("tool_results",)
    assert report.history_available == 100_000 - 3_500
    assert report.conversation_used == 102_000
    assert report.needs_compaction  # 77,000 + 25,000 > 96,500
    assert report.limit == 118_000 and report.request_used == 105_500
    assert report.used == 2_000 + 77_000 + 1_500 + 25_000 + 4_096
    assert report.allowed == 128_000
    data = report.to_dict()
    assert data["history"] == {"used": 77_000, "allowed": 80_000}
    assert data["needs_compaction"] is True and data["history_available"] == 96_500
    assert "tool results 25,000" in report.over_words() and "96,500" in report.over_words()


def test_tool_results_alone_can_pass_the_threshold() -> None:
    """Many results each under the namespace threshold: they count, the history alone is small."""
    report = ContextBudget.auto(3_000).report(system=150, history=844, tools=200, tool_results=9_856)
    assert report.history.used < report.history_available
    assert report.needs_compaction


def test_a_small_request_needs_nothing() -> None:
    report = ContextBudget.auto(8_192).report(system=100, history=500)
    assert isinstance(report, BudgetReport)
    assert not report.needs_compaction and report.over == ()


def test_report_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="history"):
        ContextBudget().report(history=-3)
