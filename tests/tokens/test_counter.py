"""TokenCounter: which models count exactly, how messages, tools and requests are counted, and
how estimates are counted for everyone else."""

from __future__ import annotations

import pytest

from slotmagic._core.budget import ContextBudget
from slotmagic._core.messages import Message, ToolCall
from slotmagic._core.request import ChatRequest, ToolSpec
from slotmagic._core.tokens import estimate_message_tokens, estimate_text_tokens
from slotmagic.tokens import ESTIMATE, Calibration, RequestTokens, TokenCounter, encoding_for_model, render_tools
from slotmagic.tokens import _counter as counter_module


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("openai:gpt-4o", "o200k_base"),
        ("openai:gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai:chatgpt-4o-latest", "o200k_base"),
        ("openai:gpt-4.1-nano", "o200k_base"),
        ("openai:gpt-5", "o200k_base"),
        ("openai:gpt-5.1", "o200k_base"),
        ("openai:gpt-5-mini", "o200k_base"),
        ("openai:o1", "o200k_base"),
        ("openai:o3-mini", "o200k_base"),
        ("openai:o4-mini", "o200k_base"),
        ("openai:openai/gpt-4o", "o200k_base"),  # OpenRouter's name for it
        ("openai:gpt-4", "cl100k_base"),
        ("openai:gpt-4-turbo", "cl100k_base"),
        ("openai:gpt-3.5-turbo", "cl100k_base"),
        ("openai:text-embedding-3-small", "cl100k_base"),
        ("openai:local", ESTIMATE),  # a llama.cpp server behind openai:
        ("openai:Qwen/Qwen3-8B", ESTIMATE),
        ("openai:o1x", ESTIMATE),
        ("openai:anthropic/claude-sonnet-4.5", ESTIMATE),
        ("anthropic:claude-sonnet-4-5", ESTIMATE),
        ("ollama:llama3.2", ESTIMATE),
        ("ollama:gpt-4o", ESTIMATE),  # whatever Ollama serves under that name, it is not OpenAI's
        ("echo", ESTIMATE),
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding
    counter = TokenCounter.for_model(model)
    assert counter.encoding == encoding
    assert counter.exact == (encoding != ESTIMATE)


def test_a_message_is_framing_role_content_and_name() -> None:
    counter = TokenCounter.for_model("openai:gpt-4o")
    text = counter.count_text
    assert counter.count_message(Message.user("hello")) == 3 + text("user") + text("hello") == 5
    named = Message("system", "New synergies will help drive top-line growth.", name="example_user")
    assert counter.count_message(named) == 3 + text("system") + text(named.content) + 1 + text("example_user")


def test_tool_calls_and_results() -> None:
    counter = TokenCounter.for_model("openai:gpt-4o-mini")
    text = counter.count_text
    call = Message.assistant("", [ToolCall("call_abc", "get_capital", '{"country":"France"}')])
    assert counter.count_message(call) == 2 + text("assistant to=functions.get_capital") + text('{"country":"France"}')
    # call ids are not shown to the model: they cost nothing
    longer_id = Message.assistant("", [ToolCall("call_" + "x" * 40, "get_capital", '{"country":"France"}')])
    assert counter.count_message(longer_id) == counter.count_message(call)
    result = Message.tool("call_abc", "Paris", name="get_capital")
    assert counter.count_message(result) == 3 + text("functions.get_capital to=assistant") + text("Paris")
    # a request looks the tool's name up from its call when the result does not carry it
    unnamed = Message.tool("call_abc", "Paris")
    request = ChatRequest("gpt-4o-mini", (Message.user("Capital of France?"), call, unnamed))
    named_request = ChatRequest("gpt-4o-mini", (Message.user("Capital of France?"), call, result))
    assert counter.count_request(request) == counter.count_request(named_request)
    # text beside tool calls is counted as well
    both = Message.assistant("Let me look that up.", [ToolCall("c", "get_capital", "{}")])
    assert counter.count_message(both) > counter.count_message(
        Message.assistant("", [ToolCall("c", "get_capital", "{}")])
    )


def test_reasoning_models_prime_the_reply_with_two_tokens() -> None:
    assert TokenCounter.for_model("openai:gpt-4o").priming == 3
    assert TokenCounter.for_model("openai:gpt-4").priming == 3
    assert TokenCounter.for_model("openai:o3-mini").priming == 2
    assert TokenCounter.for_model("openai:gpt-5").priming == 2
    request = ChatRequest("o3-mini", (Message.user("hello"),))
    assert TokenCounter.for_model("openai:o3-mini").count_request(request) == 5 + 2


def test_tools_render_as_a_typescript_namespace() -> None:
    tool = ToolSpec(
        "get_current_weather",
        "Get the current weather in a given location",
        {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "array", "items": {"type": "integer"}},
                "filters": {"type": "object", "properties": {"rain": {"type": "boolean"}}, "required": ["rain"]},
            },
            "required": ["location"],
        },
    )
    assert render_tools([tool, ToolSpec("ping", "")]) == (
        "namespace functions {\n\n"
        "// Get the current weather in a given location\n"
        "type get_current_weather = (_: {\n"
        "// The city and state, e.g. San Francisco, CA\n"
        "location: string,\n"
        'unit?: "celsius" | "fahrenheit",\n'
        "days?: number[],\n"
        "filters?: {\n"
        "  rain: boolean,\n"
        "},\n"
        "}) => any;\n\n"
        "type ping = () => any;\n\n"
        "} // namespace functions"
    )


def test_tools_join_the_system_message_or_open_their_own() -> None:
    counter = TokenCounter.for_model("openai:gpt-4o")
    tools = (ToolSpec("ping", "Check the server answers."),)
    assert counter.count_tools(()) == 0
    assert counter.count_tools(tools, has_system=False) == counter.count_tools(tools, has_system=True) + 4
    with_system = ChatRequest("gpt-4o", (Message.system("Be brief."), Message.user("hi")), tools)
    assert counter.breakdown(with_system).tools == counter.count_tools(tools, has_system=True)


def test_breakdown_by_category_adds_up_to_the_request() -> None:
    counter = TokenCounter.for_model("openai:gpt-4.1")
    messages = (
        Message.system("You are terse."),
        Message.user("Weather in Paris?"),
        Message.assistant("", [ToolCall("c1", "weather", '{"city":"Paris"}')]),
        Message.tool("c1", '{"temp": 21}', name="weather"),
        Message.assistant("21 degrees."),
    )
    request = ChatRequest("gpt-4.1", messages, (ToolSpec("weather", "Current weather", {"type": "object"}),))
    parts = counter.breakdown(request)
    assert parts.total == counter.count_request(request)
    assert parts.system == counter.count_message(messages[0])
    assert parts.history == sum(counter.count_message(m) for m in messages[1:3] + messages[4:])
    assert parts.tool_results == counter.count_message(messages[3])
    assert parts.priming == 3
    assert parts.to_dict()["total"] == parts.total
    report = parts.against(ContextBudget.auto(128_000), reserve=1_000)
    assert report.system.used == parts.system
    assert report.history.used == parts.history + parts.priming
    assert report.tools.used == parts.tools
    assert report.reserve.used == 1_000
    assert report.history_available == 80_000 + 20_000 - parts.system - parts.tools  # history and tool results


def test_estimates_for_models_without_an_encoding() -> None:
    counter = TokenCounter.for_model("anthropic:claude-sonnet-4-5")
    message = Message.user("Explain the small claims process in three steps.")
    assert counter.count_text(message.content) == estimate_text_tokens(message.content)
    assert counter.count_message(message) == estimate_message_tokens(message)
    tools = (ToolSpec("search", "Search the case law", {"type": "object", "properties": {"q": {"type": "string"}}}),)
    request = ChatRequest("claude-sonnet-4-5", (Message.system("Be careful."), message), tools)
    expected = (
        estimate_message_tokens(request.messages[0])
        + estimate_message_tokens(message)
        + counter.count_tools(tools, has_system=True)
        + 3
    )
    assert counter.count_request(request) == expected
    assert counter.breakdown(request) == RequestTokens(
        system=estimate_message_tokens(request.messages[0]),
        history=estimate_message_tokens(message),
        tools=counter.count_tools(tools, has_system=True),
        priming=3,
    )


def test_calibrated_scales_estimates_only() -> None:
    calibration = Calibration()
    calibration.observe("anthropic:claude-sonnet-4-5", 1_000, 1_200)
    assert TokenCounter.for_model("anthropic:claude-sonnet-4-5").calibrated(500, calibration) == 600
    assert TokenCounter.for_model("anthropic:claude-sonnet-4-5").calibrated(500, None) == 500
    calibration.observe("openai:gpt-4o", 1_000, 1_200)  # exact counts are never scaled
    assert TokenCounter.for_model("openai:gpt-4o").calibrated(500, calibration) == 500


def test_special_token_text_in_a_message_is_plain_text() -> None:
    counter = TokenCounter.for_model("openai:gpt-4o")
    assert counter.count_text("<|endoftext|>") > 1  # not the single special token, and no error


def test_a_text_counted_again_is_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A history is counted again at every turn: texts seen recently come from memory. (How fast
    # the first count is, bench/bench_tokens.py measures.)
    encoded: list[str] = []
    real = counter_module.tiktoken_counter("o200k_base")

    def recording(text: str) -> int:
        encoded.append(text)
        return real(text)

    monkeypatch.setattr(counter_module, "fast_counter", lambda encoding: recording)
    counter_module._text_counter.cache_clear()
    try:
        counter = TokenCounter("openai:gpt-4o", "o200k_base")
        message = Message.user(("The landlord kept most of the deposit for cleaning. " * 40)[:1500])
        first = counter.count_message(message)
        assert [counter.count_message(message) for _ in range(3)] == [first] * 3
        assert encoded.count(message.content) == 1
        long = "x " * 10_000  # past the size kept in memory: counted each time, nothing held
        counter.count_text(long), counter.count_text(long)
        assert encoded.count(long) == 2
    finally:
        counter_module._text_counter.cache_clear()
