"""The Anthropic provider against a real local server speaking Messages API SSE."""

from __future__ import annotations

import time

import pytest

from slotmagic._core.messages import Message, ToolCall
from slotmagic._errors import (
    MalformedReply,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from slotmagic.providers import ChatRequest, ProviderSettings, ToolSpec, Usage
from slotmagic.providers._anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider

from .support import PLANTED_ANTHROPIC_KEY, Drain
from .wire_server import (
    DROP,
    Pause,
    WireServer,
    an_event,
    an_start,
    an_stop,
    an_text_block,
    an_text_stream,
    an_tool_block,
    json_response,
    sse_response,
)

HELLO = ChatRequest("claude-sonnet-4-5", (Message.system("Be brief."), Message.user("Hello")))
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def anthropic_error(kind: str, message: str) -> dict:  # type: ignore[type-arg]
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}


@pytest.fixture
def provider(settings: ProviderSettings):  # type: ignore[no-untyped-def]
    provider = AnthropicProvider(settings)
    yield provider
    provider.close()


# -- the request ------------------------------------------------------------------------------------


def test_request_on_the_wire(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    history = (
        Message.system("Be brief."),
        Message.user("Weather in Oslo and Lima?"),
        Message.assistant(
            "Checking.",
            [
                ToolCall("toolu_1", "get_weather", '{"city": "Oslo"}'),
                ToolCall("toolu_2", "get_weather", '{"city": "Lima"}'),
            ],
        ),
        Message.tool("toolu_1", "-3 C, snow"),
        Message.tool("toolu_2", "19 C, sun"),
        Message.system("Summary of the earlier conversation: none"),  # systems anywhere go on top
    )
    wire.script(sse_response(an_text_stream("Cold and warm.")))
    chat = ChatRequest(
        "claude-sonnet-4-5",
        history,
        (WEATHER,),
        temperature=0.5,
        params={"top_k": 40, "metadata": {"user_id": "u-1"}, "stream": False},
    )
    drain(provider, chat).completion  # noqa: B018 (asserts the stream completed)
    request = wire.requests[-1]
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == PLANTED_ANTHROPIC_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.json() == {
        "model": "claude-sonnet-4-5",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": "Be brief.\n\nSummary of the earlier conversation: none",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Lima?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Lima"}},
                ],
            },
            {
                "role": "user",
                "content": [  # consecutive tool results: one user message
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C, snow"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "19 C, sun"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }
        ],
        "temperature": 0.5,
        "top_k": 40,
        "metadata": {"user_id": "u-1"},
        "stream": True,
    }


def test_max_tokens_is_sent_when_given(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    wire.script(sse_response(an_text_stream("ok")))
    drain(provider, ChatRequest("claude-haiku-4-5", (Message.user("hi"),), max_tokens=64)).completion  # noqa: B018
    assert wire.requests[-1].json()["max_tokens"] == 64
    assert "system" not in wire.requests[-1].json()


# -- streaming ------------------------------------------------------------------------------------


def test_text_deltas_then_one_completion_with_usage(
    wire: WireServer, provider: AnthropicProvider, drain: Drain
) -> None:
    wire.script(
        sse_response(
            an_text_stream("Hello", "!", " How can I help?", input_tokens=21, output_tokens=12, cache_read=300)
        )
    )
    result = drain(provider, HELLO)
    assert [e.text for e in result.events[:-1]] == ["Hello", "!", " How can I help?"]  # type: ignore[union-attr]
    completion = result.completion
    assert completion.message == Message.assistant("Hello! How can I help?")
    # input_tokens counts every prompt token: uncached ones plus cache reads (and writes)
    assert completion.usage == Usage(input_tokens=321, output_tokens=12, cached_tokens=300)
    assert (completion.finish_reason, completion.model) == ("end_turn", "claude-sonnet-4-5-20250929")


TRICKY = 'Grüße, 世界 😀 — "quoted" {braces}\nand a new line'


@pytest.mark.parametrize("split", [1, 3, 11, "targeted"])
def test_chunk_boundaries_anywhere(
    wire: WireServer, provider: AnthropicProvider, drain: Drain, split: int | str
) -> None:
    events = an_text_stream(*TRICKY.split(" "))
    body = "".join(events).encode()
    cuts = split
    if split == "targeted":
        emoji, cjk = body.index("😀".encode()), body.index("世".encode())
        cuts = [
            body.index(b"event: content_block_delta") + 4,  # inside a line
            body.index(b'"delta"') + 3,  # inside the JSON object
            body.index(b"\n\n") + 1,  # between the newlines ending an event
            cjk + 2,
            emoji + 1,
            emoji + 2,
        ]
        assert all(body[c] & 0xC0 == 0x80 for c in cuts[-3:])  # inside multi-byte characters
    wire.script(sse_response(events, split=cuts))  # type: ignore[arg-type]
    result = drain(provider, HELLO)
    assert result.text == TRICKY.replace(" ", "")
    assert result.completion.message.content == TRICKY.replace(" ", "")


@pytest.mark.parametrize("split", [None, 4])
def test_tool_use_blocks_are_assembled(
    wire: WireServer, provider: AnthropicProvider, drain: Drain, split: int | None
) -> None:
    wire.script(
        sse_response(
            [
                an_start(472),
                *an_text_block(0, "Okay, let me", " check."),
                an_event("ping"),
                *an_tool_block(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", "", '{"ci', 'ty": "Os', 'lo"}'),
                *an_tool_block(2, "toolu_02", "get_weather", '{"city": "Lima"}'),
                *an_stop("tool_use", 89),
            ],
            split=split,
        )
    )
    chat = ChatRequest("claude-sonnet-4-5", (Message.user("Oslo and Lima?"),), (WEATHER,))
    completion = drain(provider, chat).completion
    assert completion.finish_reason == "tool_use"
    assert completion.message == Message.assistant(
        "Okay, let me check.",
        [
            ToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", '{"city": "Oslo"}'),
            ToolCall("toolu_02", "get_weather", '{"city": "Lima"}'),
        ],
    )
    assert completion.usage == Usage(472, 89, 0)


def test_a_tool_call_without_arguments(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    wire.script(sse_response([an_start(), *an_tool_block(0, "toolu_9", "list_slots"), *an_stop("tool_use")]))
    assert drain(provider, HELLO).completion.message.tool_calls == (ToolCall("toolu_9", "list_slots", "{}"),)


def test_thinking_blocks_are_not_part_of_the_reply(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    wire.script(
        sse_response(
            [
                an_start(),
                an_event("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
                an_event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hm"}),
                an_event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQB"}),
                an_event("content_block_stop", index=0),
                *an_text_block(1, "Answer."),
                an_event("some_future_event", detail=1),  # unknown events are ignored, as the API asks
                *an_stop(),
            ]
        )
    )
    result = drain(provider, HELLO)
    assert result.text == "Answer." and result.completion.message.content == "Answer."


# -- failures in the stream ---------------------------------------------------------------------------


def test_a_stream_without_message_stop_is_interrupted(
    wire: WireServer, provider: AnthropicProvider, drain: Drain
) -> None:
    events = an_text_stream("Hello", " there")[:-1]  # message_delta arrives, message_stop never does
    wire.script(sse_response(events))
    result = drain(provider, HELLO)
    assert isinstance(result.error, StreamInterrupted) and "message_stop" in str(result.error)
    assert result.text == "Hello there"


def test_a_connection_dropped_mid_stream_is_interrupted(
    wire: WireServer, provider: AnthropicProvider, drain: Drain
) -> None:
    wire.script(sse_response(an_text_stream("Hello", " there")[:4], finish=False, then=[DROP]))
    result = drain(provider, HELLO)
    assert isinstance(result.error, StreamInterrupted) and result.text == "Hello"
    assert len(wire.requests) == 1


def test_malformed_json_in_an_event(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    events = an_text_stream("Hello", " world")
    events.insert(4, 'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": {\n\n')
    wire.script(sse_response(events))
    assert isinstance(drain(provider, HELLO).error, MalformedReply)


def test_an_error_event_mid_stream(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    overloaded = an_event("error", error={"type": "overloaded_error", "message": "Overloaded"})
    events = [*an_text_stream("Hel")[:4], overloaded]
    wire.script(sse_response(events))
    result = drain(provider, HELLO)
    assert isinstance(result.error, ProviderHTTPError) and result.error.error_type == "overloaded_error"
    assert str(result.error).endswith("the partial reply was discarded")


# -- HTTP errors and retries ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (400, "invalid_request_error", 'messages: roles must alternate between "user" and "assistant"'),
        (401, "authentication_error", f"invalid x-api-key {PLANTED_ANTHROPIC_KEY}"),
        (403, "permission_error", "Your API key does not have permission to use the specified resource."),
        (404, "not_found_error", "model: claude-9"),
    ],
)
def test_client_errors_are_not_retried(
    wire: WireServer, provider: AnthropicProvider, drain: Drain, status: int, kind: str, message: str
) -> None:
    wire.script(json_response(status, anthropic_error(kind, message)), sse_response(an_text_stream("never")))
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and (error.status, error.error_type) == (status, kind)
    text = str(error)
    assert text.startswith("anthropic (127.0.0.1:") and f"HTTP {status} {kind}" in text and "\n" not in text
    assert PLANTED_ANTHROPIC_KEY not in text
    assert len(wire.requests) == 1


def test_overloaded_then_500_then_success(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    wire.script(
        json_response(529, anthropic_error("overloaded_error", "Overloaded")),
        json_response(500, anthropic_error("api_error", "Internal server error")),
        sse_response(an_text_stream("Back.")),
    )
    assert drain(provider, HELLO).completion.message.content == "Back."
    assert len(wire.requests) == 3


def test_429_honours_retry_after_seconds(wire: WireServer, provider: AnthropicProvider, drain: Drain) -> None:
    limited = anthropic_error("rate_limit_error", "Number of request tokens has exceeded your rate limit")
    wire.script(json_response(429, limited, {"retry-after": "1"}), sse_response(an_text_stream("OK")))
    started = time.monotonic()
    assert drain(provider, HELLO).completion.message.content == "OK"
    assert time.monotonic() - started >= 0.95
    assert len(wire.requests) == 2


def test_persistent_429_is_rate_limited(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = AnthropicProvider(settings.replace(max_retries=1))
    limited = anthropic_error("rate_limit_error", "rate limited")
    wire.script(json_response(429, limited), json_response(429, limited))
    error = drain(provider, HELLO).error
    assert isinstance(error, RateLimited) and error.status == 429
    assert "gave up after 1 retry" in str(error)


def test_a_slow_server_trips_the_read_timeout(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = AnthropicProvider(settings.replace(read_timeout=1.0))  # far under the 5 s pause
    wire.script(sse_response(an_text_stream("Hel", "lo")[:3], finish=False, then=[Pause(5)]))
    error = drain(provider, HELLO).error  # without the timeout: the body ends unfinished after 5 s, another error
    assert isinstance(error, ProviderTimeout) and "no data for 1 s" in str(error)
