"""The pure core: messages, slot ids, budgets and the focused filter."""

from __future__ import annotations

import pytest

from slotmagic import ContextBudget, FocusedConfig, InvalidSlotId, Message, SlotConfig, SlotMode, ToolCall
from slotmagic._core import estimate_message_tokens, estimate_text_tokens
from slotmagic._core.slots import DeriveStrategy, validate_slot_id
from slotmagic._engine.view.inputs import Counting
from slotmagic._engine.view.pipeline import SUMMARY_PREFIX, assemble
from slotmagic._errors import ConfigError
from slotmagic._store.base import History
from slotmagic.tokens import TokenCounter


def convo(n: int) -> list[Message]:
    """A system prompt then n alternating user/assistant messages u0, a1, u2, ..."""
    out = [Message.system("be brief")]
    for i in range(n):
        out.append(Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}"))
    return out


# -- slot ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("good", ["default", "a", "A-b_c.1", "x" * 64, "2024.draft"])
def test_valid_slot_ids(good: str) -> None:
    assert validate_slot_id(good) == good


@pytest.mark.parametrize("bad", ["", "x" * 65, "a:b", "has space", "slash/y", "ünï", "tab\t", None, 3])
def test_invalid_slot_ids_are_refused_with_the_rule(bad: object) -> None:
    with pytest.raises(InvalidSlotId) as info:
        validate_slot_id(bad)
    assert "1-64 letters, digits" in str(info.value)
    assert isinstance(info.value, ValueError)


# -- messages ------------------------------------------------------------------------------


def test_message_roundtrip_through_dict_keeps_tool_fields() -> None:
    call = ToolCall("call_1", "search", '{"q": "deposit"}')
    messages = [
        Message.assistant("", [call]),
        Message.tool("call_1", "3 results", name="search"),
        Message.user("thanks"),
    ]
    for message in messages:
        assert Message.from_dict(message.to_dict()) == message
    assert call.parsed_arguments() == {"q": "deposit"}
    assert Message.user("x").extra() is None


def test_message_rejects_unknown_role_and_orphan_tool_message() -> None:
    with pytest.raises(ValueError, match="unknown message role"):
        Message("robot", "hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_call_id"):
        Message("tool", "result")


def test_tokens_do_not_take_part_in_equality() -> None:
    assert Message.user("hi").with_tokens(7) == Message.user("hi")


def test_token_estimate() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("abcd") == 1
    assert estimate_text_tokens("abcde") == 2
    assert estimate_text_tokens("你好") == 2  # one per non-ASCII character
    assert estimate_message_tokens(Message.user("abcd")) == 5  # + per-message overhead
    with_call = Message.assistant("", [ToolCall("c1", "lookup", '{"k": 1}')])
    assert estimate_message_tokens(with_call) > estimate_message_tokens(Message.assistant(""))


# -- budgets -------------------------------------------------------------------------------


def test_default_budget_is_the_seed_split() -> None:
    budget = ContextBudget()
    assert (budget.system, budget.history, budget.tools, budget.tool_results, budget.reserve) == (
        8_000,
        80_000,
        10_000,
        20_000,
        10_000,
    )
    assert ContextBudget.auto(128_000) == budget


@pytest.mark.parametrize("window", [4_096, 8_192, 32_000, 200_000, 1_000_000, 1_000_003])
def test_auto_budget_keeps_ratios_and_adds_up(window: int) -> None:
    budget = ContextBudget.auto(window)
    assert budget.total == window
    assert budget.system == window * 8_000 // 128_000
    assert budget.tools == window * 10_000 // 128_000
    assert budget.tool_results == window * 20_000 // 128_000
    assert abs(budget.history - window * 80_000 / 128_000) < 5


@pytest.mark.parametrize("window", [0, -1, 1.5])
def test_auto_budget_refuses_nonsense(window: object) -> None:
    with pytest.raises(ValueError, match="positive number"):
        ContextBudget.auto(window)  # type: ignore[arg-type]


def test_budget_roundtrip() -> None:
    budget = ContextBudget.auto(32_000)
    assert ContextBudget.from_dict(budget.to_dict()) == budget


# -- the focused filter (seed cases: recent N, summary, zero) ------------------------------


def slot_view(messages: list[Message], config: SlotConfig) -> list[Message]:
    """The mode step of the view pipeline over a history held in memory."""
    counting = Counting(TokenCounter.for_model("echo"))
    return list(assemble("s", config, History.of(messages), None, counting, ContextBudget()).messages)


def focused_view(messages: list[Message], focused: FocusedConfig) -> list[Message]:
    return slot_view(messages, SlotConfig(mode=SlotMode.FOCUSED, focused=focused))


def test_focused_recent_messages_keeps_system_and_last_n() -> None:
    view = focused_view(convo(6), FocusedConfig(keep_system=True, recent_messages=3))
    assert [m.content for m in view] == ["be brief", "a3", "u4", "a5"]


def test_focused_without_system() -> None:
    view = focused_view(convo(6), FocusedConfig(keep_system=False, recent_messages=2))
    assert [m.content for m in view] == ["u4", "a5"]


def test_focused_keeps_only_the_first_system_message() -> None:
    messages = [*convo(2), Message.system("late note"), Message.user("u2")]
    view = focused_view(messages, FocusedConfig(recent_messages=10))
    assert [m.content for m in view] == ["be brief", "u0", "a1", "u2"]


def test_focused_summary_override_comes_after_system_before_recent() -> None:
    view = focused_view(convo(6), FocusedConfig(recent_messages=2, summary_override="tenant owes nothing"))
    assert [m.role for m in view] == ["system", "system", "user", "assistant"]
    assert view[1].content == SUMMARY_PREFIX + "tenant owes nothing"


def test_focused_zero_messages() -> None:
    assert focused_view(convo(6), FocusedConfig(keep_system=False, recent_messages=0)) == []
    only_system = focused_view(convo(6), FocusedConfig(keep_system=True, recent_messages=0))
    assert [m.content for m in only_system] == ["be brief"]


def test_focused_window_larger_than_history() -> None:
    assert focused_view(convo(3), FocusedConfig(recent_messages=50)) == convo(3)


def test_focused_never_orphans_a_tool_result() -> None:
    calls = [ToolCall("c1", "weather", "{}"), ToolCall("c2", "time", "{}")]
    messages = [
        Message.system("s"),
        Message.user("weather and time?"),
        Message.assistant("", calls),
        Message.tool("c1", "sunny"),
        Message.tool("c2", "noon"),
        Message.assistant("Sunny at noon."),
    ]
    # The last 2 would start on the second tool result: widen back to the call.
    view = focused_view(messages, FocusedConfig(recent_messages=2))
    assert [m.role for m in view] == ["system", "assistant", "tool", "tool", "assistant"]
    assert view[1].tool_calls == tuple(calls)
    # A window that starts right at the call is already whole.
    view = focused_view(messages, FocusedConfig(recent_messages=4))
    assert [m.role for m in view] == ["system", "assistant", "tool", "tool", "assistant"]


@pytest.mark.parametrize("recent", [1, 2, 3, 15, 16, 17, 33, 40])
def test_focused_tail_of_a_long_history_matches_the_whole_list(recent: int) -> None:
    # Tool results straddle the tail's read chunks: the widening must read further back.
    messages: list[Message] = [Message.system("s")]
    for i in range(30):
        calls = [ToolCall(f"c{i}a", "f", "{}"), ToolCall(f"c{i}b", "g", "{}")]
        messages += [Message.user(f"u{i}"), Message.assistant("", calls)]
        messages += [Message.tool(f"c{i}a", "ra"), Message.tool(f"c{i}b", "rb"), Message.assistant(f"a{i}")]
    view = focused_view(messages, FocusedConfig(recent_messages=recent))
    rest = messages[1:]
    start = len(rest) - recent
    while rest[start].role == "tool":
        start -= 1
    assert view == [messages[0], *rest[start:]]


def test_slot_view_by_mode() -> None:
    messages = convo(6)
    assert slot_view(messages, SlotConfig()) == messages
    assert slot_view(messages, SlotConfig.readonly()) == messages
    focused = SlotConfig.focused_mode(recent_messages=1, keep_system=False)
    assert [m.content for m in slot_view(messages, focused)] == ["a5"]


# -- configs -------------------------------------------------------------------------------


def test_slot_config_roundtrip_and_mode_parsing() -> None:
    config = SlotConfig(
        mode="focused",
        focused=FocusedConfig(False, 4, "so far"),  # type: ignore[arg-type]
        budget=ContextBudget.auto(16_000),
        compact=False,
        system="You are a clerk.",
    )
    assert config.mode is SlotMode.FOCUSED
    assert SlotConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="unknown slot mode 'fancy'"):
        SlotConfig(mode="fancy")  # type: ignore[arg-type]


def test_focused_config_refuses_negative_window() -> None:
    with pytest.raises(ConfigError, match="recent_messages"):
        FocusedConfig(recent_messages=-1)


def test_derive_strategy_parsing() -> None:
    assert DeriveStrategy.parse(None).kind == "full"
    assert DeriveStrategy.parse("focused").focused == FocusedConfig()
    cfg = FocusedConfig(recent_messages=2)
    assert DeriveStrategy.parse(cfg) == DeriveStrategy("focused", cfg)
    with pytest.raises(ConfigError, match="'full' or 'focused'"):
        DeriveStrategy.parse("half")
