"""The OpenAI-compatible provider against a real local server speaking chat-completions SSE."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from slotmagic._core.messages import Message, ToolCall
from slotmagic._errors import (
    MalformedReply,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from slotmagic.providers import ChatRequest, ProviderSettings, ToolSpec, Usage
from slotmagic.providers._openai import OpenAIProvider, request_body
from slotmagic.providers._settings import Endpoint

from .support import PLANTED_OPENAI_KEY, Drain
from .wire_server import (
    DROP,
    OA_DONE,
    Pause,
    WireServer,
    head,
    json_response,
    oa_chunk,
    oa_text_stream,
    oa_tool_stream,
    oa_usage,
    sse_response,
)

HELLO = ChatRequest("gpt-4o-mini", (Message.system("Be brief."), Message.user("Hello")))
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def provider(settings: ProviderSettings):  # type: ignore[no-untyped-def]
    provider = OpenAIProvider(settings)
    yield provider
    provider.close()


# -- the request ------------------------------------------------------------------------------------


def test_request_on_the_wire(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    history = (
        Message.system("Be brief."),
        Message.user("Weather in Oslo and Lima?"),
        Message.assistant(
            "",
            [
                ToolCall("call_1", "get_weather", '{"city": "Oslo"}'),
                ToolCall("call_2", "get_weather", '{"city": "Lima"}'),
            ],
        ),
        Message.tool("call_1", "-3 C, snow", name="get_weather"),
        Message.tool("call_2", "19 C, sun", name="get_weather"),
    )
    wire.script(sse_response(oa_text_stream("Cold in Oslo, warm in Lima.")))
    chat = ChatRequest(
        "gpt-4o-mini",
        history,
        (WEATHER,),
        temperature=0.2,
        max_tokens=300,
        params={"top_p": 0.9, "seed": 7, "stream": False},
    )
    drain(provider, chat).completion  # noqa: B018 (asserts the stream completed)
    request = wire.requests[-1]
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {PLANTED_OPENAI_KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo and Lima?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "-3 C, snow"},
            {"role": "tool", "tool_call_id": "call_2", "content": "19 C, sun"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                },
            }
        ],
        "temperature": 0.2,
        "max_tokens": 300,
        "top_p": 0.9,  # provider-specific parameters pass through ...
        "seed": 7,
        "stream": True,  # ... except the one everything here depends on
        "stream_options": {"include_usage": True},
    }


def test_official_endpoint_gets_max_completion_tokens() -> None:
    official = Endpoint("openai", "https://api.openai.com/v1", "k")
    body = request_body(ChatRequest("gpt-5", (Message.user("hi"),), max_tokens=50), official)
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body


def test_ollama_uses_its_v1_endpoint_without_a_key(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    # Ollama reports usage on the chunk that carries finish_reason.
    wire.script(
        sse_response(
            [
                oa_chunk({"role": "assistant", "content": "Hi"}, model="llama3.2"),
                oa_chunk({"role": "assistant", "content": ""}, "stop", usage=oa_usage(20, 2), model="llama3.2"),
                OA_DONE,
            ]
        )
    )
    provider = OpenAIProvider(settings, name="ollama")
    result = drain(provider, ChatRequest("llama3.2", (Message.user("hi"),)))
    assert result.completion.message.content == "Hi"
    assert result.completion.usage == Usage(20, 2, 0)
    assert wire.requests[-1].path == "/v1/chat/completions"
    assert "authorization" not in wire.requests[-1].headers


# -- streaming ------------------------------------------------------------------------------------


def test_text_deltas_then_one_completion_with_usage(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    wire.script(sse_response(oa_text_stream("Hello", "! How", " can I help?", usage=(19, 10, 6))))
    result = drain(provider, HELLO)
    assert [e.text for e in result.events[:-1]] == ["Hello", "! How", " can I help?"]  # type: ignore[union-attr]
    completion = result.completion
    assert completion.message == Message.assistant("Hello! How can I help?")
    assert completion.usage == Usage(input_tokens=19, output_tokens=10, cached_tokens=6)
    assert (completion.finish_reason, completion.model) == ("stop", "gpt-4o-mini-2024-07-18")


TRICKY = 'Grüße, 世界 😀 — "quoted" {braces} and a\nnew line'


def _body() -> bytes:
    return "".join(oa_text_stream(*TRICKY.split(" "), usage=(9, 8, 0))).encode()


def _offsets() -> list[int]:
    body = _body()
    emoji = body.index("😀".encode())
    line = body.index(b"data: ", 10)
    obj = body.index(b'"delta"', 10)
    event_end = body.index(b"\n\n")
    cjk = body.index("界".encode())
    return [line + 3, obj + 4, event_end + 1, cjk + 1, emoji + 1, emoji + 3]


@pytest.mark.parametrize("split", [1, 2, 7, 64, "targeted"])
def test_chunk_boundaries_anywhere(wire: WireServer, provider: OpenAIProvider, drain: Drain, split: int | str) -> None:
    """Cut inside an SSE line, a JSON object, between the two newlines ending an event and
    inside multi-byte UTF-8 characters: the reply must come out whole and unchanged."""
    cuts = _offsets() if split == "targeted" else split
    body = _body()
    if split == "targeted":  # the cuts really fall inside multi-byte characters
        assert all(body[c] & 0xC0 == 0x80 for c in cuts[-3:])
    wire.script(sse_response(oa_text_stream(*TRICKY.split(" "), usage=(9, 8, 0)), split=cuts))  # type: ignore[arg-type]
    result = drain(provider, HELLO)
    assert result.text == TRICKY.replace(" ", "")
    assert result.completion.message.content == TRICKY.replace(" ", "")
    assert result.completion.usage == Usage(9, 8, 0)


def test_crlf_line_endings_and_comments(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    # sse-starlette servers (vLLM, llama-cpp-python) end lines with CRLF; OpenRouter sends comments.
    events = [": OPENROUTER PROCESSING\n\n"] + [e.replace("\n", "\r\n") for e in oa_text_stream("a", "b")]
    wire.script(sse_response(events, split=3))
    assert drain(provider, HELLO).completion.message.content == "ab"


@pytest.mark.parametrize("split", [None, 5])
def test_tool_call_deltas_are_assembled(
    wire: WireServer, provider: OpenAIProvider, drain: Drain, split: int | None
) -> None:
    wire.script(
        sse_response(
            oa_tool_stream(
                [
                    ("call_Oslo1", "get_weather", ['{"ci', 'ty": "Os', 'lo"}']),
                    ("call_Lima2", "get_weather", ['{"city"', ': "Lima"}']),
                ],
                text="Checking both.",
            ),
            split=split,
        )
    )
    chat = ChatRequest("gpt-4o-mini", (Message.user("Oslo and Lima?"),), (WEATHER,))
    completion = drain(provider, chat).completion
    assert completion.finish_reason == "tool_calls"
    assert completion.message == Message.assistant(
        "Checking both.",
        [
            ToolCall("call_Oslo1", "get_weather", '{"city": "Oslo"}'),
            ToolCall("call_Lima2", "get_weather", '{"city": "Lima"}'),
        ],
    )
    arguments = [c.parsed_arguments() for c in completion.message.tool_calls]
    assert arguments == [{"city": "Oslo"}, {"city": "Lima"}]
    assert completion.usage == Usage(80, 20, 0)


def test_servers_that_repeat_id_and_name_in_every_fragment(
    wire: WireServer, provider: OpenAIProvider, drain: Drain
) -> None:
    fragment = {"index": 0, "id": "call_x", "type": "function", "function": {"name": "f", "arguments": ""}}
    wire.script(
        sse_response(
            [
                oa_chunk({"role": "assistant", "tool_calls": [fragment]}),
                oa_chunk({"tool_calls": [{**fragment, "function": {"name": "f", "arguments": '{"a": 1}'}}]}),
                oa_chunk({}, "tool_calls"),
                OA_DONE,
            ]
        )
    )
    assert drain(provider, HELLO).completion.message.tool_calls == (ToolCall("call_x", "f", '{"a": 1}'),)


# -- failures in the stream ---------------------------------------------------------------------------


def test_a_stream_without_done_is_interrupted(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    wire.script(sse_response(oa_text_stream("Hello", " there", done=False)))  # body ends cleanly, no [DONE]
    result = drain(provider, HELLO)
    assert isinstance(result.error, StreamInterrupted) and "[DONE]" in str(result.error)
    assert result.text == "Hello there"
    assert not any(e.__class__.__name__ == "Completion" for e in result.events)


def test_a_connection_dropped_mid_stream_is_interrupted(
    wire: WireServer, provider: OpenAIProvider, drain: Drain
) -> None:
    wire.script(sse_response(oa_text_stream("Hello", " there")[:2], finish=False, then=[DROP]))
    result = drain(provider, HELLO)
    assert isinstance(result.error, StreamInterrupted) and "dropped" in str(result.error)
    assert result.text == "Hello"
    assert len(wire.requests) == 1  # a reply that had begun is never silently sent again


def test_a_cut_in_the_middle_of_an_event_is_interrupted(
    wire: WireServer, provider: OpenAIProvider, drain: Drain
) -> None:
    body = "".join(oa_text_stream("Hello", " world"))
    wire.script(sse_response([body[: len(body) // 2]], finish=False, then=[DROP]))
    assert isinstance(drain(provider, HELLO).error, StreamInterrupted)


def test_malformed_json_in_an_event(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    events = oa_text_stream("Hello", " world")
    events.insert(2, 'data: {"id": "chatcmpl-1", "choices": [{"delta": {"content": "oops"\n\n')
    wire.script(sse_response(events))
    result = drain(provider, HELLO)
    assert isinstance(result.error, MalformedReply) and "not valid JSON" in str(result.error)


def test_an_error_chunk_mid_stream(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    wire.script(sse_response([*oa_text_stream("Hel")[:2], f"data: {json.dumps(error)}\n\n"]))
    result = drain(provider, HELLO)
    assert isinstance(result.error, ProviderHTTPError) and result.error.error_type == "server_error"
    assert "in the middle of the reply" in str(result.error)


def test_a_json_answer_instead_of_a_stream(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    wire.script(json_response(200, {"object": "chat.completion", "choices": []}))
    result = drain(provider, HELLO)
    assert isinstance(result.error, MalformedReply) and "application/json" in str(result.error)


# -- HTTP errors and retries ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            {
                "error": {
                    "message": "Invalid value for 'temperature': must be <= 2.",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "invalid_value",
                }
            },
            "invalid_value",
        ),
        (
            401,
            {
                "error": {
                    "message": f"Incorrect API key provided: {PLANTED_OPENAI_KEY}. You can find your "
                    "API key at https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            "invalid_api_key",
        ),
        (
            404,
            {
                "error": {
                    "message": "The model `gpt-9` does not exist or you do not have access to it.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "model_not_found",
                }
            },
            "model_not_found",
        ),
    ],
)
def test_client_errors_are_not_retried(
    wire: WireServer, provider: OpenAIProvider, drain: Drain, status: int, body: dict, kind: str
) -> None:  # type: ignore[type-arg]
    wire.script(json_response(status, body), sse_response(oa_text_stream("never")))
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and not isinstance(error, RateLimited)
    assert (error.status, error.error_type) == (status, kind)
    message = str(error)
    assert f"HTTP {status}" in message and "\n" not in message
    assert PLANTED_OPENAI_KEY not in message  # the server echoed the key; it was redacted
    assert len(wire.requests) == 1


def test_500_then_success(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    wire.script(
        json_response(500, {"error": {"message": "The server had an error", "type": "server_error"}}),
        json_response(503, {"error": {"message": "Slow down", "type": "server_error"}}),
        sse_response(oa_text_stream("Recovered")),
    )
    assert drain(provider, HELLO).completion.message.content == "Recovered"
    assert len(wire.requests) == 3


def test_429_honours_retry_after_then_succeeds(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    limited = {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini on requests per min (RPM)",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    wire.script(
        json_response(429, limited, {"retry-after-ms": "300", "retry-after": "1"}), sse_response(oa_text_stream("OK"))
    )
    started = time.monotonic()
    assert drain(provider, HELLO).completion.message.content == "OK"
    assert time.monotonic() - started >= 0.3  # backoff_base is 1 ms: the wait was the server's
    assert len(wire.requests) == 2


def test_retries_are_bounded(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = OpenAIProvider(settings.replace(max_retries=2))
    busy = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    wire.script(*[json_response(429, busy)] * 3, sse_response(oa_text_stream("too late")))
    error = drain(provider, HELLO).error
    assert isinstance(error, RateLimited) and "gave up after 2 retries" in str(error)
    assert len(wire.requests) == 3


def test_a_long_retry_after_is_reported_not_waited(wire: WireServer, provider: OpenAIProvider, drain: Drain) -> None:
    quota = {"error": {"message": "quota", "type": "requests"}}
    wire.script(json_response(429, quota, {"retry-after": "3600"}))
    error = drain(provider, HELLO).error
    assert isinstance(error, RateLimited) and "3600 s" in str(error)
    assert len(wire.requests) == 1


BAD_GATEWAY = (
    "<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title>\n<style>body { font: 14px sans-serif }</style>"
    "</head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx/1.25.3</center>\n"
    + "<!-- a comment padding the page out -->\n" * 40
    + "</body>\n</html>\n"
)


def html_response(status: int, page: str) -> list[Any]:
    data = page.encode()
    return [head(status, {"content-length": str(len(data))}, chunked=False, content_type="text/html") + data]


def test_an_html_error_page_is_its_status_and_title(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    """A proxy's 502 page was copied into the line, markup and all."""
    provider = OpenAIProvider(settings.replace(max_retries=1))
    wire.script(*[html_response(502, BAD_GATEWAY)] * 2)
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and error.status == 502
    assert str(error).endswith("failed (HTTP 502): an error page: 502 Bad Gateway; gave up after 1 retry")
    assert "<" not in str(error) and len(str(error)) < 200


def test_429_out_of_quota_is_not_retried_and_says_to_check_billing(
    wire: WireServer, provider: OpenAIProvider, drain: Drain
) -> None:
    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    wire.script(*[json_response(429, quota)] * 4)
    error = drain(provider, HELLO).error
    assert isinstance(error, RateLimited) and error.error_type == "insufficient_quota"
    assert str(error).endswith("not retried: the account has no quota or credit left; check its plan and billing")
    assert len(wire.requests) == 1


def test_a_server_echoing_another_key_of_the_environment_is_redacted(
    wire: WireServer, provider: OpenAIProvider, drain: Drain, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "sk-ant-planted-0123456789abcdefghij"
    monkeypatch.setenv("ANTHROPIC_API_KEY", other)
    body = {"error": {"message": f"keys seen: {other}", "type": "invalid_request_error", "code": "bad"}}
    wire.script(json_response(400, body))
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and other not in str(error) and "[redacted]" in str(error)


# -- timeouts and connections ---------------------------------------------------------------------------


def test_a_slow_server_trips_the_read_timeout(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = OpenAIProvider(settings.replace(read_timeout=1.0))  # far under the 5 s pause
    wire.script(sse_response(oa_text_stream("Hel", "lo")[:2], finish=False, then=[Pause(5)]))
    result = drain(provider, HELLO)  # without the timeout: the body ends unfinished after 5 s, another error
    assert isinstance(result.error, ProviderTimeout) and "read_timeout" in str(result.error)
    assert "middle of the reply" in str(result.error)
    assert len(wire.requests) == 1  # a timeout is not retried


def test_a_server_that_never_answers(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = OpenAIProvider(settings.replace(read_timeout=1.0))  # far under the 5 s pause
    wire.script([Pause(5)])
    result = drain(provider, HELLO)
    assert isinstance(result.error, ProviderTimeout) and "waiting for the reply to start" in str(result.error)


def test_nothing_listening(settings: ProviderSettings, drain: Drain) -> None:
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAIProvider(settings.replace(openai_base_url=f"http://127.0.0.1:{port}/v1"))
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderConnectionError)
    assert f"http://127.0.0.1:{port}/v1" in str(error) and "running" in str(error)
