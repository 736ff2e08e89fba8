"""Real providers through ``Session``: turns stored with usage and cost, failures that leave the
slot exactly as it was, tool calls that survive a round trip (and a change of provider), and
settings that take effect at the next turn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Reply, Session, Usage
from slotmagic._errors import (
    ConfigError,
    MalformedReply,
    MissingAPIKey,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from slotmagic.providers import ProviderSettings

from .wire_server import (
    DROP,
    OA_DONE,
    Pause,
    WireServer,
    an_start,
    an_stop,
    an_text_stream,
    an_tool_block,
    json_response,
    oa_chunk,
    oa_text_stream,
    oa_tool_stream,
    oa_usage,
    sse_response,
)

Turn = Callable[..., Reply]


@pytest.fixture
def session(db_path: Path, settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("wire", db_path=db_path, model="openai:gpt-4o-mini", settings=settings) as s:
        yield s


@pytest.fixture(params=["sync", "async"])
def turn(request: pytest.FixtureRequest) -> Turn:
    """Run one turn with ``submit_turn`` or ``asubmit_turn`` (each test runs with both)."""
    if request.param == "sync":
        return lambda session, text, **options: session.submit_turn(text, **options)
    return lambda session, text, **options: asyncio.run(session.asubmit_turn(text, **options))


def test_a_turn_is_stored_with_usage_and_cost(wire: WireServer, session: Session, turn: Turn) -> None:
    session.settings = session.settings.replace(prices={"openai:gpt-4o-mini": (1.0, 2.0)})
    wire.script(sse_response(oa_text_stream("Hello", " there", usage=(1000, 500, 200))))
    reply = turn(session, "Hi")
    assert reply.text == "Hello there" and reply.model == "openai:gpt-4o-mini"
    assert reply.cost == pytest.approx(0.002)  # 1000 in at $1/M + 500 out at $2/M
    assert session.messages() == [Message.user("Hi"), Message.assistant("Hello there")]
    info = session.history.turns()[-1].info
    assert info.usage == Usage(1000, 500, 200)
    assert info.cost == pytest.approx(0.002) and info.finish_reason == "stop"
    assert session.usage.input_tokens == 1000


def test_anthropic_turn_with_builtin_price(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(an_text_stream("Bonjour", input_tokens=2_000_000, output_tokens=1_000_000)))
    reply = turn(session, "Salut", model="anthropic:claude-haiku-4-5", system="Answer in French.")
    assert reply.text == "Bonjour" and reply.cost == pytest.approx(2 * 1.0 + 1 * 5.0)
    # The system side is marked for Anthropic's prompt cache (prompt_cache is on by default).
    cached = {"type": "text", "text": "Answer in French.", "cache_control": {"type": "ephemeral"}}
    assert wire.requests[-1].json()["system"] == [cached]


def test_a_model_without_a_price_has_no_cost(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(oa_text_stream("hi")))
    reply = turn(session, "Hi", model="openai:my-local-model")
    assert reply.cost is None and session.history.turns()[-1].info.cost is None


def test_ollama_turns_are_free(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(oa_text_stream("local")))
    assert turn(session, "Hi", model="ollama:llama3.2").cost == 0.0
    assert wire.requests[-1].json()["model"] == "llama3.2"


def test_params_pass_through_from_the_session(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(oa_text_stream("ok")))
    turn(session, "Hi", temperature=0.1, max_tokens=20, params={"response_format": {"type": "json_object"}})
    body = wire.requests[-1].json()
    assert (body["temperature"], body["max_tokens"]) == (0.1, 20)
    assert body["response_format"] == {"type": "json_object"}


def test_tool_calls_round_trip_and_survive_a_change_of_provider(wire: WireServer, session: Session, turn: Turn) -> None:
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return {"Oslo": "-3 C", "Lima": "19 C"}[city]

    session.tools.add(get_weather)
    wire.script(
        sse_response(oa_tool_stream([("call_A", "get_weather", ['{"city":', ' "Oslo"}'])])),
        sse_response(oa_text_stream("Cold.")),
    )
    reply = turn(session, "Weather in Oslo?")
    assert reply.text == "Cold." and [s.result for s in reply.steps] == ["-3 C"]
    first, second = (r.json() for r in wire.requests[-2:])
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert second["messages"][2] == {"role": "tool", "tool_call_id": "call_A", "content": "-3 C"}
    assert [m.role for m in session.messages()] == ["user", "assistant", "tool", "assistant"]

    # The same history sent to Anthropic: OpenAI's call becomes tool_use/tool_result blocks.
    wire.script(
        sse_response(
            [an_start(), *an_tool_block(0, "toolu_B", "get_weather", '{"city": "Lima"}'), *an_stop("tool_use")]
        ),
        sse_response(an_text_stream("Mild.")),
    )
    reply = turn(session, "Lima too?", model="anthropic:claude-sonnet-4-5")
    assert reply.text == "Mild."
    sent = wire.requests[-2].json()["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_A", "name": "get_weather", "input": {"city": "Oslo"}}],
    }
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_A", "content": "-3 C"}
    assert [m.tool_calls[0].id for m in session.messages() if m.tool_calls] == ["call_A", "toolu_B"]


def test_a_call_to_a_tool_not_offered_is_answered_not_run(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(oa_tool_stream([("call_A", "get_weather", ['{"city": "Oslo"}'])])))
    reply = turn(session, "Weather in Oslo?")
    assert "tools" not in wire.requests[-1].json()  # none offered
    stored = session.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert stored[2].is_error and "not run: no tools were offered" in stored[2].content
    assert reply.message.tool_calls[0].id == "call_A"


# -- failures leave the slot unchanged -------------------------------------------------------------------

BUSY = {"error": {"message": "The server is overloaded", "type": "server_error"}}

FAILURES: dict[str, tuple[list[list[Any]], type[ProviderError]]] = {
    "no [DONE]": ([sse_response(oa_text_stream("partial", done=False))], StreamInterrupted),
    "dropped mid-stream": ([sse_response(oa_text_stream("partial")[:2], finish=False, then=[DROP])], StreamInterrupted),
    "malformed JSON": ([sse_response([*oa_text_stream("x")[:2], "data: {nope\n\n", OA_DONE])], MalformedReply),
    "error chunk": ([sse_response([*oa_text_stream("x")[:2], f"data: {json.dumps(BUSY)}\n\n"])], ProviderHTTPError),
    "400": ([json_response(400, {"error": {"message": "bad", "type": "invalid_request_error"}})], ProviderHTTPError),
    "5xx every time": ([json_response(503, BUSY)] * 4, ProviderHTTPError),
    "429 every time": ([json_response(429, BUSY)] * 4, RateLimited),
    "read timeout": ([sse_response(oa_text_stream("slow")[:2], finish=False, then=[Pause(5)])], ProviderTimeout),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_turn_leaves_the_slot_unchanged(wire: WireServer, session: Session, turn: Turn, failure: str) -> None:
    wire.script(sse_response(oa_text_stream("first answer")))
    turn(session, "first question")
    before_messages, before_turns, before_usage = session.messages(), session.history.turns(), session.usage

    responses, error_class = FAILURES[failure]
    relaxed = session.settings
    if error_class is ProviderTimeout:  # only a timeout waits on the clock: the other turns never do
        session.settings = relaxed.replace(read_timeout=0.3)
    wire.script(*responses)
    with pytest.raises(error_class) as caught:
        turn(session, "second question")
    session.settings = relaxed
    assert session.messages() == before_messages
    assert [t.number for t in session.history.turns()] == [t.number for t in before_turns]
    assert session.usage == before_usage
    assert "\n" not in str(caught.value)

    wire.script(sse_response(oa_text_stream("second answer")))  # and the session still works
    assert turn(session, "second question").text == "second answer"
    assert len(session.messages()) == 4


def test_a_missing_key_is_one_line_and_stores_nothing(session: Session, turn: Turn) -> None:
    session.settings = ProviderSettings()  # official endpoints, no keys anywhere
    with pytest.raises(MissingAPIKey) as caught:
        turn(session, "Hi", model="anthropic:claude-sonnet-4-5")
    assert str(caught.value).count("ANTHROPIC_API_KEY") == 1 and "\n" not in str(caught.value)
    assert session.messages() == []


def test_an_unreachable_server_stores_nothing(session: Session, turn: Turn, wire: WireServer) -> None:
    url = wire.url
    wire.close()  # nothing listens there any more
    session.settings = session.settings.replace(openai_base_url=url + "/v1")
    with pytest.raises(ProviderConnectionError):
        turn(session, "Hi")
    assert session.messages() == []


# -- settings --------------------------------------------------------------------------------------------


def test_new_settings_take_effect_at_the_next_turn(wire: WireServer, session: Session, turn: Turn) -> None:
    wire.script(sse_response(oa_text_stream("from the first server")))
    turn(session, "one")
    other = WireServer()
    try:
        other.script(sse_response(oa_text_stream("from the second server")))
        session.settings = session.settings.replace(
            openai_base_url=other.url + "/v1", openai_api_key="sk-test-rotated-key"
        )
        assert turn(session, "two").text == "from the second server"
        assert other.requests[-1].headers["authorization"] == "Bearer sk-test-rotated-key"
        assert len(wire.requests) == 1
    finally:
        other.close()


def test_keys_fall_back_to_the_environment_at_request_time(
    wire: WireServer, session: Session, turn: Turn, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.settings = session.settings.replace(openai_api_key=None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-from-env")
    wire.script(sse_response(oa_text_stream("ok")))
    turn(session, "Hi")
    assert wire.requests[-1].headers["authorization"] == "Bearer sk-test-from-env"


def test_settings_must_be_provider_settings(session: Session) -> None:
    with pytest.raises(ConfigError):
        session.settings = {"read_timeout": 3}  # type: ignore[assignment]


def test_the_default_settings(db_path: Path) -> None:
    with Session.open("plain", db_path=db_path) as session:
        assert session.settings == ProviderSettings()
        assert (session.settings.connect_timeout, session.settings.read_timeout) == (10.0, 120.0)
        assert session.settings.max_retries == 3


def test_usage_chunks_arriving_mid_stream_are_kept(wire: WireServer, session: Session, turn: Turn) -> None:
    # Some servers send usage on a chunk that still has choices; the last report wins.
    wire.script(
        sse_response(
            [
                oa_chunk({"content": "a"}, usage=oa_usage(1, 1)),
                oa_chunk({"content": "b"}, "stop", usage=oa_usage(7, 2)),
                OA_DONE,
            ]
        )
    )
    assert turn(session, "Hi").usage.input_tokens == 7
