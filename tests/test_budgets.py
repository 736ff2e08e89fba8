"""Token budgets that act: the threshold (seed T1), compaction with structured summaries (T3),
what derived slots see, counts kept per encoding, calibration kept across restarts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from reflect_server import ReflectServer

from conftest import count_rows
from slotmagic import ConfigError, ContextBudget, Message, Session, SlotConfig
from slotmagic._core.compaction import (
    SummaryCard,
    SummaryRejected,
    cut_point,
    keyword_summary,
    parse_summary,
)
from slotmagic._errors import OverBudget
from slotmagic.providers import _catalog as catalog
from slotmagic.tokens import TokenCounter


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


SMALL = ContextBudget(system=200, history=600, tools=0, tool_results=0, reserve=200)
QUESTION = "Question {i}: what does the lease say about the deposit, the notice period and repairs? " + "detail " * 15


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("budget", db_path=db_path) as s:
        s.configure_slot(budget=SMALL)
        yield s


def test_a_long_conversation_compacts_and_every_request_stays_within_budget(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ReflectServer() as server, Session.open("budget", db_path=db_path, settings=server.settings()) as session:
        session.model = "openai:reflect"
        session.options.compaction_model = "echo"  # the offline model writes the summaries
        session.configure_slot(budget=SMALL)
        notes = []
        for i in range(14):
            reply = session.submit_turn(QUESTION.format(i=i))
            notes += reply.notes
        assert any(n.startswith("compacted ") for n in notes)
        assert len(session.messages()) == 28  # every message is kept
        counter = TokenCounter.for_model("openai:reflect")
        for body in server.bodies:  # what the provider received, each time
            sent = [Message(m["role"], m["content"]) for m in body["messages"]]
            assert sum(counter.count_message(m) for m in sent) <= SMALL.system + SMALL.history
        last = [Message(m["role"], m["content"]) for m in server.bodies[-1]["messages"]]
        assert last[0].content.startswith("Summary of the earlier conversation")
        assert last[-1].content == QUESTION.format(i=13)


def test_the_footer_says_what_was_compacted(session: Session) -> None:
    notes = [n for i in range(8) for n in session.submit_turn(QUESTION.format(i=i)).notes]
    [first, *_] = [n for n in notes if n.startswith("compacted ")]
    assert "messages → 1 summary" in first and " → " in first.split(",")[1] and first.endswith("tokens")
    compaction = session.compactions()[0]
    assert compaction.method == "model" and compaction.model == "echo"
    assert compaction.tokens_after < compaction.tokens_before
    assert compaction.card.topics and compaction.card.topics[0].startswith("Question 0")


def test_derived_before_and_after_a_compaction(session: Session) -> None:
    for i in range(3):
        session.submit_turn(QUESTION.format(i=i))
    session.derive_slot("before")
    session.compactions.compact(keep=2)
    session.derive_slot("after")
    session.submit_turn("one more", slot="after")
    assert session.preview("before").compaction is None
    assert session.preview("after").entries[0].kind == "compaction"
    assert session.preview("default").compaction == session.preview("after").compaction
    assert len(session.messages("after")) == 8  # the originals are all still there


def test_compact_off_refuses_with_the_numbers_before_any_call(db_path: Path) -> None:
    with ReflectServer() as server, Session.open("budget", db_path=db_path, settings=server.settings()) as session:
        session.model = "openai:reflect"
        session.configure_slot(budget=SMALL, compact=False)
        for i in range(3):
            session.submit_turn(QUESTION.format(i=i))
        sent = server.requests
        before = session.messages()
        with pytest.raises(
            OverBudget,
            match=r"slot 'default': the conversation needs [\d,]+ tokens \(history [\d,]+, tool results 0\) "
            r"but has room for [\d,]+",
        ):
            for i in range(3, 10):
                session.submit_turn(QUESTION.format(i=i))
        assert "compaction is off" in str(_last_error(session))
        assert server.requests - sent < 7  # refused before the request that would not fit
        assert session.messages()[: len(before)] == before


def _last_error(session: Session) -> Exception:
    try:
        session.submit_turn(QUESTION.format(i=99))
    except OverBudget as exc:
        return exc
    raise AssertionError("expected OverBudget")


def test_budget_report_and_threshold(session: Session) -> None:
    session.system = "You are careful."
    session.submit_turn("hello")
    budget = session.budget()
    assert budget.budget == SMALL and budget.window == 8_192 and budget.window_known
    assert budget.threshold == SMALL.history - budget.report.system.used
    assert budget.report.history.used > 0
    text = budget.to_text()
    assert "compaction threshold: history and tool results up to" in text and "compactions: none" in text


def test_a_slot_without_a_budget_splits_its_model_window(db_path: Path) -> None:
    with Session.open("windows", db_path=db_path) as session:
        assert session.budget(model="openai:gpt-4o").budget == ContextBudget.auto(128_000)
        session.options.context_windows = {"openai:gpt-4o": 64_000}
        assert session.budget(model="openai:gpt-4o").budget == ContextBudget.auto(64_000)
        with pytest.raises(ConfigError, match="whole number"):
            session.options.context_windows = {"openai:gpt-4o": "big"}  # type: ignore[dict-item]


def test_an_unknown_model_gets_a_stated_default_and_one_note(db_path: Path) -> None:
    with ReflectServer() as server, Session.open("windows", db_path=db_path, settings=server.settings()) as session:
        first = session.submit_turn("hi", model="openai:reflect")
        second = session.submit_turn("again", model="openai:reflect")
        # a server of one's own that does not say its context size: a small default, never the largest known
        host = server.settings().openai_base_url.split("//")[1].split("/")[0]
        assert first.notes == ("openai:reflect: context window unknown; assuming 8,192 tokens (slotmagic's default "
                               f"for a model {host} does not describe), so compaction starts early rather than never "
                               "(%config SlotMagic.context_windows = {'openai:reflect': N} sets its "
                               "real size)",)  # fmt: skip
        assert second.notes == ()
        assert session.budget(model="openai:reflect").window == 8_192 < catalog.largest_window("openai")


def test_manual_compaction_keeps_the_last_messages_and_the_originals(session: Session) -> None:
    for i in range(4):
        session.submit_turn(f"q{i}")
    compaction = session.compactions.compact(keep=2, instructions="keep every number")
    assert (compaction.upto, compaction.replaced, compaction.instructions) == (6, 6, "keep every number")
    view = session.preview()
    assert [e.kind for e in view.entries] == ["compaction", "history", "history"]
    assert [o.reason for o in view.omitted] == ["compacted"] and view.omitted[0].hi == 6
    assert len(session.messages()) == 8
    with pytest.raises(ConfigError, match="nothing to compact"):
        session.compactions.compact(keep=2)


def test_exact_counts_are_stored_once_per_encoding(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Session.open("counts", db_path=db_path) as session:
        for i in range(5):
            session.submit_turn(f"question {i}, in some detail")
        first = session.preview(model="openai:gpt-4o")
    assert count_rows(db_path, "token_counts", "WHERE encoding = 'o200k_base'") == 10
    counted: list[str] = []
    real = TokenCounter.count_message
    monkeypatch.setattr(TokenCounter, "count_message", lambda self, m: counted.append(m.content) or real(self, m))
    with Session.open("counts", db_path=db_path) as session:  # a new kernel: read back, not recounted
        again = session.preview(model="openai:gpt-4o")
    assert counted == [] and [e.tokens for e in again.entries] == [e.tokens for e in first.entries]
    counter = TokenCounter.for_model("openai:gpt-4o")
    assert [e.tokens for e in first.entries] == [counter.count_message(e.message) for e in first.entries]


def test_calibration_is_kept_across_restarts(db_path: Path) -> None:
    from slotmagic._core.request import ChatRequest
    from slotmagic._core.usage import Usage

    with Session.open("cal", db_path=db_path) as session:
        request = ChatRequest("claude", (Message.user("x" * 4000).with_tokens(1004),))
        for _ in range(3):
            session._engine.observe("anthropic:claude-sonnet-4-5", request, Usage(1300, 10))
        factor = session._engine.calibration.factor("anthropic:claude-sonnet-4-5")
    assert 1.2 < factor < 1.4
    with Session.open("cal", db_path=db_path) as session:
        assert session._engine.calibration.factor("anthropic:claude-sonnet-4-5") == factor
        counting = session._engine.counting("anthropic:claude-sonnet-4-5")
        assert counting.scale(1000) == round(1000 * factor + 0.5 - 1e-9) or counting.scale(1000) >= 1000 * factor


# -- the pure parts -------------------------------------------------------------------------


CARD = {
    "topics": ["deposit"],
    "decisions": [{"decision": "go to court", "reason": "no answer"}],
    "open_questions": [],
    "facts": ["$1,200"],
}
TRANSCRIPT = "[user] " + "My landlord kept the deposit and will not answer. " * 20


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Sure! Here is a summary.", "does not hold a <card> and a <summary>"),
        ("<card>{not json}</card><summary>x</summary>", "not valid JSON"),
        ('<card>{"topics": "one"}</card><summary>x</summary>', "must be a list of strings"),
        ('<card>{"mood": []}</card><summary>x</summary>', "unknown fields: mood"),
        (f"<card>{json.dumps(CARD)}</card><summary> </summary>", "empty"),
        (f"<card>{json.dumps(CARD)}</card><summary>{TRANSCRIPT * 2}</summary>", "not shorter"),
        (f"<card>{json.dumps(CARD)}</card><summary>{TRANSCRIPT[7:400]}</summary>", "near-copy"),
    ],
)
def test_summaries_that_are_refused(reply: str, why: str) -> None:
    with pytest.raises(SummaryRejected, match=why):
        parse_summary(reply, TRANSCRIPT)


def test_a_good_summary_is_taken() -> None:
    card, text = parse_summary(
        f"<card>\n```json\n{json.dumps(CARD)}\n```\n</card>\n<summary>Deposit kept.</summary>", TRANSCRIPT
    )
    assert card == SummaryCard.from_dict(CARD) and text == "Deposit kept."


def test_keyword_summary_names_the_questions_and_words() -> None:
    messages = [
        Message.user("How do I get my deposit back?"),
        Message.assistant("Write to the landlord about the deposit."),
        Message.user("What if the landlord ignores me?"),
    ]
    card, text = keyword_summary(messages)
    assert card.open_questions == ("What if the landlord ignores me?",)
    assert "deposit" in card.facts[0] and "landlord" in card.facts[0]
    assert text.startswith("The user asked about How do I get my deposit back, and last about What if the landlord")
    assert "The words used most: deposit, landlord" in text and "questions were discussed" not in text
    assert keyword_summary(messages[:1])[1].startswith("The user asked about How do I get my deposit back.")


def test_a_keyword_summary_rolled_forward_reads_as_prose() -> None:
    """No count repeated, no stray quotes, no JSON: a keyword summary of a keyword summary says
    each thing once; a model's summary before it is carried forward in front."""
    from slotmagic._core.compaction import Compaction, Decision, SummaryCard

    first = [
        Message.user("Split the numbers by 'region', 'revenue', and 'quarter'?"),
        Message.assistant("Done: 'region'."),
    ]
    card, text = keyword_summary(first)
    words = text.split("The words used most: ")[1]
    assert words.startswith("region, ") and "'" not in words  # the words, not the quotes around them
    earlier = Compaction(4, 4, card, text, None, "keyword", 100, 40, 4)
    second = [Message.user("Now chart the revenue by quarter."), Message.assistant("Charted.")]
    card2, text2 = keyword_summary(second, earlier)
    assert text2.count("The user asked about") == 1 and "{" not in text2 and "region" not in text2
    assert card2.topics[0].startswith("Split the numbers")  # the earlier topics stay on the card
    by_model = Compaction(4, 4, SummaryCard(decisions=(Decision("the largest", "it holds most", "Which first?"),)),
                          "The user chose a source.", "m", "model", 100, 40, 4)  # fmt: skip
    card3, text3 = keyword_summary(second, by_model)
    assert text3.startswith("The user chose a source. The user asked about Now chart the revenue by quarter.")
    assert card3.decisions == by_model.card.decisions
    message = by_model.message().content
    assert "Decided: Which first? The largest, because it holds most." in message and '{"' not in message


def test_the_cut_keeps_whole_turns_and_tool_pairs() -> None:
    from slotmagic import ToolCall

    messages = [Message.user("a"), Message.assistant("", [ToolCall("c", "f")]), Message.tool("c", "r"),
                Message.assistant("b"), Message.user("c"), Message.assistant("d")]  # fmt: skip
    assert cut_point(messages, [10] * 6, 0, keep_tokens=25) == 4  # the last turn, which fits
    assert cut_point(messages, [10] * 6, 0, keep_tokens=35) == 4  # a tool result never leads the kept part
    # Keeping 4 would start inside the first turn; back to its start would fold nothing, so forward.
    assert cut_point(messages, [10] * 6, 0, keep_tokens=0, keep_last=4) == 4
    assert cut_point(messages, [10] * 6, 0, keep_tokens=0, keep_last=1) == 4
    assert cut_point(messages[:2], [10, 10], 0, keep_tokens=0, keep_last=0) == 2  # nothing fits: all folded
    assert cut_point(messages[:2], [10, 10], 0, keep_tokens=25) == 0  # it all fits: nothing to fold


def test_slot_config_reads_the_old_default_budget_as_follow_the_window() -> None:
    old = SlotConfig().to_dict() | {"budget": ContextBudget().to_dict()}
    assert SlotConfig.from_dict(old).budget is None
    mine = SlotConfig().to_dict() | {"budget": SMALL.to_dict()}
    assert SlotConfig.from_dict(mine).budget == SMALL


def test_tool_definitions_count_in_the_tools_share_and_lower_the_threshold(session: Session) -> None:
    def lease_clause(number: int) -> str:
        """The text of one clause of the lease, looked up in the signed copy.

        Args:
            number: The clause's number.
        """
        return "…"

    session.submit_turn("hello")
    without = session._engine.view(session.slot(), session.store.history("budget", None))
    session.tools.add(lease_clause)
    tools = session._engine.turn_tools(session.slot(), None, without)
    with_tools = session._engine.view(session.slot(), session.store.history("budget", None), tools=tools)
    assert without.report is not None and with_tools.report is not None
    assert without.report.tools.used == 0 and with_tools.report.tools.used > 10
    assert with_tools.report.history_available == without.report.history_available - with_tools.report.tools.used


def test_the_prompt_cache_line_reads_only_the_turns_a_cache_served(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slotmagic._core.records import TurnInfo
    from slotmagic._core.usage import Usage

    store = session.store
    for i in range(40):
        usage = Usage(1_000, 10, 600 if i % 10 == 3 else 0)
        turn = [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
        store.append_turn(session.session_id, "default", turn, TurnInfo(model="openai:gpt-4o", usage=usage))
    session.derive_slot("later")
    store.append_turn(
        session.session_id, "later", [Message.user("q"), Message.assistant("a")],
        TurnInfo(model="openai:gpt-4o", usage=Usage(1_000, 10, 50)),
    )  # fmt: skip
    decoded: list[object] = []
    real = TurnInfo.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[TurnInfo], data: object) -> TurnInfo:
        decoded.append(data)
        return real(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(TurnInfo, "from_dict", classmethod(counting))
    with Session.open(session.session_id, store=store) as again:  # a new kernel's view of the same store
        store._segments.clear()  # type: ignore[attr-defined]  # nothing decoded yet
        budget = again.budget("later")
        assert budget.cached_tokens == 4 * 600 + 50 and budget.cache_saved is not None
        assert len(decoded) == 5  # the 4 turns a cache served and the branch's own, not all 41
        assert again.budget("default").cached_tokens == 4 * 600
