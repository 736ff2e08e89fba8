"""A reply of a shape the API does not send is a MalformedReply, never a raw exception: the
shapes issue 26 found, over HTTP on both wire formats, and a fuzz test of both parsers over JSON
shapes of each event type."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from httpx_sse import ServerSentEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotmagic._core.messages import Message
from slotmagic._errors import MalformedReply, ProviderError
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._anthropic_stream import EventAssembler
from slotmagic.providers._openai import ChunkAssembler, OpenAIProvider

from .support import Drain
from .wire_server import OA_DONE, WireServer, an_event, an_start, an_stop, oa_chunk, sse_response

HELLO = (Message.user("hi"),)
DEEP = '{"a":' * 5000 + "1" + "}" * 5000


def oa_raw(body: Any) -> str:
    return f"data: {json.dumps(body) if not isinstance(body, str) else body}\n\n"


def choice(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, **fields}]}


OPENAI_SHAPES = {
    "delta is a string": choice(delta="str"),
    "prompt_tokens is text": {"choices": [], "usage": {"prompt_tokens": "abc", "completion_tokens": 1}},
    "prompt_tokens is 1e999": '{"choices": [], "usage": {"prompt_tokens": 1e999, "completion_tokens": 1}}',
    "choices is a number": {"choices": 5},
    "a choice is a number": {"choices": [5]},
    "tool call index is a list": choice(delta={"tool_calls": [{"index": [0], "id": "c", "function": {"name": "f"}}]}),
    "arguments are an object": choice(
        delta={"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}
    ),
    "tool_calls is a string": choice(delta={"tool_calls": "x"}),
    "content is a number": choice(delta={"content": 5}),
    "usage is a list": {"choices": [], "usage": [1, 2]},
    "prompt_tokens_details is text": {"choices": [], "usage": {"prompt_tokens": 1, "prompt_tokens_details": "x"}},
    "function is a string": choice(delta={"tool_calls": [{"index": 0, "id": "c", "function": "f"}]}),
    "completion_tokens is negative": {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": -5}},
    "nested past the parser's limit": DEEP,
}

ANTHROPIC_SHAPES = {
    "content_block is a string": an_event("content_block_start", index=0, content_block="str"),
    "delta is a string": an_event("content_block_delta", index=0, delta="str"),
    "index is a list": an_event("content_block_start", index=[0], content_block={"type": "text", "text": ""}),
    "output_tokens is 1e999": "event: message_delta\n"
    'data: {"type": "message_delta", "usage": {"output_tokens": 1e999}}\n\n',
    "message is a number": an_event("message_start", message=5),
    "text is a number": an_event("content_block_delta", index=0, delta={"type": "text_delta", "text": 5}),
    "partial_json is an object": an_event(
        "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": {"a": 1}}
    ),
    "block type is a number": an_event("content_block_start", index=0, content_block={"type": 5}),
    "nested past the parser's limit": f"event: content_block_delta\ndata: {DEEP}\n\n",
}


@pytest.mark.parametrize("shape", OPENAI_SHAPES)
def test_malformed_openai_chunks(shape: str, wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    events = [oa_chunk({"role": "assistant", "content": "Hel"}), oa_raw(OPENAI_SHAPES[shape]), OA_DONE]
    wire.script(sse_response(events))
    got = drain(OpenAIProvider(settings), ChatRequest("gpt-4o-mini", HELLO))
    assert isinstance(got.error, MalformedReply), got.error
    assert "\n" not in str(got.error) and "partial reply was discarded" in str(got.error)


@pytest.mark.parametrize("shape", ANTHROPIC_SHAPES)
def test_malformed_anthropic_events(shape: str, wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    events = [an_start(), ANTHROPIC_SHAPES[shape], *an_stop()]
    wire.script(sse_response(events))
    got = drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-5", HELLO))
    assert isinstance(got.error, MalformedReply), got.error
    assert "\n" not in str(got.error)


# -- fuzz: any JSON where each event type has a field -----------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)

OPENAI_TEMPLATES: list[dict[str, Any]] = [
    {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2,
                              "prompt_tokens_details": {"cached_tokens": 0}}},
    {"error": {"type": "server_error", "message": "boom"}},
]  # fmt: skip

ANTHROPIC_TEMPLATES: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 3, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
    {"type": "content_block_start", "index": 2,
     "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"}},
    {"type": "content_block_start", "index": 3, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    {"type": "content_block_delta", "index": 3, "delta": {"type": "signature_delta", "signature": "s"}},
    {"type": "content_block_delta", "index": 4, "delta": {"type": "compaction_delta", "content": "sum"}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for key, item in enumerate(value):
            found += _paths(item, (*prefix, key))
    return found


@st.composite
def mutated(draw: st.DrawFn, templates: list[dict[str, Any]]) -> list[str]:
    """A few events from the templates, each with one place replaced by any JSON value."""
    events = []
    for template in draw(st.lists(st.sampled_from(templates), min_size=1, max_size=4)):
        event = copy.deepcopy(template)
        path = draw(st.sampled_from(_paths(event)[1:]))
        target = event
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = draw(JSON)
        events.append(json.dumps(event))  # NaN and Infinity too: Python's json reads them back
    return events


def _run(assembler: Any, events: list[str], final: str) -> None:
    try:
        for data in [*events, final]:
            assembler.feed(ServerSentEvent(data=data))
            if assembler.done:
                break
        assembler.finish()
    except ProviderError:
        pass  # the documented failures: malformed, interrupted, an error event


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(OPENAI_TEMPLATES))
def test_the_openai_parser_fails_only_as_documented(events: list[str]) -> None:
    _run(ChunkAssembler("openai (test)"), events, "[DONE]")


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(ANTHROPIC_TEMPLATES))
def test_the_anthropic_parser_fails_only_as_documented(events: list[str]) -> None:
    _run(EventAssembler("anthropic (test)"), events, json.dumps({"type": "message_stop"}))
