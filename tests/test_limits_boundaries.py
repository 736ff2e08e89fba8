"""The boundaries a suite once let change unnoticed: an empty summary card, the summary limit's
bound by ``recall``, the shelving threshold (a result of exactly 2,048 bytes stays as it is)
and the summary-length checks (a summary exactly as long as what it replaces, or exactly at its
token limit)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slotmagic import Message, Session
from slotmagic._core.budget import ContextBudget
from slotmagic._core.compaction import SummaryCard, SummaryRejected, parse_summary
from slotmagic._engine.compaction.compactor import Fold, Summarizer, summary_limit
from slotmagic._engine.view.inputs import Counting
from slotmagic._namespace import DEFAULT_THRESHOLD, Namespace, parse_reference
from slotmagic.providers import EchoProvider, ProviderSettings
from slotmagic.tokens import TokenCounter

FOLDED = "[user] " + "a long question about the lease and its deposit " * 20


@pytest.mark.parametrize("card", [{}, {"topics": [], "decisions": [], "open_questions": [], "facts": []}])
def test_a_card_with_no_sections_is_refused(card: dict[str, Any]) -> None:
    reply = f"<card>{json.dumps(card)}</card><summary>The user asked about the deposit.</summary>"
    with pytest.raises(SummaryRejected, match="the summary or the card is empty"):
        parse_summary(reply, FOLDED)


def test_the_summary_limit_keeps_its_recall_bound() -> None:
    budget = ContextBudget.auto(8_192)
    report = budget.report(system=100, history=0)
    view: Any = SimpleNamespace(report=report)
    room = report.history_available
    assert summary_limit(view, 0) == min((room + 100) // 3, room // 2)
    recall = room // 2  # a recall definition so large that the kept half would not fit beside it
    assert summary_limit(view, recall) == max(64, (room - recall) // 2) < (room + 100) // 3


def test_a_result_of_exactly_the_threshold_stays_and_one_byte_more_is_kept_aside(tmp_path: Path) -> None:
    with Session.open("shelve", db_path=tmp_path / "s.db", model="echo") as session:
        namespace = Namespace(session.store, session.session_id)
        at = Message.tool("c1", "x" * DEFAULT_THRESHOLD, "fetch")
        over = Message.tool("c2", "x" * (DEFAULT_THRESHOLD + 1), "fetch")
        assert namespace.shelve(at) is at
        assert parse_reference(namespace.shelve(over).content) is not None
        wide = Message.tool("c3", "é" * (DEFAULT_THRESHOLD // 2), "fetch")  # 2,048 bytes in 1,024 characters
        assert namespace.shelve(wide) is wide


def test_a_summary_as_long_as_what_it_replaces_is_refused_one_shorter_taken() -> None:
    card = {"topics": ["t"]}
    base = f"<card>{json.dumps(card)}</card><summary>"
    whole = len(json.dumps(SummaryCard(topics=("t",)).to_dict()))
    folded = "x" * 400
    text = "y" * (len(folded) - whole)  # text and card exactly as long as the folded transcript
    with pytest.raises(SummaryRejected, match="not shorter"):
        parse_summary(base + text + "</summary>", folded)
    assert parse_summary(base + text[:-1] + "</summary>", folded)[1] == text[:-1]


def test_a_summary_exactly_at_its_limit_is_taken_one_token_over_falls_back() -> None:
    counting = Counting(TokenCounter.for_model("echo"))
    messages = tuple(Message.user(f"question {i} about the deposit and the lease") for i in range(12))
    fold = Fold(0, 12, 12, messages, 600, None)
    reply = '<card>{"topics": ["deposit"]}</card><summary>The user asked twelve questions about the deposit.</summary>'
    provider = EchoProvider(ProviderSettings())
    made = Summarizer(provider, "echo", counting, 10_000)._build(fold, reply, None, None)
    assert made.method == "model"
    exact = Summarizer(provider, "echo", counting, made.tokens_after)._build(fold, reply, None, None)
    assert exact.method == "model" and exact.tokens_after == made.tokens_after
    under = Summarizer(provider, "echo", counting, made.tokens_after - 1)._build(fold, reply, None, None)
    assert under.method == "keyword" and under.note is not None and "more than the" in under.note
