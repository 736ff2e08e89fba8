"""The promise context management exists for, kept over a long agent loop: every request fits the
model's window less the reply's reserve, every result kept aside is readable in the request that
shows its reference, what was folded away stays within the model's reach, and nothing stored is
lost — across 250 turns with tool results from 100 bytes to 200 KB, a workflow and a working
context, compactions, and a restart, on both wire formats.

The model is an agent played by a real HTTP server (``agent_server.py``) that decides each reply
from the request it receives; the test counts every request it received.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from slotmagic import ContextBudget, Session
from slotmagic.tokens import TokenCounter

from .agent_server import REFERENCE, AgentServer

WINDOW = 4_000
SIZES = (100, 900, 1_900, 1_950, 2_000, 2_500, 8_000, 60_000, 200_000)
FACT = "zanzibar-7731"
FIRST, RESTARTED = 200, 50


def fetch(size: int) -> str:
    """Fetch a document of about ``size`` bytes.

    Args:
        size: How many bytes.
    """
    seed = hashlib.sha256(str(size).encode()).hexdigest()
    words = [f"w{seed[i % 60 : i % 60 + 4]}{i}" for i in range(size // 6 + 1)]
    return " ".join(words)[:size]


def ask(turn: int) -> str:
    if turn == 3:
        return f"remember the codeword {FACT}"
    if turn == 190:
        return "recall zanzibar"
    if turn % 5 == 4:
        return f"turn {turn}: thanks, carry on"
    return f"fetch {SIZES[turn % len(SIZES)]}"


def open_session(db: Path, model: str, server: AgentServer) -> Session:
    session = Session.open("long", db_path=db, model=model, settings=server.settings())
    session.options.context_windows = {model: WINDOW}
    session.tools.add(fetch)
    return session


def steer(session: Session, turn: int) -> None:
    """What a user does between turns: the working context and the workflow move on."""
    if turn == 0:
        session.context.add_goal("Collect the documents and find the codeword")
        session.workflows.define("research", "gather -> analyse\nanalyse -> write")
    if turn % 25 == 0:
        session.context.set_step(f"batch {turn // 25}")
    if turn == 60:
        session.context.decide("Which source first?", "the largest", "it holds the most")
    if turn == 100:
        session.workflows.set_status("gather", "done")
        session.workflows.set_current("analyse")


def stored(session: Session) -> dict[str, list[tuple[str, str]]]:
    return {
        slot.id: [(m.role, m.content) for m in session.messages(slot.id, expand=True)] for slot in session.list_slots()
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"])
def test_every_request_fits_and_everything_stays_within_reach(tmp_path: Path, model: str) -> None:
    db = tmp_path / "long.sqlite3"
    with AgentServer() as server:
        session = open_session(db, model, server)
        recalled = ""
        for turn in range(FIRST):
            steer(session, turn)
            reply = session.submit_turn(ask(turn))
            if turn == 190:
                recalled = reply.text
        before = stored(session)
        session.close()

        session = open_session(db, model, server)  # a restart: a new session on the same file
        for turn in range(FIRST, FIRST + RESTARTED):
            steer(session, turn)
            session.submit_turn(ask(turn))
        after = stored(session)

        counter = TokenCounter.for_model(model)
        limit = WINDOW - ContextBudget.auto(WINDOW).reserve
        sizes, read_back = [], 0
        for number, received in enumerate(server.requests):
            tokens = counter.count_request(received.request)
            sizes.append(tokens)
            assert tokens <= limit, f"request {number} ({received.action}) holds {tokens:,} tokens, over {limit:,}"
            refs = set(REFERENCE.findall(" ".join(m.content for m in received.request.messages)))
            if refs and not received.compaction:
                assert "read_namespace" in {t.name for t in received.request.tools}, f"request {number}"
            for ref in refs:
                assert not session.history.read_namespace(ref, 0, 10).startswith("error"), (number, ref)
            read_back += received.action == "read_namespace"
        assert server.problems == []

        compactions = session.compactions()
        assert len(compactions) >= 5 and all(c.method == "model" for c in compactions)  # rolling summaries taken
        # Every folded message was read by a summary request, each within the request limit.
        summaries = [r.request for r in server.requests if r.action == "summary"]
        assert sum(c.parts for c in compactions) == len(summaries)
        assert max(counter.count_request(r) for r in summaries) <= limit
        read = "\n".join(m.content for r in summaries for m in r.messages)
        stored_now = session.messages()
        for compaction in compactions:
            lo, hi = compaction.covers
            assert lo == (0 if compaction is compactions[0] else compactions[compactions.index(compaction) - 1].upto)
            missed = [p for p in range(lo, hi) if stored_now[p].content[:60] not in read]
            assert missed == [], f"compaction up to {hi}: positions {missed} were folded unsummarized"
            assert "without being summarized" not in compaction.text
        assert FACT in recalled  # folded away in turn 3, found again at turn 190
        assert read_back >= 40  # large results were read back page by page
        for slot, messages in before.items():  # nothing the store held is lost
            assert after[slot][: len(messages)] == messages
        turns = sum(1 for r in server.requests if r.action != "summary" and r.request.messages[-1].role == "user")
        assert turns == FIRST + RESTARTED
        print(f"{model}: {len(server.requests)} requests, largest {max(sizes):,} of {limit:,} tokens, "
              f"{len(compactions)} compactions, {read_back} pages read")  # fmt: skip
        session.close()
