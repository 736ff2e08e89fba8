"""Provider settings: environment fallbacks, defaults, validation, and keys kept out of reprs."""

from __future__ import annotations

import pytest

from slotmagic._errors import ConfigError, MissingAPIKey, UnknownModel
from slotmagic.providers import EchoProvider, ProviderSettings, parse_model, resolve_provider
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._openai import OpenAIProvider
from slotmagic.providers._settings import ollama_base_url, resolve_endpoint

KEY = "sk-test-PLANTED-settings-0123456789abcdef"


def test_keys_and_urls_come_from_the_environment_at_request_time(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ProviderSettings()
    with pytest.raises(MissingAPIKey):
        resolve_endpoint(settings, "openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # exported after the settings were made
    endpoint = resolve_endpoint(settings, "openai")
    assert (endpoint.base_url, endpoint.api_key) == ("https://api.openai.com/v1", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8080/v1/")
    assert resolve_endpoint(settings, "openai").base_url == "http://localhost:8080/v1"


def test_settings_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://env.example")
    settings = ProviderSettings(anthropic_api_key=KEY, anthropic_base_url="https://proxy.example")
    endpoint = resolve_endpoint(settings, "anthropic")
    assert (endpoint.base_url, endpoint.api_key) == ("https://proxy.example", KEY)


def test_empty_values_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with pytest.raises(MissingAPIKey):
        resolve_endpoint(ProviderSettings(anthropic_api_key=""), "anthropic")


@pytest.mark.parametrize(("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_a_missing_key_is_one_line_naming_the_variable(provider: str, variable: str) -> None:
    with pytest.raises(MissingAPIKey) as caught:
        resolve_endpoint(ProviderSettings(), provider)
    message = str(caught.value)
    assert variable in message and "\n" not in message


def test_a_custom_base_url_needs_no_key() -> None:
    # llama.cpp's server, vLLM and LM Studio usually run without one
    endpoint = resolve_endpoint(ProviderSettings(openai_base_url="http://127.0.0.1:8080/v1"), "openai")
    assert endpoint.api_key is None and endpoint.secrets == ()


def test_a_base_url_without_scheme_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="http"):
        resolve_endpoint(ProviderSettings(openai_base_url="localhost:8080/v1"), "openai")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://localhost:11434/v1"),
        ("", "http://localhost:11434/v1"),
        ("0.0.0.0", "http://localhost:11434/v1"),
        ("127.0.0.1:9999", "http://127.0.0.1:9999/v1"),
        ("http://gpu-box:11434", "http://gpu-box:11434/v1"),
        ("https://ollama.example.org", "https://ollama.example.org:443/v1"),
        ("http://[::1]:11434/", "http://[::1]:11434/v1"),
    ],
)
def test_ollama_host_forms(host: str | None, url: str) -> None:
    assert ollama_base_url(host) == url


def test_ollama_needs_no_key_and_reads_ollama_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    endpoint = resolve_endpoint(ProviderSettings(), "ollama")
    assert (endpoint.base_url, endpoint.api_key) == ("http://10.0.0.5:11434/v1", None)


def test_repr_hides_keys() -> None:
    settings = ProviderSettings(openai_api_key=KEY, anthropic_api_key=KEY)
    assert KEY not in repr(settings) and KEY not in str(settings)
    assert "openai_api_key='***'" in repr(settings)
    endpoint = resolve_endpoint(settings, "openai")
    assert KEY not in repr(endpoint)
    provider, _ = resolve_provider("openai:gpt-4o", settings)
    assert KEY not in repr(provider)


@pytest.mark.parametrize(
    "changes",
    [
        {"connect_timeout": 0},
        {"read_timeout": -1},
        {"read_timeout": float("nan")},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_base": -0.1},
        {"prices": {"openai:x": (1.0,)}},
        {"prices": {"openai:x": (-1, 2)}},
        {"prices": ["openai:x"]},
        # Values past what works: a turn's cost overflowed to infinity and the store refused
        # the turn after its reply came (SQLite: a raw "malformed JSON"); timers overflow.
        {"prices": {"echo": (1e308, 1e308)}},
        {"prices": {"echo": (float("inf"), 1.0)}},
        {"prices": {"echo": (1.0, 10**400)}},
        {"max_retries": 10**9},
        {"backoff_base": 1e308},
        {"read_timeout": 1e308},
        {"connect_timeout": 10**9},
        {"turn_timeout": 1e12},
    ],
)
def test_bad_values_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as raised:
        ProviderSettings(**changes)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


def test_the_largest_values_allowed_still_make_a_turn() -> None:
    from slotmagic import Session

    settings = ProviderSettings(
        prices={"echo": (1_000_000, 1_000_000)}, max_retries=100, backoff_base=60, read_timeout=86_400
    )
    with Session.open("big", db_path=":memory:", settings=settings) as session:
        reply = session.submit_turn("What does it cost?")
        assert reply.cost is not None and 0 < reply.cost < 1e6
        assert session.history.turns()[-1].info.cost == reply.cost


def test_replace_changes_fields_and_refuses_unknown_ones() -> None:
    settings = ProviderSettings().replace(read_timeout=30, prices={"openai:mine": [1, 2]})
    assert settings.read_timeout == 30 and settings.prices["openai:mine"] == (1.0, 2.0)
    with pytest.raises(ConfigError, match="read_timout"):
        settings.replace(read_timout=3)


@pytest.mark.parametrize(
    ("model", "cls", "name"),
    [
        ("openai:gpt-4o-mini", OpenAIProvider, "gpt-4o-mini"),
        ("ollama:llama3.2:3b", OpenAIProvider, "llama3.2:3b"),
        ("anthropic:claude-sonnet-4-5", AnthropicProvider, "claude-sonnet-4-5"),
        ("echo", EchoProvider, "echo"),
    ],
)
def test_resolve_provider(model: str, cls: type, name: str) -> None:
    provider, sent_name = resolve_provider(model, ProviderSettings())
    assert isinstance(provider, cls) and sent_name == name
    provider.close()


def test_ollama_provider_is_named_ollama() -> None:
    provider, _ = resolve_provider("ollama:qwen3", None)
    assert provider.name == "ollama"


@pytest.mark.parametrize("model", ["gpt-4o", "mistral:large", "openai:"])
def test_unknown_models_say_what_to_write(model: str) -> None:
    with pytest.raises(UnknownModel) as caught:
        resolve_provider(model)
    assert "\n" not in str(caught.value)


def test_parse_model_keeps_colons_in_the_model_name() -> None:
    assert parse_model("ollama:llama3.2:3b") == ("ollama", "llama3.2:3b")


def test_credentials_in_a_base_url_are_never_shown() -> None:
    settings = ProviderSettings(openai_base_url="https://user:url-password-123@proxy.example:8443/v1")
    endpoint = resolve_endpoint(settings, "openai")
    assert endpoint.host == "proxy.example:8443"
    assert endpoint.display_url == "https://proxy.example:8443/v1"
    assert "url-password-123" in endpoint.secrets  # so error text quoting it is redacted
    assert "url-password-123" not in repr(endpoint)
