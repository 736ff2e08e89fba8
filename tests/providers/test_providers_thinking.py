"""Anthropic extended thinking with tools: thinking and redacted_thinking blocks are read from
the stream, kept on the assistant message (and through its stored form), and sent back
unchanged and first in that message, in the body shape the Messages API requires."""

from __future__ import annotations

import json

import pytest

from slotmagic._core.messages import Message, Thinking, ToolCall
from slotmagic._core.repair import NOT_RUN
from slotmagic.providers import ChatRequest, ProviderSettings, ToolSpec, Usage
from slotmagic.providers._anthropic import AnthropicProvider, request_body
from slotmagic.providers._openai import OpenAIProvider

from .support import Drain
from .wire_server import (
    WireServer,
    an_event,
    an_redacted_block,
    an_start,
    an_stop,
    an_text_block,
    an_text_stream,
    an_thinking_block,
    an_tool_block,
    oa_text_stream,
    sse_response,
)

SIGNATURE = "EqQBCkgIBhABGAIiQG0tQ2vYk7lZs1P9oU4r8xH3mJ6cT2wN5aD1fE0gK7iL4oB9uV3yR8qS6pX2zC5nM1bA0dF7hJ4kE2wQ=="
SIGNATURE_2 = "ErcBCkgIBhABGAIiQHjZ5Kp0cW3nT8rL2vB6xM1qS4oD9fA7gE5hU3iY0zN8kP6lR2tJ4wC1mV9bQ7sX3aF5dG0eH=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfLXmHqHl0yO5UjKcW7/bNz"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
THINKING_ON = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


@pytest.fixture
def provider(settings: ProviderSettings):  # type: ignore[no-untyped-def]
    provider = AnthropicProvider(settings)
    yield provider
    provider.close()


def thinking_then_tool_use() -> list[str]:
    """A reply as Claude streams it with thinking on and a tool to call."""
    return [
        an_start(412),
        *an_thinking_block(0, "The user wants Oslo's", " weather.", " I'll call get_weather.", signature=SIGNATURE),
        an_event("ping"),
        *an_text_block(1, "Let me check."),
        *an_tool_block(2, "toolu_01A09q90qw90lq917835lq9", "get_weather", '{"city"', ': "Oslo"}'),
        *an_stop("tool_use", 95),
    ]


THOUGHT = Thinking("thinking", "The user wants Oslo's weather. I'll call get_weather.", SIGNATURE)
CALL = ToolCall("toolu_01A09q90qw90lq917835lq9", "get_weather", '{"city": "Oslo"}')


def stored(message: Message) -> Message:
    """``message`` as the store keeps it: its ``extra()`` through JSON."""
    data = json.loads(json.dumps(message.to_dict()))
    return Message.from_dict(data)


# -- reading the stream ------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, 7])
def test_thinking_and_its_signature_are_kept_beside_the_reply(
    wire: WireServer, provider: AnthropicProvider, drain: Drain, split: int | None
) -> None:
    wire.script(sse_response(thinking_then_tool_use(), split=split))
    chat = ChatRequest("claude-sonnet-4-5", (Message.user("Weather in Oslo?"),), (WEATHER,), params=THINKING_ON)
    result = drain(provider, chat)
    completion = result.completion
    assert completion.message == Message.assistant("Let me check.", [CALL], [THOUGHT])
    assert result.text == completion.message.content == "Let me check."  # the reply is the text only
    assert completion.usage == Usage(412, 95, 0) and completion.finish_reason == "tool_use"


def test_redacted_thinking_is_kept_whole(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    wire.script(
        sse_response(
            [
                an_start(),
                *an_thinking_block(0, "Hm.", signature=SIGNATURE),
                *an_redacted_block(1, REDACTED),
                *an_text_block(2, "Answer."),
                *an_stop(),
            ]
        )
    )
    message = drain(provider, ChatRequest("claude-sonnet-4-5", (Message.user("hi"),))).completion.message
    assert message.thinking == (Thinking("thinking", "Hm.", SIGNATURE), Thinking("redacted_thinking", data=REDACTED))
    assert message.content == "Answer."


def test_interleaved_thinking_keeps_its_place_between_tool_calls(
    wire: WireServer, provider: AnthropicProvider, drain: Drain
) -> None:
    wire.script(
        sse_response(
            [
                an_start(),
                *an_thinking_block(0, "First Oslo.", signature=SIGNATURE),
                *an_tool_block(1, "toolu_1", "get_weather", '{"city": "Oslo"}'),
                *an_thinking_block(2, "Then Lima.", signature=SIGNATURE_2),
                *an_tool_block(3, "toolu_2", "get_weather", '{"city": "Lima"}'),
                *an_stop("tool_use"),
            ]
        )
    )
    message = drain(provider, ChatRequest("claude-sonnet-4-5", (Message.user("Oslo, Lima?"),))).completion.message
    assert message.thinking == (
        Thinking("thinking", "First Oslo.", SIGNATURE),
        Thinking("thinking", "Then Lima.", SIGNATURE_2, after_calls=1),
    )
    body = request_body(
        ChatRequest("claude-sonnet-4-5", (Message.user("Oslo, Lima?"), stored(message)), params=THINKING_ON)
    )
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "tool_use", "thinking", "tool_use"]


def test_a_thinking_block_survives_the_stored_form() -> None:
    message = Message.assistant(
        "Let me check.", [CALL], [THOUGHT, Thinking("redacted_thinking", data=REDACTED, after_calls=1)]
    )
    assert message.extra() == {
        "tool_calls": [{"id": CALL.id, "name": "get_weather", "arguments": '{"city": "Oslo"}'}],
        "thinking": [
            {"type": "thinking", "provider": "anthropic", "thinking": THOUGHT.text, "signature": SIGNATURE},
            {"type": "redacted_thinking", "provider": "anthropic", "data": REDACTED, "after_calls": 1},
        ],
    }
    assert stored(message) == message
    assert stored(message) != Message.assistant("Let me check.", [CALL])  # thinking takes part in equality


# -- sending it back ---------------------------------------------------------------------------------


def test_the_next_request_sends_the_thinking_back_first_and_unchanged(
    wire: WireServer, provider: AnthropicProvider, drain: Drain
) -> None:
    """The tool loop's second request: without the thinking block first in the assistant
    message the API answers 400 "Expected thinking or redacted_thinking, but found tool_use"."""
    wire.script(sse_response(thinking_then_tool_use()), sse_response(an_text_stream("-3 C and snowing in Oslo.")))
    first = ChatRequest("claude-sonnet-4-5", (Message.user("Weather in Oslo?"),), (WEATHER,), params=THINKING_ON)
    reply = drain(provider, first).completion.message
    history = (Message.user("Weather in Oslo?"), stored(reply), Message.tool(CALL.id, "-3 C, snow", "get_weather"))
    drain(provider, ChatRequest("claude-sonnet-4-5", history, (WEATHER,), params=THINKING_ON)).completion  # noqa: B018
    body = wire.requests[-1].json()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT.text, "signature": SIGNATURE},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": CALL.id, "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": CALL.id, "content": "-3 C, snow"}],
        },
    ]


def test_redacted_thinking_goes_back_as_it_came() -> None:
    message = Message.assistant("", [CALL], [THOUGHT, Thinking("redacted_thinking", data=REDACTED)])
    history = (Message.user("q"), message, Message.tool(CALL.id, "ok"))
    body = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": THOUGHT.text, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "tool_use", "id": CALL.id, "name": "get_weather", "input": {"city": "Oslo"}},
    ]


def test_earlier_turns_keep_their_thinking_with_thinking_off() -> None:
    """Thinking from earlier turns is allowed (and ignored) by the API without thinking on."""
    history = (
        Message.user("q"),
        Message.assistant("a", thinking=[THOUGHT]),
        Message.user("and?"),
    )
    body = request_body(ChatRequest("claude-sonnet-4-5", history))
    assert body["messages"][1]["content"][0] == {"type": "thinking", "thinking": THOUGHT.text, "signature": SIGNATURE}


def test_a_final_assistant_message_holds_thinking_only_with_thinking_on() -> None:
    """ "When thinking is disabled, an assistant message in the final position cannot contain
    thinking": a prefill that kept its thinking loses it unless the request turns thinking on."""
    history = (Message.user("q"), Message.assistant("Partial answer", thinking=[THOUGHT]))
    off = request_body(ChatRequest("claude-sonnet-4-5", history, params={"thinking": {"type": "disabled"}}))
    assert off["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "Partial answer"}]}
    on = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert on["messages"][-1]["content"][0]["type"] == "thinking"


def test_a_reply_cut_off_while_thinking_is_not_sent_as_a_bare_thinking_block() -> None:
    """ "The final block in an assistant message cannot be thinking": a reply that stopped at
    max_tokens inside its thinking has nothing else, and is left out."""
    history = (
        Message.user("Long question"),
        Message.assistant("", thinking=[THOUGHT]),
        Message.user("Try again, shorter."),
    )
    body = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Long question"}, {"type": "text", "text": "Try again, shorter."}],
        }
    ]


def test_openai_is_not_sent_anthropic_thinking(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = OpenAIProvider(settings)
    history = (
        Message.user("Weather in Oslo?"),
        Message.assistant("Let me check.", [CALL], [THOUGHT]),
        Message.tool(CALL.id, "-3 C, snow", "get_weather"),
    )
    wire.script(sse_response(oa_text_stream("Cold.")))
    drain(provider, ChatRequest("gpt-4o-mini", history)).completion  # noqa: B018
    provider.close()
    assert wire.requests[-1].json()["messages"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": CALL.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": CALL.id, "content": "-3 C, snow"},
    ]


def test_another_providers_reasoning_is_not_sent_to_anthropic() -> None:
    other = Thinking("thinking", "private chain", provider="someone-else")
    history = (Message.user("q"), Message.assistant("a", thinking=[other]), Message.user("more"))
    body = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert body["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "a"}]}


def test_an_error_result_is_marked_as_one() -> None:
    history = (
        Message.user("q"),
        Message.assistant("", [CALL]),
        Message.tool(CALL.id, "error: get_weather raised KeyError: 'Oslo'", "get_weather", is_error=True),
    )
    body = request_body(ChatRequest("claude-sonnet-4-5", history))
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": CALL.id,
            "content": "error: get_weather raised KeyError: 'Oslo'",
            "is_error": True,
        }
    ]


def test_a_last_tool_round_made_by_another_provider_is_told_as_text() -> None:
    """With thinking on, "a final assistant message must start with a thinking block": tool
    calls OpenAI made have none, and no signature can be made up, so that round goes as text."""
    openai_call = ToolCall("call_Oslo1", "get_weather", '{"city": "Oslo"}')
    history = (
        Message.user("Weather in Oslo?"),
        Message.assistant("Checking.", [openai_call]),  # made by gpt-4o, before the switch
        Message.tool("call_Oslo1", "-3 C, snow", "get_weather"),
    )
    body = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": 'Checking.\n[tool call get_weather({"city": "Oslo"})]'}],
        },
        {"role": "user", "content": [{"type": "text", "text": "[tool result get_weather: -3 C, snow]"}]},
    ]
    # without thinking, or with the round's thinking there, it goes as tool_use / tool_result
    assert request_body(ChatRequest("claude-sonnet-4-5", history))["messages"][2]["content"][0]["type"] == "tool_result"
    claude = (history[0], Message.assistant("Checking.", [CALL], [THOUGHT]), Message.tool(CALL.id, "-3 C"))
    on = request_body(ChatRequest("claude-sonnet-4-5", claude, params=THINKING_ON))
    assert on["messages"][2]["content"][0]["type"] == "tool_result"


def test_a_dangling_openai_call_then_a_new_turn_with_thinking_on() -> None:
    """The tools were switched off after gpt-4o asked for one; the user goes on with Claude."""
    history = (
        Message.user("Weather in Oslo?"),
        Message.assistant("", [ToolCall("call_Oslo1", "get_weather", '{"city": "Oslo"}')]),
        Message.user("Skip that; just guess."),
    )
    body = request_body(ChatRequest("claude-sonnet-4-5", history, params=THINKING_ON))
    assert body["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": '[tool call get_weather({"city": "Oslo"})]'}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"[tool error get_weather: {NOT_RUN}]"},
                {"type": "text", "text": "Skip that; just guess."},
            ],
        },
    ]
