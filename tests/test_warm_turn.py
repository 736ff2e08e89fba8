"""What a warm turn does once: it makes its request's view once, and the built-in tools it
offers (``read_namespace``, ``recall``, the working-context tools) are worked out and checked
once per process, not once per turn. Counted (views made, schemas checked, function schemas
worked out), not timed; and the view made once is the one sent, tools and all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import slotmagic._engine.run.turn as turn_module
import slotmagic.tools._tool as tool_module
from slotmagic import ContextBudget, Message, Session
from slotmagic._engine.view.view import View


class Counts:
    def __init__(self) -> None:
        self.views = self.schemas_checked = self.schemas_made = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    found = Counts()

    def counting(name: str, module: Any, attribute: str) -> None:
        real = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(found, attribute, getattr(found, attribute) + 1)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    counting("make_view", turn_module, "views")
    counting("schema_problem", tool_module, "schemas_checked")
    counting("function_schema", tool_module, "schemas_made")
    yield found


def warm(session: Session, turn: Callable[[int], str]) -> None:
    for i in range(3):
        session.submit_turn(turn(i))


def sent_tools(session: Session) -> list[str]:
    return [t.name for t in session._engine._offered[session.current_slot] or ()]  # type: ignore[union-attr]


@pytest.mark.parametrize("setting", ["plain", "working context, updates on", "a result kept aside", "compacted"])
def test_a_warm_turn_makes_one_view_and_checks_no_schema(setting: str, counts: Counts, tmp_path: Path) -> None:
    with Session.open("warm", db_path=tmp_path / "s.sqlite3") as session:
        text: Callable[[int], str] = lambda i: f"question {i}"  # noqa: E731
        if setting == "working context, updates on":
            session.context.add_goal("Get the deposit back")
            session.context.updates = True
        elif setting == "a result kept aside":
            session.tools.add(_big_result, name="big")
            session.submit_turn("call big")
            text = lambda i: f"more {i}"  # noqa: E731
        elif setting == "compacted":
            session.configure_slot(
                budget=ContextBudget(system=200, history=600, tools=600, tool_results=200, reserve=200)
            )
            session.append([Message.user("word " * 120), Message.assistant("answer " * 120)] * 4)
        warm(session, text)
        before = (counts.views, counts.schemas_checked, counts.schemas_made)
        reply = session.submit_turn(text(9))
        assert (counts.views - before[0], counts.schemas_checked - before[1], counts.schemas_made - before[2]) == (
            1,
            0,
            0,
        ), setting
        offered = sent_tools(session)
        expected = {
            "plain": [],
            "working context, updates on": ["read_context", "add_goal"],
            "a result kept aside": ["read_namespace"],
            "compacted": ["recall"],
        }[setting]
        assert all(name in offered for name in expected), (setting, offered)
        assert reply.text


def _big_result() -> str:
    """A result long enough to be kept aside."""
    return "a long line of a result\n" * 400


def test_the_one_view_is_the_one_sent_when_the_tools_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn whose tools differ from its slot's last turn's makes its view again with them: the
    request carries the tools its last view counted, whichever turn came before."""
    made: list[tuple[str, ...]] = []  # the tools of each view made for a turn
    sent: list[tuple[str, ...]] = []  # the tools of each request sent
    real = turn_module.make_view

    def recorded(inputs: Any, *args: Any, **kwargs: Any) -> View:
        made.append(tuple(t.name for t in inputs.tools))
        return real(inputs, *args, **kwargs)

    monkeypatch.setattr(turn_module, "make_view", recorded)
    with Session.open("change", db_path=tmp_path / "s.sqlite3") as session:
        provider = session._engine.provider("echo")
        stream = provider.stream
        monkeypatch.setattr(
            provider, "stream", lambda request: sent.append(tuple(t.name for t in request.tools)) or stream(request)
        )

        def turn(text: str) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
            made.clear()
            sent.clear()
            session.submit_turn(text)
            return list(made), sent[0]

        turn("question")
        assert turn("again") == ([()], ())  # warm: one view, no tools
        session.tools.add(_big_result, name="big")
        assert turn("call big") == ([(), ("big",)], ("big",))  # its tools changed: made again
        views, tools = turn("read it")  # a reference in view now: read_namespace joins
        assert views == [("big",), ("big", "read_namespace")] and tools == ("big", "read_namespace")
        assert turn("and again") == ([("big", "read_namespace")], ("big", "read_namespace"))
        session.tools.remove("big")
        assert turn("without it") == ([("big", "read_namespace"), ("read_namespace",)], ("read_namespace",))
