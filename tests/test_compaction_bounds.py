"""A slot far over its budget (an imported conversation, a bulk append) compacts in bounded work:
its view reads only what a request could hold, its fold only the newest parts a summary needs,
every summary request fits the summarizing model's window, and nothing is lost — the part folded
unread stays within ``recall``'s reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Session
from slotmagic._core.compaction import COMPACTION_MARKER
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
        assert 1 <= len(summary_requests) <= 5  # the newest parts only, whatever the history's length
        for request in summary_requests:
            assert sum(counter.count_message(m) for m in request.messages) <= WINDOW
        [compaction] = session.compactions()
        assert compaction.upto > 2 * EXCHANGES - 1_000 and compaction.replaced == compaction.upto
        assert compaction.text.startswith("The ") and "folded without being summarized" in compaction.text
        assert session.messages()[: len(stored)] == stored  # nothing lost
        view = session.preview()
        assert view.report is not None and not view.report.needs_compaction

        found = session.history.search("w7x3", slot="default")  # a message from the part folded unread
        assert found and found[0].position < compaction.upto
