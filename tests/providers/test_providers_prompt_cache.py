"""What reaches the provider when exploring: excluded messages never do; consecutive requests
start with the same bytes, so prompt caches hit; Anthropic gets ``cache_control`` breakpoints
on that prefix; cached tokens and the money saved are shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import slotmagic
from slotmagic import Session
from slotmagic.providers import ProviderSettings

from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

OPENAI, ANTHROPIC = "openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"
EPHEMERAL = {"type": "ephemeral"}


def reply(model: str, text: str, cached: int = 0) -> list[Any]:
    if model == OPENAI:
        return sse_response(oa_text_stream(text, usage=(2000, 5, cached)))
    return sse_response(an_text_stream(text, input_tokens=2000 - cached, cache_read=cached))


@pytest.fixture
def open_session(db_path: Path, settings: ProviderSettings) -> Iterator[Any]:
    opened: list[Session] = []

    def make(model: str) -> Session:
        session = Session.open("cache", db_path=db_path, model=model, settings=settings)
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()


def split_messages(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """A request body as the bytes before its messages array, the array, and the bytes after."""
    text = raw.decode()
    start = text.index('"messages"') + len('"messages"')
    start = text.index("[", start)
    _, end = json.JSONDecoder().raw_decode(text, start)
    return raw[:start], raw[start:end], raw[end:]


@pytest.mark.parametrize("model", [OPENAI, ANTHROPIC])
def test_an_excluded_message_never_reaches_the_request_body(wire: WireServer, open_session: Any, model: str) -> None:
    session = open_session(model)
    wire.script(*(reply(model, text) for text in ("Noted.", "The move-in report.", "Yes, dated ones.")))
    session.submit_turn("My card number is 4111-1111-1111-1111; ignore it.")
    session.submit_turn("Which documents prove the deposit?")
    session.history.exclude(0)
    session.submit_turn("And photos?")
    assert b"4111" in wire.requests[1].body  # it was sent before it was excluded
    assert b"4111" not in wire.requests[2].body
    assert "4111" in session.messages()[0].content  # and it is still stored


def lookup(number: int) -> str:
    """A clause of the lease.

    Args:
        number: The clause's number.
    """
    return f"clause {number}"


def explore_setup(session: Session) -> None:
    """Everything the prefix holds: a system prompt, working context, a workflow, a tool."""
    session.system = "You help tenants with deposit disputes."
    session.context.add_goal("Get the $1,200 deposit back")
    session.context.set_step("gather evidence")
    session.workflows.define("claim", "intake -> evidence\nevidence -> letter")
    session.tools.add(lookup)  # this session only


def test_two_consecutive_requests_share_a_byte_identical_prefix(wire: WireServer, open_session: Any) -> None:
    session = open_session(OPENAI)
    explore_setup(session)
    wire.script(*(reply(OPENAI, text) for text in ("First answer.", "Second answer.", "Third answer.")))
    session.submit_turn("What should I gather first?")
    session.submit_turn("And then?")
    first, second = (split_messages(r.body) for r in wire.requests[:2])
    assert b"lookup" in first[2] and b"deposit back" in first[1]  # tools and blocks are in it
    assert second[0] == first[0] and second[2] == first[2]  # model, tool definitions, the rest
    assert second[1].startswith(first[1][:-1] + b",")  # every message sent before, byte for byte
    # A change in the prefix shows in it (so the comparison above can fail).
    session.context.add_goal("Keep the landlord's emails")
    session.submit_turn("Anything else?")
    third = split_messages(wire.requests[2].body)
    assert not third[1].startswith(second[1][:-1])


def test_anthropic_requests_carry_cache_breakpoints_on_the_prefix(wire: WireServer, open_session: Any) -> None:
    session = open_session(ANTHROPIC)
    explore_setup(session)
    wire.script(reply(ANTHROPIC, "First answer."), reply(ANTHROPIC, "Second answer.", cached=1500))
    session.submit_turn("What should I gather first?")
    second_reply = session.submit_turn("And then?")
    one, two = (r.json() for r in wire.requests)
    assert one["system"] == two["system"] and one["system"][-1]["cache_control"] == EPHEMERAL
    assert one["tools"] == two["tools"] and two["tools"][-1]["cache_control"] == EPHEMERAL
    assert two["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL  # the history up to now
    marks = [b for m in two["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marks) == 1  # with the system and tools: 3 of Anthropic's 4 breakpoints

    def unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in messages
        ]

    assert unmarked(two["messages"])[: len(one["messages"])] == unmarked(one["messages"])
    # What the cache served, and what it saved, in the reply, the footer and the budget.
    assert second_reply.usage.cached_tokens == 1500 and second_reply.saved and second_reply.saved > 0
    from slotmagic._magics.display import footer

    assert "1,500 cached, saved $" in footer(second_reply)
    budget = session.budget()
    assert budget.cached_tokens == 1500 and budget.cache_saved == pytest.approx(second_reply.saved)
    assert "prompt cache: 1,500 input tokens read from the cache, saved $" in budget.to_text()


def test_the_breakpoints_can_be_turned_off(wire: WireServer, open_session: Any) -> None:
    session = open_session(ANTHROPIC)
    session.system = "Be brief."
    session.options.prompt_cache = False
    wire.script(reply(ANTHROPIC, "ok"))
    session.submit_turn("hi")
    body = wire.requests[0].json()
    assert body["system"] == "Be brief." and b"cache_control" not in wire.requests[0].body
    with pytest.raises(slotmagic.ConfigError, match="prompt_cache must be True or False"):
        session.options.prompt_cache = "yes"  # type: ignore[assignment]


def server_tool(name: str, marked: bool) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "web_search_20250305", "name": name}
    return {**tool, "cache_control": EPHEMERAL} if marked else tool


@pytest.mark.parametrize("user_marks", [0, 1, 3, 4])
def test_at_most_four_cache_marks_the_users_first(wire: WireServer, open_session: Any, user_marks: int) -> None:
    """Three user-marked server tools once made five marks; the API takes four. The user's
    marks stay; slotmagic's fill what is left, the last message first (it caches everything)."""
    session = open_session(ANTHROPIC)
    explore_setup(session)
    wire.script(reply(ANTHROPIC, "Answer."))
    tools = [server_tool(f"search_{i}", i < user_marks) for i in range(max(3, user_marks))]
    session.submit_turn("What should I gather first?", params={"tools": tools})
    body = wire.requests[0].json()
    kept = {t["name"]: "cache_control" in t for t in body["tools"]}
    last = "cache_control" in body["messages"][-1]["content"][-1]
    system = isinstance(body["system"], list) and "cache_control" in body["system"][-1]
    assert all(kept[f"search_{i}"] for i in range(user_marks))  # the user's marks stay
    assert sum(kept.values()) + last + system == (3 if user_marks == 0 else 4)
    assert last == (user_marks < 4) and system == (user_marks < 3)  # the last message's mark first
