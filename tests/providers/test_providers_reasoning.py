"""OpenAI reasoning models (o1, o3, o4, gpt-5 families): the system prompt goes as a
``developer`` message and ``max_tokens=`` as ``max_completion_tokens``, decided by the model's
name wherever it is served (Azure, a proxy, OpenRouter), and overridable by a setting."""

from __future__ import annotations

import pytest

from slotmagic._core.messages import Message
from slotmagic._errors import ConfigError
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._openai import OpenAIProvider, is_reasoning_model

from .support import Drain
from .wire_server import WireServer, oa_text_stream, sse_response

HISTORY = (Message.system("Be brief."), Message.user("Hello"))


def sent(wire: WireServer, settings: ProviderSettings, drain: Drain, chat: ChatRequest) -> dict:  # type: ignore[type-arg]
    provider = OpenAIProvider(settings)
    wire.script(sse_response(oa_text_stream("Hi.")))
    try:
        drain(provider, chat).completion  # noqa: B018
    finally:
        provider.close()
    return wire.requests[-1].json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "openai/o3", "GPT-5.1"]
)
def test_reasoning_models_behind_any_base_url(
    wire: WireServer, settings: ProviderSettings, drain: Drain, model: str
) -> None:
    body = sent(wire, settings, drain, ChatRequest(model, HISTORY, max_tokens=500))
    assert body["messages"] == [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert body["max_completion_tokens"] == 500 and "max_tokens" not in body
    assert "temperature" not in body  # they refuse any but the default; none was asked for


def test_a_temperature_the_turn_sets_is_sent(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    """Sent as asked: gpt-5.1 with reasoning off takes one, and the others answer a 400 that names it."""
    body = sent(wire, settings, drain, ChatRequest("gpt-5.1", HISTORY, temperature=0.2))
    assert body["temperature"] == 0.2


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1", "llama3.2", "Qwen/Qwen3-8B", "gpt-oss-20b"])
def test_other_models_keep_system_and_max_tokens(
    wire: WireServer, settings: ProviderSettings, drain: Drain, model: str
) -> None:
    assert not is_reasoning_model(model)
    body = sent(wire, settings, drain, ChatRequest(model, HISTORY, max_tokens=500))
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["max_tokens"] == 500 and "max_completion_tokens" not in body  # what compatible servers know


def test_the_setting_names_the_reasoning_models(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    """An Azure deployment's name says nothing of its model: the setting says it; it replaces
    the default list."""
    mine = settings.replace(openai_reasoning_models="my-reasoner, team-*")
    body = sent(wire, mine, drain, ChatRequest("team-o3-deployment", HISTORY, max_tokens=9))
    assert body["messages"][0]["role"] == "developer" and body["max_completion_tokens"] == 9
    body = sent(wire, mine, drain, ChatRequest("gpt-5", HISTORY, max_tokens=9))
    assert body["messages"][0]["role"] == "system" and body["max_tokens"] == 9


def test_none_turns_it_off(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    body = sent(wire, settings.replace(openai_reasoning_models="none"), drain, ChatRequest("o3", HISTORY))
    assert body["messages"][0]["role"] == "system"


def test_the_environment_variable_is_read_at_each_request(
    wire: WireServer, settings: ProviderSettings, drain: Drain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_REASONING_MODELS", "house-model")
    body = sent(wire, settings, drain, ChatRequest("house-model", HISTORY))
    assert body["messages"][0]["role"] == "developer"
    monkeypatch.setenv("OPENAI_REASONING_MODELS", "o3, ,o4")
    provider = OpenAIProvider(settings)
    with pytest.raises(ConfigError, match=r"^OPENAI_REASONING_MODELS must be model-name patterns") as caught:
        provider.call(ChatRequest("o3", HISTORY))
    assert "\n" not in str(caught.value)


def test_a_bad_setting_is_refused_when_made() -> None:
    with pytest.raises(ConfigError, match="openai_reasoning_models setting must be model-name patterns"):
        ProviderSettings(openai_reasoning_models="o1*,,gpt-5*")
