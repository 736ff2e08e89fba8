"""The tool loop over both wire formats, on the loopback server with a scripted model: several
rounds with parallel calls, a tool that raises, bad arguments, an unknown tool, the round
limit, an async tool, and Ctrl-C during a tool or a model call."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from slotmagic import Session
from slotmagic._core.tokens import estimate_message_tokens
from slotmagic.providers import ProviderSettings
from slotmagic.tokens import TokenCounter

from .wire_server import (
    WireServer,
    an_start,
    an_stop,
    an_text_stream,
    an_tool_block,
    oa_text_stream,
    oa_tool_stream,
    sse_response,
)

PROTOCOLS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5"}


def calls(protocol: str, *wanted: tuple[str, str, str]) -> list[Any]:
    """One reply asking for ``(id, tool, json arguments)`` calls, in ``protocol``'s format."""
    if protocol == "openai":
        return sse_response(oa_tool_stream([(i, name, [args]) for i, name, args in wanted]))
    blocks = [e for n, (i, name, args) in enumerate(wanted) for e in an_tool_block(n, i, name, args)]
    return sse_response([an_start(), *blocks, *an_stop("tool_use")])


def text(protocol: str, words: str) -> list[Any]:
    return sse_response(oa_text_stream(words) if protocol == "openai" else an_text_stream(words))


def results_sent(protocol: str, body: dict[str, Any]) -> dict[str, str]:
    """Tool call id -> result content, from a request body."""
    if protocol == "openai":
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    return {
        b["tool_use_id"]: b.get("content", "")
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


@pytest.fixture
def session(settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("tools", db_path=":memory:", settings=settings) as s:

        def weather(city: str) -> str:
            """Today's weather in a city."""
            return {"Oslo": "-3 C, snow", "Lima": "19 C, clouds"}[city]

        def explode() -> str:
            """Always fails."""
            raise RuntimeError("the sensor is offline")

        async def slow_sum(a: int, b: int) -> int:
            """Adds two numbers, slowly."""
            await asyncio.sleep(0.01)
            return a + b

        for function in (weather, explode, slow_sum):
            s.tools.add(function)
        yield s


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rounds_with_parallel_calls_errors_and_a_final_reply(wire: WireServer, session: Session, protocol: str) -> None:
    wire.script(
        calls(protocol, ("c1", "weather", '{"city": "Oslo"}'), ("c2", "weather", '{"city": "Lima"}')),
        calls(
            protocol,
            ("c3", "explode", "{}"),
            ("c4", "weather", '{"town": "Oslo"}'),
            ("c5", "teleport", "{}"),
            ("c6", "slow_sum", '{"a": 2, "b": 3}'),
        ),
        text(protocol, "Oslo is colder."),
    )
    reply = session.submit_turn("Compare the weather.", model=PROTOCOLS[protocol])
    assert reply.text == "Oslo is colder."
    first, second, third = (r.json() for r in wire.requests)
    assert {t.get("name") or t["function"]["name"] for t in first["tools"]} == {"weather", "explode", "slow_sum"}
    assert results_sent(protocol, second) == {"c1": "-3 C, snow", "c2": "19 C, clouds"}
    sent = results_sent(protocol, third)
    assert sent["c3"] == "error: explode raised RuntimeError: the sensor is offline"
    assert sent["c4"] == "error: weather was not run: missing required argument 'city'"
    assert sent["c5"].startswith("error: ") and "teleport" in sent["c5"]
    assert sent["c6"] == "5"
    stored = session.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant", *["tool"] * 4, "assistant"]
    assert [s.is_error for s in reply.steps] == [False, False, True, True, True, False]
    assert session.slot().meta.turns == 1  # one turn, stored whole


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_round_limit_ends_the_turn_whole(wire: WireServer, session: Session, protocol: str) -> None:
    session.options.max_tool_rounds = 2
    wire.script(*(calls(protocol, (f"r{n}", "weather", '{"city": "Oslo"}')) for n in range(3)))
    reply = session.submit_turn("Keep checking.", model=PROTOCOLS[protocol])
    assert reply.notes[-1].startswith("stopped: the turn reached its limit of 2 tool rounds")
    stored = session.messages()
    assert stored[-1].role == "tool" and stored[-1].is_error and "not run" in stored[-1].content
    wire.script(text(protocol, "Fine."))
    session.submit_turn("Thanks.", model=PROTOCOLS[protocol])  # the stored turn is a valid history
    assert results_sent(protocol, wire.requests[-1].json())["r2"].startswith("error: the call was not run")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_turns_run_parallel_calls_together(wire: WireServer, session: Session, protocol: str) -> None:
    wire.script(
        calls(protocol, ("a1", "slow_sum", '{"a": 1, "b": 2}'), ("a2", "slow_sum", '{"a": 3, "b": 4}')),
        text(protocol, "3 and 7."),
    )
    reply = asyncio.run(session.asubmit_turn("Two sums.", model=PROTOCOLS[protocol]))
    assert reply.text == "3 and 7." and [s.result for s in reply.steps] == ["3", "7"]


def test_ctrl_c_during_a_tool_leaves_the_slot_as_it_was(wire: WireServer, session: Session) -> None:
    def stuck() -> str:
        """Waits for the user."""
        raise KeyboardInterrupt

    session.tools.add(stuck)
    wire.script(calls("openai", ("k1", "stuck", "{}")))
    with pytest.raises(KeyboardInterrupt):
        session.submit_turn("Go.", model=PROTOCOLS["openai"])
    assert session.messages() == [] and session.slot().meta.turns == 0


def test_ctrl_c_during_the_second_model_call_leaves_the_slot_as_it_was(wire: WireServer, session: Session) -> None:
    wire.script(calls("openai", ("w1", "weather", '{"city": "Oslo"}')), text("openai", "It is cold in Oslo."))
    stream = session.stream_turn("Weather?", model=PROTOCOLS["openai"])
    with pytest.raises(KeyboardInterrupt):
        for chunk in stream:
            if "cold" in chunk:
                raise KeyboardInterrupt
    assert session.messages() == []


def test_tools_per_slot_and_per_turn(wire: WireServer, session: Session) -> None:
    session.configure_slot(tools=("weather",))
    wire.script(text("openai", "ok"), text("openai", "ok"), text("openai", "ok"))
    session.submit_turn("a", model=PROTOCOLS["openai"])
    assert [t["function"]["name"] for t in wire.requests[-1].json()["tools"]] == ["weather"]
    session.submit_turn("b", model=PROTOCOLS["openai"], tools=["slow_sum", "explode"])
    assert [t["function"]["name"] for t in wire.requests[-1].json()["tools"]] == ["slow_sum", "explode"]
    session.submit_turn("c", model=PROTOCOLS["openai"], tools=[])
    assert "tools" not in wire.requests[-1].json()
    from slotmagic import ConfigError

    with pytest.raises(ConfigError, match="no tool 'weathr'"):
        session.submit_turn("d", model=PROTOCOLS["openai"], tools=["weathr"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_repeated_call_ids_are_made_unique_in_the_turn(wire: WireServer, session: Session, protocol: str) -> None:
    """A server that repeats a call id (within a reply, or across the rounds of a turn): each
    call gets an id of its own, so each result answers one call, in the store and on the wire."""
    wire.script(
        calls(protocol, ("same", "weather", '{"city": "Oslo"}'), ("same", "weather", '{"city": "Lima"}')),
        calls(protocol, ("same", "weather", '{"city": "Oslo"}')),
        text(protocol, "Done."),
    )
    reply = session.submit_turn("Weather twice.", model=PROTOCOLS[protocol])
    stored = session.messages()
    ids = [c.id for m in stored if m.role == "assistant" for c in m.tool_calls]
    assert ids == ["same", "same_2", "same_3"]
    assert [(m.tool_call_id, m.content) for m in stored if m.role == "tool"] == [
        ("same", "-3 C, snow"), ("same_2", "19 C, clouds"), ("same_3", "-3 C, snow")
    ]  # fmt: skip
    assert [s.arguments for s in reply.steps] == ['city="Oslo"', 'city="Lima"', 'city="Oslo"']
    assert len(set(results_sent(protocol, wire.requests[-1].json()))) == 3


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (sse_response(oa_tool_stream([("n1", "", ["{}"])])), "called a tool without naming it"),
        # the wire parser refuses a negative count before the engine's own check would
        (sse_response(oa_text_stream("Hi.", usage=(-50, 5, 0))), "has a shape the chat completions API does not send"),
    ],
)
def test_a_nameless_call_or_negative_usage_stores_nothing(
    wire: WireServer, session: Session, reply: list[Any], why: str
) -> None:
    from slotmagic._errors import MalformedReply

    wire.script(reply)
    with pytest.raises(MalformedReply, match=re.escape(why)):
        session.submit_turn("Go.", model=PROTOCOLS["openai"])
    assert session.messages() == [] and session.usage.input_tokens == 0


def test_a_turn_whose_slot_is_undone_meanwhile_says_so(wire: WireServer, session: Session) -> None:
    from slotmagic import TurnNotStored

    session.submit_turn("First.", model="echo")

    def undo_it() -> str:
        """Undoes the slot's last turn."""
        session.history.undo()
        return "undone"

    session.tools.add(undo_it)
    wire.script(calls("openai", ("u1", "undo_it", "{}")), text("openai", "Did it."))
    with pytest.raises(TurnNotStored, match="slot 'default' was undone, or deleted and made again, while it was"):
        session.submit_turn("Undo.", model=PROTOCOLS["openai"])
    assert session.messages() == []


def test_calibration_learns_from_the_request_the_last_usage_answers(wire: WireServer, session: Session) -> None:
    """A turn's last reply reports the input tokens of the last request (the question, the
    call and its result), with its tool definitions: that is the request its estimate is
    compared with, not the turn's first one."""
    model = PROTOCOLS["anthropic"]
    wire.script(
        calls("anthropic", ("toolu_1", "weather", '{"city": "Oslo"}')),
        sse_response(an_text_stream("Snowing.", input_tokens=130)),
    )
    session.submit_turn("Weather in Oslo?", model=model)
    second = wire.requests[1].json()
    sent = session.messages()[:3]  # the question, the call, its result: what the second request held
    specs = session.tools.specs([t["name"] for t in second["tools"]])
    estimate = sum(m.tokens or estimate_message_tokens(m) for m in sent)
    estimate += TokenCounter.for_model(model).count_tools(specs, has_system=False)
    observed = session._engine.calibration.to_dict()["models"][model]
    assert observed == [[round(130 / estimate, 6), estimate]]
