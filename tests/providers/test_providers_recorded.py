"""Streams recorded from the real Anthropic API (tests/providers/recorded/, with their sources):
every block the API returned is kept in the stored message and passed back where the API takes
it, and the search results a server tool found are shown to the user."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Session
from slotmagic._core.messages import Message
from slotmagic._engine.run.loop import server_steps
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._anthropic import request_body as anthropic_body
from slotmagic.providers._endpoint import Endpoint
from slotmagic.providers._openai import request_body as openai_body

from .support import Drain
from .wire_rules import check
from .wire_server import WireServer, sse_response

RECORDED = Path(__file__).parent / "recorded"
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}


def recorded(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RECORDED / name).read_text(encoding="utf-8").splitlines()]


def stream(name: str) -> list[str]:
    return [f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in recorded(name)]


def blocks_started(name: str, kind: str) -> list[dict[str, Any]]:
    return [
        e["content_block"]
        for e in recorded(name)
        if e["type"] == "content_block_start" and e["content_block"]["type"] == kind
    ]


@pytest.mark.parametrize("split", [None, 7, 113])
def test_a_web_search_reply_keeps_its_server_blocks(
    split: int | None, wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    wire.script(sse_response(stream("anthropic-web-search.jsonl"), split=split))
    question = (Message.user("What is in the tech news today?"),)
    got = drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-0", question, params={"tools": [WEB_SEARCH]}))
    message = got.completion.message
    assert message.content.startswith("\n\nOpenAI launches ChatGPT Pulse") and message.content.endswith(
        "retail expansion."
    )
    kept = [t.block() for t in message.thinking]
    assert [b["type"] for b in kept if b] == ["server_tool_use", "web_search_tool_result"]
    assert kept[0] == {**blocks_started("anthropic-web-search.jsonl", "server_tool_use")[0],
                       "input": {"query": "tech news today September 26 2025"}}  # fmt: skip
    assert kept[1] == blocks_started("anthropic-web-search.jsonl", "web_search_tool_result")[0]  # as it came
    # what the user is shown: the search, with the titles and links it found
    (step,) = server_steps(message)
    assert step.name == "web_search" and step.arguments == 'query="tech news today September 26 2025"'
    assert (
        "Fang Junyu's Technology Weekly" in step.result
        and "<https://www.crescendo.ai/news/latest-ai-news-and-updates>" in step.result
    )
    assert got.completion.usage.input_tokens == 15665


def test_the_server_blocks_go_back_where_the_api_wants_them(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    wire.script(sse_response(stream("anthropic-web-search.jsonl")))
    question = Message.user("What is in the tech news today?")
    got = drain(
        AnthropicProvider(settings), ChatRequest("claude-sonnet-4-0", (question,), params={"tools": [WEB_SEARCH]})
    )
    stored = Message.from_dict(json.loads(json.dumps(got.completion.message.to_dict())))  # as the store keeps it
    history = (question, stored, Message.user("Tell me more about the first one."))
    body = anthropic_body(ChatRequest("claude-sonnet-4-0", history, params={"tools": [WEB_SEARCH]}))
    assert check("/v1/messages", body) == []
    reply = body["messages"][1]["content"]
    assert [b["type"] for b in reply] == ["server_tool_use", "web_search_tool_result", "text"]
    assert reply[1] == blocks_started("anthropic-web-search.jsonl", "web_search_tool_result")[0]  # byte for byte
    assert body["tools"] == [WEB_SEARCH]
    # a turn that does not offer the search tool gets what it found as text instead
    plain = anthropic_body(ChatRequest("claude-sonnet-4-0", history))
    assert check("/v1/messages", plain) == []
    told = plain["messages"][1]["content"]
    assert [b["type"] for b in told] == ["text"]  # each block's text on a line of its own, where it came
    call, found, answer = told[0]["text"].split("\n", 2)
    assert call.startswith("[web_search {") and found == "[web_search results]"
    assert "<https://www.crescendo.ai" in answer and answer.endswith(stored.content.strip())
    # and another provider sees the answer, not Anthropic's blocks
    openai = openai_body(ChatRequest("gpt-4o", history), Endpoint("openai", "http://localhost:1/v1"))
    assert openai["messages"][1] == {"role": "assistant", "content": stored.content}


def test_a_session_shows_and_stores_what_the_search_found(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    wire.script(sse_response(stream("anthropic-web-search.jsonl")), sse_response(stream("anthropic-compaction.jsonl")))
    with Session.open(
        "search", db_path=tmp_path / "s.db", model="anthropic:claude-sonnet-4-0", settings=settings
    ) as session:
        seen: list[str] = []
        stream_ = session.stream_turn("What is in the tech news today?", params={"tools": [WEB_SEARCH]})
        stream_.on_step = lambda step: seen.append(step.describe())
        for _ in stream_:
            pass
        reply = stream_.reply
        assert reply is not None and [s.name for s in reply.steps] == ["web_search"]
        assert seen and seen[0].startswith(
            'web_search(query="tech news today September 26 2025") → - The Latest AI News'
        )
        stored = session.messages()[-1]
        assert [t.block()["type"] for t in stored.thinking] == ["server_tool_use", "web_search_tool_result"]  # type: ignore[index]
        session.submit_turn("And now?", params={"tools": [WEB_SEARCH]})
        sent = wire.requests[1].json()["messages"][1]["content"]
        assert [b["type"] for b in sent][:2] == ["server_tool_use", "web_search_tool_result"]


def test_a_compaction_block_is_kept_and_passed_back(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    wire.script(sse_response(stream("anthropic-compaction.jsonl"), split=5))
    management = {
        "context_management": {
            "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]
        }
    }
    params = {**management, "betas": ["compact-2026-01-12"]}
    question = Message.user("The quick brown fox jumps over the lazy dog. Now say hello.")
    got = drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-6", (question,), params=params))
    assert wire.requests[0].headers["anthropic-beta"] == "compact-2026-01-12"
    assert "betas" not in wire.requests[0].json()
    message = got.completion.message
    assert message.content == "Hello! \U0001f44b"
    (block,) = [t.block() for t in message.thinking]
    assert block == {"type": "compaction", "content": recorded("anthropic-compaction.jsonl")[3]["delta"]["content"]}
    history = (question, message, Message.user("Thanks"))
    body = anthropic_body(ChatRequest("claude-sonnet-4-6", history, params=params))
    assert check("/v1/messages", body) == []
    assert body["messages"][1]["content"][0] == block  # first, where the API sent it
    plain = anthropic_body(ChatRequest("claude-sonnet-4-6", history))  # compaction not asked for: as text
    assert plain["messages"][1]["content"][0]["text"].startswith("[summary of the conversation before this point]")
