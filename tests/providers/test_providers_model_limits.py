"""Model limits as data, each used for what it limits: the window a budget splits, the input
limit a request stays under (the gpt-5 family takes 272,000 input tokens of its 400,000), and
the maximum output ``max_tokens`` is held to before anything is sent — checked in the request
bodies a loopback server receives for two dozen current model names."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotmagic import Session
from slotmagic._errors import ConfigError, OverBudget
from slotmagic.providers import ProviderSettings
from slotmagic.providers._limits import model_limits
from slotmagic.providers._responses_models import RESPONSES_ONLY

from .responses_wire import text_stream as responses_text_stream
from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

# model: (window, input limit or None, maximum output), as the providers' model pages state them
MODELS = {
    "openai:gpt-5": (400_000, 272_000, 128_000),
    "openai:gpt-5-mini": (400_000, 272_000, 128_000),
    "openai:gpt-5-nano": (400_000, 272_000, 128_000),
    "openai:gpt-5.1": (400_000, 272_000, 128_000),
    "openai:gpt-5-pro": (400_000, None, 272_000),
    "openai:gpt-5.4": (1_050_000, 922_000, 128_000),
    "openai:gpt-4.1": (None, None, 32_768),
    "openai:gpt-4.1-mini": (None, None, 32_768),
    "openai:gpt-4o": (128_000, None, 16_384),
    "openai:gpt-4o-mini": (128_000, None, 16_384),
    "openai:o3": (200_000, None, 100_000),
    "openai:o3-mini": (200_000, None, 100_000),
    "openai:o4-mini": (200_000, None, 100_000),
    "openai:gpt-4-turbo": (128_000, None, 4_096),
    "openai:gpt-3.5-turbo": (16_385, None, 4_096),
    "anthropic:claude-sonnet-4-5": (200_000, None, 64_000),
    "anthropic:claude-sonnet-4-5-20250929": (200_000, None, 64_000),
    "anthropic:claude-haiku-4-5": (200_000, None, 64_000),
    "anthropic:claude-opus-4-5": (200_000, None, 64_000),
    "anthropic:claude-opus-4-1": (200_000, None, 32_000),
    "anthropic:claude-sonnet-4": (200_000, None, 64_000),
    "anthropic:claude-3-7-sonnet-latest": (200_000, None, 64_000),
    "anthropic:claude-3-5-haiku-latest": (200_000, None, 8_192),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_models_limits_and_the_budget_a_request_stays_within(tmp_path: Path, model: str) -> None:
    window, entry, output = MODELS[model]
    limits = model_limits(model)
    assert (limits.input, limits.output) == (entry, output)
    if window is not None:
        assert limits.window.tokens == window
    with Session.open("limits", db_path=tmp_path / "l.sqlite3", model=model) as session:
        budget = session.budget()
        assert budget.window == limits.window.tokens
        assert budget.report.limit <= (entry if entry is not None else limits.window.tokens)
        if entry is not None:  # the input limit is what binds: a request may hold all of it
            assert budget.report.limit > entry - 50


@pytest.mark.parametrize("model", sorted(MODELS))
def test_max_tokens_over_the_models_output_is_lowered_with_one_line(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, model: str
) -> None:
    _, _, output = MODELS[model]
    anthropic = model.startswith("anthropic:")
    responses = model.removeprefix("openai:") in RESPONSES_ONLY  # sent to /v1/responses
    if responses:
        wire.script(responses_text_stream("fine"))
    else:
        wire.script(sse_response(an_text_stream("fine") if anthropic else oa_text_stream("fine")))
    with Session.open("limits", db_path=tmp_path / "l.sqlite3", model=model, settings=settings) as session:
        reply = session.submit_turn("Hello", max_tokens=output + 1_000)
    [request] = wire.requests
    body = request.json()
    sent = body.get("max_tokens", body.get("max_completion_tokens", body.get("max_output_tokens")))
    assert sent == output
    [line] = [n for n in reply.notes if "max_tokens" in n]
    assert f"max_tokens={output + 1_000:,}" in line and f"sent max_tokens={output:,}" in line
    assert line.count("\n") == 0


def test_max_tokens_within_the_output_limit_is_sent_as_given(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    wire.script(sse_response(an_text_stream("fine")))
    with Session.open(
        "limits", db_path=tmp_path / "l.sqlite3", model="anthropic:claude-haiku-4-5", settings=settings
    ) as s:
        reply = s.submit_turn("Hello", max_tokens=64_000)  # at the limit: as given
    assert wire.requests[0].json()["max_tokens"] == 64_000
    assert not [n for n in reply.notes if "max_tokens" in n]


def test_a_max_tokens_that_leaves_no_room_is_refused_naming_it(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    with Session.open("limits", db_path=tmp_path / "l.sqlite3", model="openai:my-model", settings=settings) as s:
        s.options.context_windows = {"openai:my-model": 8_000}
        with pytest.raises(OverBudget, match=r"max_tokens=8,000 leaves no room .*lower max_tokens"):
            s.submit_turn("Hello", max_tokens=8_000)
        with pytest.raises(OverBudget, match=r"lower max_tokens \(7,990 kept for the reply\)"):
            s.submit_turn("Hello there, how are you today", max_tokens=7_990)
        assert s.messages() == []
    assert wire.requests == []


def test_gpt5_input_over_272k_is_never_sent(wire: WireServer, settings: ProviderSettings, tmp_path: Path) -> None:
    """A 280,000-token message to gpt-5 (within its 400,000 window, over its 272,000 input)."""
    with (
        Session.open("limits", db_path=tmp_path / "l.sqlite3", model="openai:gpt-5", settings=settings) as s,
        pytest.raises(OverBudget, match="the new message alone needs"),
    ):
        s.submit_turn("word " * 280_000)
    assert wire.requests == []


def test_a_reply_limit_in_params_over_the_models_output_is_refused_naming_it(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    wire.script(sse_response(oa_text_stream("fine")))
    with Session.open("limits", db_path=tmp_path / "l.sqlite3", model="openai:gpt-4o-mini", settings=settings) as s:
        with pytest.raises(ConfigError, match=r"params max_tokens=50,000 is more than openai:gpt-4o-mini .*16,384"):
            s.submit_turn("Hello", params={"max_tokens": 50_000})
        assert s.messages() == []
        s.submit_turn("Hello", params={"max_completion_tokens": 16_384})  # at the limit: as given
    [request] = wire.requests
    assert request.json()["max_completion_tokens"] == 16_384


def test_anthropics_default_reply_limit_stays_within_the_models_output(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    # The default (4,096) plus a thinking budget near the model's 64,000 would be over it.
    wire.script(sse_response(an_text_stream("fine")))
    with Session.open(
        "limits", db_path=tmp_path / "l.sqlite3", model="anthropic:claude-3-7-sonnet-latest", settings=settings
    ) as s:
        s.submit_turn("Hello", params={"thinking": {"type": "enabled", "budget_tokens": 62_000}})
    body = wire.requests[0].json()
    assert body["max_tokens"] == 64_000 and body["thinking"]["budget_tokens"] == 62_000
