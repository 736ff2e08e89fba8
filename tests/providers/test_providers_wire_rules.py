"""Every request a real API accepts: the documented wire rules (wire_rules.py) hold for any
history a slot can hold, on both wire formats, and a request that would still break one is
refused before the network in one line.

The property test makes histories with random tools, parallel calls, ids that providers reuse
or that no API takes, thinking on and off, empty and whitespace-only texts, provider
switches, focused cuts and compactions, and checks every body. The tests after it each pin
one point of issue 21."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotmagic._core.messages import Message, Thinking, ToolCall
from slotmagic._errors import RequestRefused
from slotmagic.providers import ChatRequest, ProviderSettings, ToolSpec
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._anthropic import request_body as anthropic_body
from slotmagic.providers._endpoint import Endpoint
from slotmagic.providers._openai import OpenAIProvider
from slotmagic.providers._openai import request_body as openai_body

from .support import Drain
from .wire_rules import check
from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

LOCAL = Endpoint("openai", "http://localhost:8080/v1", None)
OFFICIAL = Endpoint("openai", "https://api.openai.com/v1", "sk-x")
OLLAMA = Endpoint("ollama", "http://localhost:11434/v1", None)

TEXTS = st.sampled_from(["", " ", "\n\n", "\t \n", "Sure.", "  padded  ", "Weather in Oslo?", "ok\n"])
IDS = st.sampled_from(
    ["0", "1", "call_1", "toolu_01A", "llm_version:0", "functions.get_weather:0", "a.b/c", "", "x" * 64, "call-9"]
)
ARGUMENTS = st.sampled_from(
    ['{"city": "Oslo"}', "{}", "", "not json", "[1, 2]", '{"a": NaN}', '{"a": 1e400}', '{"a": -Infinity}',
     "3", '{"deep": ' * 50 + "1" + "}" * 50, '{"deep": ' * 300 + "1" + "}" * 300]
)  # fmt: skip
NAMES = st.sampled_from(["get_weather", "lookup", "read_namespace"])


@st.composite
def thinking_blocks(draw: st.DrawFn) -> tuple[Thinking, ...]:
    kinds = draw(st.lists(st.sampled_from(["thinking", "redacted", "openai", "block"]), max_size=3))
    made: list[Thinking] = []
    for n, kind in enumerate(kinds):
        if kind == "thinking":
            made.append(Thinking("thinking", "Let me think.", "sig" + str(n), after_calls=draw(st.integers(0, 2))))
        elif kind == "redacted":
            made.append(Thinking("redacted_thinking", data="EnCrYpTeD", after_calls=draw(st.integers(0, 1))))
        elif kind == "openai":
            made.append(Thinking("thinking", "o-series summary", provider="openai"))
        else:
            block = draw(
                st.sampled_from(
                    [
                        {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "web_search", "input": {"q": "x"}},
                        {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": []},
                        {"type": "compaction", "content": "Earlier: the user asked about Oslo."},
                        {"type": "compaction", "content": None},
                    ]
                )
            )
            text = "" if block.get("content") is None else f"[{block['type']}]"
            made.append(Thinking("block", text, data=json.dumps(block), at=draw(st.integers(0, 20))))
    return tuple(made)


@st.composite
def rounds(draw: st.DrawFn) -> list[Message]:
    """One exchange: a user text, then replies, tool calls (parallel ones too) and results, as
    a slot may hold them after provider switches, cut turns and hand-made appends."""
    out = [Message.user(draw(TEXTS))]
    for _ in range(draw(st.integers(0, 3))):
        calls = [ToolCall(draw(IDS), draw(NAMES), draw(ARGUMENTS)) for _ in range(draw(st.integers(0, 3)))]
        out.append(Message.assistant(draw(TEXTS), calls, draw(thinking_blocks())))
        for call in calls:
            answer = draw(st.sampled_from(["result", "blank", "missing", "twice", "error"]))
            if answer == "missing" or not call.id:  # a call without an id has no result to store
                continue
            text = "" if answer == "blank" else " \n" if answer == "twice" else "14 degrees"
            out.append(Message.tool(call.id, text, call.name, is_error=answer == "error"))
            if answer == "twice":
                out.append(Message.tool(call.id, "again", call.name))
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message.system(draw(TEXTS)))
    for exchange in draw(st.lists(rounds(), min_size=1, max_size=4)):
        messages += exchange
    cut = draw(st.integers(0, max(0, len(messages) - 1)))
    if draw(st.booleans()):  # a focused cut: the view starts anywhere, even between a call and its result
        messages = messages[cut:]
    elif draw(st.booleans()):  # a compaction: a summary on the system side stands for what it folded
        messages = [Message.system("Summary of the conversation so far: Oslo, 14 degrees."), *messages[cut:]]
    if draw(st.booleans()):  # a new turn; else the request ends inside a tool round
        messages.append(Message.user(draw(st.sampled_from(["And Lima?", "go on"]))))
    return messages


TOOLS = st.lists(
    st.builds(ToolSpec, NAMES, st.just("Look something up."), st.just({"type": "object", "properties": {}})),
    max_size=2,
    unique_by=lambda t: t.name,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(),
    TOOLS,
    st.sampled_from([None, {"type": "enabled", "budget_tokens": 2048}, {"type": "adaptive"}, {"type": "disabled"}]),
    st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-7", "claude-3-5-haiku-latest"]),
    st.sampled_from([None, 0.3]),
    st.booleans(),
)
def test_every_anthropic_request_keeps_the_rules(
    history: list[Message], tools: list[ToolSpec], thinking: dict | None, model: str, temperature: float | None,  # type: ignore[type-arg]
    cache: bool,
) -> None:  # fmt: skip
    params = {"thinking": thinking} if thinking else {}
    request = ChatRequest(model, tuple(history), tuple(tools), temperature, None, params, cache)
    try:
        body = anthropic_body(request)
    except RequestRefused as exc:  # only a history with nothing to say may be refused
        assert "\n" not in str(exc) and "no message" in str(exc)
        assert not any(m.content.strip() or m.tool_calls for m in history if m.role != "system")
        return
    assert check("/v1/messages", body) == []


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), TOOLS, st.sampled_from([LOCAL, OFFICIAL, OLLAMA]), st.booleans(), st.sampled_from([None, 100]))
def test_every_openai_compatible_request_keeps_the_rules(
    history: list[Message], tools: list[ToolSpec], endpoint: Endpoint, reasoning: bool, max_tokens: int | None
) -> None:
    request = ChatRequest("gpt-5.2", tuple(history), tuple(tools), None, max_tokens)
    try:
        body = openai_body(request, endpoint, reasoning=reasoning)
    except RequestRefused as exc:
        assert "\n" not in str(exc) and "no message" in str(exc)
        assert not any(m.content.strip() or m.tool_calls for m in history)
        return
    assert check("/v1/chat/completions", body) == []


# -- the points of issue 21, one by one ---------------------------------------------------------------

KIMI = [
    Message.user("Weather in Oslo?"),
    Message.assistant("", [ToolCall("0", "get_weather", '{"city": "Oslo"}')]),
    Message.tool("0", "14 degrees", "get_weather"),
    Message.assistant("14 degrees in Oslo."),
    Message.user("And Lima?"),
    Message.assistant("", [ToolCall("0", "get_weather", '{"city": "Lima"}')]),  # Kimi numbers from 0 again
    Message.tool("0", "22 degrees", "get_weather"),
    Message.assistant("22 degrees in Lima."),
    Message.user("Thanks"),
]


def test_ids_a_provider_reuses_are_unique_in_the_whole_request(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    wire.script(sse_response(an_text_stream("You're welcome.")))
    assert drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-5", tuple(KIMI))).error is None
    messages = wire.requests[0].json()["messages"]
    uses = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert len(set(uses)) == 2 and uses == results
    body = openai_body(ChatRequest("gpt-4o", tuple(KIMI)), LOCAL)
    ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    assert len(set(ids)) == 2


def test_a_whitespace_reply_is_never_sent_back(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    history = (Message.user("hi"), Message.assistant("\n\n"), Message.user("  "), Message.user("still there?"))
    wire.script(sse_response(an_text_stream("Yes.")))
    assert drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-5", history)).error is None
    assert wire.requests[0].json()["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "still there?"}]}
    ]


def test_thinking_switched_on_after_a_round_without_it_tells_that_round_as_text() -> None:
    history = (
        Message.user("Weather in Oslo?"),
        Message.assistant("", [ToolCall("toolu_01", "get_weather", '{"city": "Oslo"}')]),  # made with thinking off
        Message.tool("toolu_01", "14 degrees", "get_weather"),
    )
    params = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    tools = (ToolSpec("get_weather", "Weather."),)
    body = anthropic_body(ChatRequest("claude-sonnet-4-5", history, tools, params=params))
    assert check("/v1/messages", body) == []
    assert [b["type"] for m in body["messages"] for b in m["content"]] == ["text", "text", "text"]
    assert body["messages"][-1]["content"][0]["text"] == "[tool result get_weather: 14 degrees]"


def test_tool_blocks_without_tools_send_the_tools_with_tool_choice_none() -> None:
    history = tuple(KIMI)
    body = anthropic_body(ChatRequest("claude-sonnet-4-5", history))  # tools off for this turn
    assert body["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    body = openai_body(ChatRequest("gpt-4o", history), LOCAL)
    assert body["tool_choice"] == "none" and body["tools"][0]["function"]["name"] == "get_weather"


def test_max_tokens_is_raised_above_the_thinking_budget_and_a_contradiction_is_refused(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    params = {"thinking": {"type": "enabled", "budget_tokens": 8000}}
    body = anthropic_body(ChatRequest("claude-sonnet-4-5", (Message.user("hi"),), params=params))
    assert body["max_tokens"] == 8000 + 4096
    request = ChatRequest("claude-sonnet-4-5", (Message.user("hi"),), max_tokens=4096, params=params)
    refused = drain(AnthropicProvider(settings), request)
    assert isinstance(refused.error, RequestRefused) and not wire.requests  # refused before the network
    assert "max_tokens (4096) must be above the thinking budget (8000)" in str(refused.error)
    assert "\n" not in str(refused.error)


def test_models_that_refuse_sampling_parameters_are_not_sent_them() -> None:
    request = ChatRequest("claude-opus-4-7", (Message.user("hi"),), temperature=0.2, params={"top_k": 5})
    body = anthropic_body(request)
    assert not {"temperature", "top_k", "top_p"} & set(body)
    assert (
        anthropic_body(ChatRequest("claude-sonnet-4-5", (Message.user("hi"),), temperature=0.2))["temperature"] == 0.2
    )
    thinking = anthropic_body(
        ChatRequest(
            "claude-opus-4-7", (Message.user("hi"),), params={"thinking": {"type": "enabled", "budget_tokens": 2048}}
        )
    )
    assert thinking["thinking"] == {"type": "adaptive"}  # 4.7 takes no budget


def test_nan_and_huge_numbers_in_stored_arguments_do_not_break_a_slot(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    history = (
        Message.user("compute"),
        Message.assistant("", [ToolCall("toolu_1", "calc", '{"x": NaN, "y": 1e400, "z": -Infinity, "ok": 1.5}')]),
        Message.tool("toolu_1", "done", "calc"),
        Message.user("and now?"),
    )
    wire.script(sse_response(an_text_stream("Fine.")), sse_response(oa_text_stream("Fine.")))
    tools = (ToolSpec("calc", "Compute."),)
    assert drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-5", history, tools)).error is None
    assert drain(OpenAIProvider(settings, name="ollama"), ChatRequest("llama3.2", history, tools)).error is None
    sent = wire.requests[0].json()["messages"][1]["content"][0]["input"]
    assert sent == {"x": "NaN", "y": "1e400", "z": "-Infinity", "ok": 1.5}
    arguments = wire.requests[1].json()["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == sent


def test_ollama_gets_object_arguments_and_no_openai_reasoning_fields(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    history = (
        Message.system("Be brief."),
        Message.user("hi"),
        Message.assistant("", [ToolCall("c1", "lookup", "not json at all")]),
        Message.tool("c1", "nothing", "lookup"),
        Message.user("ok"),
    )
    wire.script(sse_response(oa_text_stream("Fine.")))
    request = ChatRequest("o3-mini-local", history, (ToolSpec("lookup", "Look up."),), max_tokens=300)
    assert drain(OpenAIProvider(settings, name="ollama"), request).error is None
    body = wire.requests[0].json()
    assert body["messages"][0]["role"] == "system" and body["max_tokens"] == 300
    assert "max_completion_tokens" not in body
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_a_request_that_would_break_a_rule_is_refused_in_one_line(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    params = {"thinking": {"type": "enabled", "budget_tokens": 100}}  # below the API's 1,024
    refused = drain(AnthropicProvider(settings), ChatRequest("claude-sonnet-4-5", (Message.user("hi"),), params=params))
    assert isinstance(refused.error, RequestRefused) and not wire.requests
    assert str(refused.error).startswith("anthropic (127.0.0.1:") and "budget_tokens" in str(refused.error)
    request = ChatRequest("claude-sonnet-4-5", (Message.user("hi"),), params={"tools": "web"})
    bad_tools = drain(AnthropicProvider(settings), request)
    assert isinstance(bad_tools.error, RequestRefused) and "params tools" in str(bad_tools.error)


@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-6", "openai:gpt-5.2", "openai:a-model-nobody-knows"])
def test_a_50k_token_message_is_not_over_budget(model: str, tmp_path: object) -> None:
    from slotmagic import Session
    from slotmagic.providers import model_window

    with Session.open("big", db_path=tmp_path / "s.db") as session:  # type: ignore[operator]
        text = "lorem ipsum dolor sit amet " * 10_000  # ~50k tokens
        view = session._engine.view(
            session.store.slot(session.session_id, "default"),
            session.store.history(session.session_id, "default"),
            model=model,
            new=Message.user(text),
        )
        assert view.report is not None
        assert view.report.history.used > 45_000
        assert not view.report.needs_compaction, (model, model_window(model))


def test_a_tool_result_supplied_by_hand_takes_the_place_of_not_run(
    tmp_path: object, wire: WireServer, settings: ProviderSettings
) -> None:
    """A turn that offered no tools got a call it could not run; the user runs the tool and
    appends its result: the next request carries that result after the call, nothing else."""
    from slotmagic import Session

    from .wire_server import oa_tool_stream

    wire.script(
        sse_response(oa_tool_stream([("call_7", "lookup", ['{"q": "rent"}'])])),
        sse_response(oa_text_stream("The rent is 900.")),
    )
    with Session.open("hand", db_path=tmp_path / "s.db", model="openai:gpt-4o-mini", settings=settings) as session:  # type: ignore[operator]
        session.submit_turn("What is the rent?", tools=[])
        call = session.messages()[-2].tool_calls[0]
        assert "not run" in session.messages()[-1].content
        session.append([Message.tool(call.id, "900 EUR a month", call.name)])
        session.submit_turn("So?", tools=[])
    sent = wire.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_7", "content": "900 EUR a month"}
    assert not any(
        "not in this conversation" in str(m.get("content")) or "not run" in str(m.get("content")) for m in sent
    )
