"""Invariants that no other test held: each test here fails when the one line of code it names
is changed (the mutations issue 27 lists).

- a model's summary longer than its limit is refused (_engine/compaction/compactor.py, ``tokens_after <= limit``)
- redo carries the pins, context events and compactions gathered since the undo (_store/rows/undo.py)
- gc keeps a deleted ancestor's rows that an undo step still reaches (_store/rows/search.py)
- a focused slot never reaches back past a compaction (_engine/view/pipeline.py, mode_filter)
- a namespace page is capped (_namespace.py, ``min(length, 50_000)``)
- ``%`` and ``_`` are literal in the search of messages not indexed yet (_store/rows/search.py)
- a tool result of exactly the threshold stays in the history (_namespace.py, ``<=``)
- the T1 trigger: a conversation of exactly the room left does not need compaction (``>``)
- the reply's priming counts as history in the budget (_engine/view/pipeline.py, budgeted)

The tests after those hold invariants the mutation check (``tools/mutations.py``, which lists
each mutation with the tests that catch it) found unguarded; they go through the public API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slotmagic import ConfigError, FocusedConfig, Message, OverBudget, Session, SlotMode, SlotReadonly, ToolCall
from slotmagic._core.budget import ContextBudget
from slotmagic._core.request import ChatRequest
from slotmagic._engine.compaction.compactor import Fold, Summarizer
from slotmagic._engine.view.inputs import Counting
from slotmagic._namespace import Namespace
from slotmagic.providers._base import StreamEvent, TextDelta
from slotmagic.tokens import TokenCounter


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Session]:
    with Session.open("invariants", db_path=tmp_path / "state.sqlite3", model="echo") as opened:
        yield opened


def users(session: Session, slot: str | None = None) -> list[str]:
    return [m.content for m in session.messages(slot) if m.role == "user"]


# -- compaction ---------------------------------------------------------------------------------


class _Verbose:
    """A model whose summary is well formed and shorter than the transcript, but long."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield TextDelta(self.reply)


def test_a_model_summary_over_the_limit_is_refused_for_a_keyword_one_that_fits() -> None:
    words = " ".join(f"point{i}" for i in range(150))
    reply = f'<card>{{"topics": ["the deposit"]}}</card><summary>{words}</summary>'
    messages = tuple(
        m
        for i in range(30)
        for m in (Message.user(f"question {i} about the deposit " * 8), Message.assistant(f"answer {i} " * 8))
    )
    counting = Counting(TokenCounter.for_model("echo"))
    fold = Fold(0, len(messages), len(messages), messages, sum(counting.count(m) for m in messages), None)
    summarizer = Summarizer(_Verbose(reply), "echo", counting, limit=60)  # type: ignore[arg-type]
    made = summarizer.summarize(fold)
    assert made.tokens_after <= 60
    assert made.method == "keyword" and made.note is not None and "more than the 60" in made.note


def test_the_compaction_trigger_is_strictly_past_the_room_left() -> None:
    budget = ContextBudget(system=10, history=100, tools=10, tool_results=20, reserve=10)
    room = budget.report(system=5).history_available
    assert room == 115
    assert not budget.report(system=5, history=room).needs_compaction
    assert budget.report(system=5, history=room + 1).needs_compaction


def test_the_reply_priming_counts_as_history(s: Session) -> None:
    s.append([Message.user("what about the deposit?"), Message.assistant("It is 900.")])
    view = s.preview()
    assert view.report is not None
    said = sum(e.tokens for e in view.entries if e.kind == "history" and e.message.role != "system")
    priming = TokenCounter.for_model("echo").priming
    assert priming > 0 and view.report.history.used == said + priming


def test_a_focused_slot_never_reaches_back_past_a_compaction(s: Session) -> None:
    for i in range(6):
        s.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
    s.compactions.compact(keep=2, summary="Six questions about the deposit were answered.")
    s.derive_slot("near", strategy=FocusedConfig(recent_messages=8))
    view = s.preview("near")
    shown = [e.message.content for e in view.entries if e.kind == "history"]
    assert shown == ["question 5", "answer 5"]
    assert [e.kind for e in view.entries].count("compaction") == 1


# -- undo, redo and gc --------------------------------------------------------------------------


def test_redo_keeps_the_pins_context_and_compactions_made_since_the_undo(s: Session) -> None:
    for i in range(4):
        s.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
    s.history.undo()
    s.history.pin(0)
    s.context.add_goal("get the deposit back")
    s.compactions.compact(keep=2, summary="Two questions were answered.")
    s.history.redo()
    assert users(s) == [f"question {i}" for i in range(4)]
    assert s.history.marks() == {0: "pin"}
    assert [g.text for g in s.context().goals] == ["get the deposit back"]
    assert [c.text for c in s.compactions()] == ["Two questions were answered."]


def test_gc_keeps_what_an_undo_step_reaches_in_a_deleted_ancestor(s: Session) -> None:
    s.derive_slot("side")
    for i in range(3):
        s.append([Message.user(f"side {i}"), Message.assistant("ok")], slot="side")
    s.derive_slot("child", parent="side")
    s.append([Message.user("child 0"), Message.assistant("ok")], slot="child")
    whole = s.messages("child")
    s.history.undo("child", turns=3)  # back into side's own part: only the undo step reaches further
    s.delete_slot("side", force=True)
    s.history.gc()
    s.history.redo("child")
    assert s.messages("child") == whole


# -- namespace ----------------------------------------------------------------------------------


def test_a_tool_result_of_exactly_the_threshold_stays_in_the_history(s: Session) -> None:
    space = Namespace(s.store, s.session_id, threshold=100)
    at = Message.tool("call_1", "x" * 100, name="fetch")
    assert space.shelve(at) is at
    over = space.shelve(Message.tool("call_1", "x" * 101, name="fetch"))
    assert over.content.startswith("namespace://fetch/")


def test_a_namespace_page_is_capped_whatever_length_is_asked(s: Session) -> None:
    space = Namespace(s.store, s.session_id)
    key = space.keep("fetch", "y" * 70_000)
    page = space.read(f"namespace://fetch/{key}", 0, 1_000_000)
    head, text = page.split("\n", 1)
    assert len(text) == 50_000 and "20,000 more characters" in head


# -- search -------------------------------------------------------------------------------------


def test_a_percent_sign_is_literal_in_the_search_of_messages_not_indexed(s: Session) -> None:
    s.append([Message.user("the release of 2024"), Message.assistant("noted")])
    s.store.refusal = "the state file is read-only"  # as a read-only file sets it at open: no indexing
    assert [h.position for h in s.history.search("2024")] == [0]
    assert s.history.search("2%4") == [] and s.history.search("2_24") == []


# -- held for the mutation check (tools/mutations.py) -------------------------------------------


def test_a_focused_slot_sends_its_historys_system_message_once(s: Session) -> None:
    s.append([Message.system("Reference: the lease text"), Message.user("question 0"), Message.assistant("a")])
    s.append([Message.user("question 1"), Message.assistant("answer 1")])
    s.derive_slot("near", strategy=FocusedConfig(recent_messages=8))
    systems = [e for e in s.preview("near").entries if e.message.role == "system"]
    assert [e.message.content for e in systems] == ["Reference: the lease text"]


def test_a_turn_on_a_readonly_slot_is_refused_before_a_stream_starts(s: Session) -> None:
    s.submit_turn("before")
    s.configure_slot(mode=SlotMode.READONLY)
    with pytest.raises(SlotReadonly):
        s.stream_turn("after")  # refused when started: no model is asked


def test_a_fork_point_past_the_parents_end_is_one_line(s: Session) -> None:
    s.append([Message.user("question 0"), Message.assistant("answer 0")])
    with pytest.raises(ConfigError, match=r"holds 2 messages \(use 0 to 2\)"):
        s.derive_slot("far", at=3)
    assert [slot.id for slot in s.list_slots()] == ["default"]


def test_a_second_compaction_replaces_only_what_the_first_left(s: Session) -> None:
    for i in range(6):
        s.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
    s.compactions.compact(keep=4, summary="Four questions about the deposit were answered.")
    for i in range(6, 8):
        s.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
    s.compactions.compact(keep=2, summary="Seven questions about the deposit were answered.")
    first, second = s.compactions()
    assert (first.upto, first.replaced) == (8, 8)
    assert (second.upto, second.replaced) == (14, 6)
    assert "compacted 6 messages" in second.describe()


def test_tool_results_count_in_their_own_share_of_the_budget(s: Session) -> None:
    call = ToolCall("call_1", "fetch")
    result = Message.tool("call_1", "the lease says the deposit is 900 " * 10, name="fetch")
    s.append([Message.user("fetch the lease"), Message.assistant("", [call]), result, Message.assistant("900.")])
    view = s.preview()
    assert view.report is not None
    results = sum(e.tokens for e in view.entries if e.message.role == "tool")
    assert results > 0 and view.report.tool_results.used == results


def test_a_turns_new_message_counts_against_the_budget(s: Session) -> None:
    s.configure_slot(budget=ContextBudget(system=200, history=600, tools=0, tool_results=0, reserve=200), compact=False)
    with pytest.raises(OverBudget):
        s.submit_turn("the lease says " * 400)
    assert s.messages() == []


def test_when_space_is_short_the_oldest_tool_result_is_shortened_first(s: Session) -> None:
    for i in range(4):
        call = ToolCall(f"call_{i}", "fetch")
        result = Message.tool(f"call_{i}", f"record {i} of the lease " * 40, name="fetch")
        s.append([Message.user(f"fetch record {i}"), Message.assistant("", [call]), result, Message.assistant("ok")])
    whole = s.preview()
    assert whole.report is not None and not whole.report.needs_compaction
    assert "elided" not in [e.kind for e in whole.entries]  # what fits is sent whole
    used = whole.report.conversation_used + whole.report.system.used + whole.report.tools.used
    s.configure_slot(budget=ContextBudget(system=0, history=used - 20, tools=0, tool_results=0, reserve=0))
    kinds = [e.kind for e in s.preview().entries if e.message.role == "tool"]
    assert kinds == ["elided", "history", "history", "history"]


def test_after_a_compaction_the_block_carries_even_a_goal_completed_long_before(s: Session) -> None:
    s.context.add_goal("Recover the deposit")
    s.context.complete_goal("g1")
    for i in range(5):
        s.append([Message.user(f"question {i}"), Message.assistant(f"answer {i}")])
    assert "context" not in [e.kind for e in s.preview().entries]  # the change is five turns old
    s.compactions.compact(keep=2, summary="Five questions about the deposit were answered.")
    block = next(e.message.content for e in s.preview().entries if e.kind == "context")
    assert "- g1 Recover the deposit (completed)" in block


@pytest.mark.parametrize("password", ["hunter2-secret", "p@ss/w@rd:secret"])
def test_a_urls_password_is_shown_in_no_refusal(password: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Session.open("s", db_path=f"mysql://ann:{password}@db.example/state")
    assert "secret" not in str(refused.value) and "mysql://***@db.example/state" in str(refused.value)
