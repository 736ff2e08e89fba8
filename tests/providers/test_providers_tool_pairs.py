"""Histories both APIs would refuse with a 400, sent in the shape they accept: a tool call with
no result after it ("tool_calls must be followed by tool messages" / "tool_use ids were found
without tool_result blocks"), a result whose call is missing, and call ids from another
provider (Anthropic: ``^[a-zA-Z0-9_-]+$``; OpenAI and Azure: at most 40 characters)."""

from __future__ import annotations

import re

import pytest

from slotmagic._core.messages import Message, ToolCall
from slotmagic._core.repair import NOT_RUN
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._anthropic import request_body as anthropic_body
from slotmagic.providers._openai import OpenAIProvider
from slotmagic.providers._openai import request_body as openai_body
from slotmagic.providers._settings import Endpoint

from .support import Drain
from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

OSLO = ToolCall("call_Oslo1", "get_weather", '{"city": "Oslo"}')
LIMA = ToolCall("call_Lima2", "get_weather", '{"city": "Lima"}')
LOCAL = Endpoint("openai", "http://localhost:8080/v1", None)

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def oa(*messages: Message) -> list[dict]:  # type: ignore[type-arg]
    return openai_body(ChatRequest("gpt-4o-mini", messages), LOCAL)["messages"]  # type: ignore[no-any-return]


def an(*messages: Message) -> list[dict]:  # type: ignore[type-arg]
    return anthropic_body(ChatRequest("claude-sonnet-4-5", messages))["messages"]  # type: ignore[no-any-return]


def oa_call(call: ToolCall, call_id: str | None = None) -> dict:  # type: ignore[type-arg]
    return {
        "id": call_id or call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def an_use(call: ToolCall, call_id: str | None = None) -> dict:  # type: ignore[type-arg]
    return {"type": "tool_use", "id": call_id or call.id, "name": call.name, "input": {"city": call.arguments[10:-2]}}


# -- a call without its result ------------------------------------------------------------------------


def test_a_user_turn_after_a_bare_tool_call_openai(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    """The turn was cut after the model asked for tools; the user typed a new turn."""
    provider = OpenAIProvider(settings)
    wire.script(sse_response(oa_text_stream("Sure.")))
    history = (
        Message.user("Weather in Oslo and Lima?"),
        Message.assistant("", [OSLO, LIMA]),
        Message.user("Never mind."),
    )
    drain(provider, ChatRequest("gpt-4o-mini", history)).completion  # noqa: B018
    provider.close()
    assert wire.requests[-1].json()["messages"] == [
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {"role": "assistant", "content": None, "tool_calls": [oa_call(OSLO), oa_call(LIMA)]},
        {"role": "tool", "tool_call_id": "call_Oslo1", "content": NOT_RUN},
        {"role": "tool", "tool_call_id": "call_Lima2", "content": NOT_RUN},
        {"role": "user", "content": "Never mind."},
    ]


def test_a_user_turn_after_a_bare_tool_call_anthropic(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    provider = AnthropicProvider(settings)
    wire.script(sse_response(an_text_stream("Sure.")))
    history = (
        Message.user("Weather in Oslo and Lima?"),
        Message.assistant("", [OSLO, LIMA]),
        Message.user("Never mind."),
    )
    drain(provider, ChatRequest("claude-sonnet-4-5", history)).completion  # noqa: B018
    provider.close()
    assert wire.requests[-1].json()["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Lima?"}]},
        {"role": "assistant", "content": [an_use(OSLO), an_use(LIMA)]},
        {
            "role": "user",
            "content": [  # results first, then the text: as the API wants them
                {"type": "tool_result", "tool_use_id": "call_Oslo1", "content": NOT_RUN, "is_error": True},
                {"type": "tool_result", "tool_use_id": "call_Lima2", "content": NOT_RUN, "is_error": True},
                {"type": "text", "text": "Never mind."},
            ],
        },
    ]


def test_one_call_of_two_answered() -> None:
    history = (Message.user("q"), Message.assistant("", [OSLO, LIMA]), Message.tool("call_Lima2", "19 C"))
    assert oa(*history)[2:] == [  # the results there are, then one for each call without
        {"role": "tool", "tool_call_id": "call_Lima2", "content": "19 C"},
        {"role": "tool", "tool_call_id": "call_Oslo1", "content": NOT_RUN},
    ]
    assert an(*history)[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_Lima2", "content": "19 C"},
        {"type": "tool_result", "tool_use_id": "call_Oslo1", "content": NOT_RUN, "is_error": True},
    ]


def test_a_call_that_ends_the_history() -> None:
    """A preview in the middle of a tool round, or a turn stored without its results."""
    assert oa(Message.user("q"), Message.assistant("Checking.", [OSLO]))[2:] == [
        {"role": "tool", "tool_call_id": "call_Oslo1", "content": NOT_RUN}
    ]
    assert an(Message.user("q"), Message.assistant("Checking.", [OSLO]))[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_Oslo1", "content": NOT_RUN, "is_error": True}],
    }


# -- a result without its call ------------------------------------------------------------------------


def test_a_result_whose_call_is_not_in_the_view() -> None:
    """A focused view of the last messages can start after a call, at its result."""
    history = (Message.tool("call_Oslo1", "-3 C, snow", "get_weather"), Message.user("So, a coat?"))
    text = "(the result of tool 'get_weather', call call_Oslo1, whose call is not in this conversation)\n-3 C, snow"
    assert oa(*history) == [{"role": "user", "content": text}, {"role": "user", "content": "So, a coat?"}]
    assert an(*history) == [
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "text", "text": "So, a coat?"}]}
    ]


def test_a_second_result_for_one_call() -> None:
    history = (
        Message.user("q"),
        Message.assistant("", [OSLO]),
        Message.tool("call_Oslo1", "-3 C"),
        Message.tool("call_Oslo1", "-4 C"),
    )
    sent = oa(*history)
    assert sent[2] == {"role": "tool", "tool_call_id": "call_Oslo1", "content": "-3 C"}
    assert sent[3]["role"] == "user" and sent[3]["content"].endswith("\n-4 C")
    blocks = an(*history)[2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]


def test_calls_sharing_an_id_get_ids_of_their_own() -> None:
    """Some compatible servers number every call ``call_0``: each result answers its call, in order."""
    f, g = ToolCall("call_0", "f", "{}"), ToolCall("call_0", "g", "{}")
    history = (
        Message.user("q"),
        Message.assistant("", [f, g]),
        Message.tool("call_0", "F"),
        Message.tool("call_0", "G"),
    )
    sent = oa(*history)
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_0", "call_0_2"]
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "F"},
        {"role": "tool", "tool_call_id": "call_0_2", "content": "G"},
    ]


# -- switching provider midway ------------------------------------------------------------------------

VLLM_ID = "chatcmpl-tool-4f1e9a2b8c7d6e5f4a3b2c1d0e9f8a7b"  # 46 characters: over OpenAI's 40
KIMI_ID = "functions.get_weather:0"  # '.' and ':' are outside Anthropic's pattern
ANTHROPIC_CALL_ID = "toolu_01T1x1fJ34qAmk2tNTrN7Up6"


@pytest.mark.parametrize("call_id", [VLLM_ID, KIMI_ID, "call 7/\u00e9", ANTHROPIC_CALL_ID, "x" * 80])
def test_call_ids_are_mapped_the_same_way_for_a_call_and_its_result(call_id: str) -> None:
    call = ToolCall(call_id, "get_weather", '{"city": "Oslo"}')
    history = (Message.user("q"), Message.assistant("", [call]), Message.tool(call_id, "-3 C"), Message.user("ok?"))
    openai = oa(*history)
    openai_id = openai[1]["tool_calls"][0]["id"]
    assert openai[2]["tool_call_id"] == openai_id and len(openai_id) <= 40 and ANTHROPIC_ID.match(openai_id)
    anthropic = an(*history)
    anthropic_id = anthropic[1]["content"][0]["id"]
    assert anthropic[2]["content"][0]["tool_use_id"] == anthropic_id and ANTHROPIC_ID.match(anthropic_id)
    assert (oa(*history), an(*history)) == (openai, anthropic)  # deterministic: the same every request
    if call_id == ANTHROPIC_CALL_ID:
        assert openai_id == anthropic_id == call_id  # ids both APIs take are sent as they are


def test_distinct_ids_stay_distinct() -> None:
    a, b = ToolCall("functions.f:0", "f", "{}"), ToolCall("functions.f:1", "f", "{}")
    history = (Message.user("q"), Message.assistant("", [a, b]), Message.tool(a.id, "A"), Message.tool(b.id, "B"))
    blocks = an(*history)
    ids = [u["id"] for u in blocks[1]["content"]]
    assert len(set(ids)) == 2
    assert [r["tool_use_id"] for r in blocks[2]["content"]] == ids


def test_an_openai_conversation_continued_on_anthropic(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    """Ids from a vLLM server (too long for OpenAI itself) and a Kimi-style id, sent to Anthropic."""
    calls = [ToolCall(VLLM_ID, "get_weather", '{"city": "Oslo"}'), ToolCall(KIMI_ID, "get_weather", '{"city": "Lima"}')]
    history = (
        Message.system("Be brief."),
        Message.user("Oslo and Lima?"),
        Message.assistant("", calls),
        Message.tool(VLLM_ID, "-3 C"),
        Message.tool(KIMI_ID, "19 C"),
        Message.assistant("Cold and warm."),
        Message.user("Thanks"),
    )
    provider = AnthropicProvider(settings)
    wire.script(sse_response(an_text_stream("You're welcome.")))
    drain(provider, ChatRequest("claude-sonnet-4-5", history)).completion  # noqa: B018
    provider.close()
    body = wire.requests[-1].json()
    uses = body["messages"][1]["content"]
    results = body["messages"][2]["content"]
    assert uses[0]["id"] == VLLM_ID  # 46 characters of [a-zA-Z0-9_-]: fine for Anthropic
    assert ANTHROPIC_ID.match(uses[1]["id"]) and uses[1]["id"].startswith("functions_get_weather_0_")
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]


def test_tool_definitions_from_the_decorator_on_both_wires() -> None:
    """A tool with no docstring has no description: the key is left out rather than sent empty."""
    from slotmagic import ToolRegistry, tool

    registry = ToolRegistry()

    @tool(registry=registry)
    def ping(host: str, count: int = 1) -> str:
        return host

    spec = registry.specs(["ping"])
    schema = {
        "type": "object",
        "properties": {"host": {"type": "string"}, "count": {"type": "integer", "default": 1}},
        "required": ["host"],
        "additionalProperties": False,
    }
    request = ChatRequest("m", (Message.user("q"),), tuple(spec))
    assert openai_body(request, LOCAL)["tools"] == [
        {"type": "function", "function": {"name": "ping", "parameters": schema}}
    ]
    assert anthropic_body(request)["tools"] == [{"name": "ping", "input_schema": schema}]
