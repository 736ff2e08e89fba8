"""A slot far over its budget (an imported conversation, a bulk append) compacts in bounded work:
its view reads only what a request could hold, its fold only the newest parts a summary needs,
every summary request fits the summarizing model's window, every folded message is read by a
summary request (a fold too long for one compaction folds its oldest stretch now and the rest at
the next turns), and nothing is lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Session
from slotmagic._core.compaction import COMPACTION_MARKER
from slotmagic._engine.run.turn import SUMMARY_REQUESTS
from slotmagic.providers import _echo as echo
from slotmagic.tokens import TokenCounter

WINDOW = 8_192


@pytest.fixture
def summary_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every summary request the echo model receives."""
    seen: list[Any] = []
    original = echo.EchoProvider.stream

    def stream(self: echo.EchoProvider, request: Any) -> Any:
        if any(COMPACTION_MARKER in m.content for m in request.messages):
            seen.append(request)
        return original(self, request)

    monkeypatch.setattr(echo.EchoProvider, "stream", stream)
    yield seen


def exchange(i: int) -> list[Message]:
    words = " ".join(f"w{i}x{j}" for j in range(40))
    return [Message.user(f"question {i}: {words}"), Message.assistant(f"answer {i}: {words} {words}")]


EXCHANGES = 50_000  # 100,000 messages: an imported conversation far beyond any window


@pytest.mark.slow
def test_a_huge_slot_compacts_in_bounded_parts_and_loses_nothing(tmp_path: Path, summary_requests: list[Any]) -> None:
    with Session.open("huge", db_path=tmp_path / "h.sqlite3", model="echo") as session:
        for start in range(0, EXCHANGES, 5_000):
            session.append([m for i in range(start, start + 5_000) for m in exchange(i)])
        stored = session.messages()
        preview = session.preview()
        assert preview.report is not None and preview.report.needs_compaction
        [beyond] = [o for o in preview.omitted if o.reason == "beyond"]
        assert beyond.lo == 0 and beyond.hi > 2 * EXCHANGES - 1_000  # the view read only the tail
        assert len(preview.entries) < 1_000 and "beyond what the budget can hold" in preview.to_text()

        reply = session.submit_turn("What follows from all of this?")
        assert reply.text
        counter = TokenCounter.for_model("echo")
        assert 1 <= len(summary_requests) <= SUMMARY_REQUESTS  # bounded, whatever the history's length
        for request in summary_requests:
            assert sum(counter.count_message(m) for m in request.messages) <= WINDOW
        [compaction] = session.compactions()
        # Fewer folded now, every one of them read by a summary request; the rest waits.
        assert 0 < compaction.upto < 2 * EXCHANGES - 1_000 and compaction.replaced == compaction.upto
        assert compaction.covers == (0, compaction.upto) and compaction.parts == len(summary_requests)
        assert compaction.later > 0 and "more are folded by the next turn" in compaction.describe()
        assert "without being summarized" not in compaction.text
        read = "\n".join(m.content for request in summary_requests for m in request.messages)
        assert unsummarized(session.messages()[: compaction.upto], read) == []
        assert session.messages()[: len(stored)] == stored  # nothing lost

        summary_requests.clear()
        session.submit_turn("And then?")  # the next turn folds the next stretch, read as well
        first, second = session.compactions()
        assert second.covers == (first.upto, second.upto) and second.upto > first.upto
        read = "\n".join(m.content for request in summary_requests for m in request.messages)
        assert unsummarized(session.messages()[first.upto : second.upto], read) == []
        assert 1 <= len(summary_requests) <= SUMMARY_REQUESTS

        found = session.history.search("w7x3", slot="default")  # any message, folded or not, is found
        assert found


def unsummarized(messages: list[Message], read: str) -> list[str]:
    """The folded messages no summary request carried (their first line, as the transcript has it)."""
    return [m.content.split(":")[0] for m in messages if m.content.split(":")[0] + ":" not in read]
