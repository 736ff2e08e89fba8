"""OpenAI-compatible hosts and servers of one's own: a host the model database knows by its
base URL (DeepSeek, OpenRouter, Groq, Mistral, Together) prices and sizes its models as that
host, and a guess names it; a server it does not know (vLLM, llama.cpp) is asked the context
size it serves a model with, else a conservative default is used and said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotmagic import Session, Usage
from slotmagic.providers import ProviderSettings, cost_of
from slotmagic.providers._prices import priced
from slotmagic.providers._served import UNKNOWN_SERVER_WINDOW
from slotmagic.providers._windows import DEFAULT_CONTEXT_WINDOW, model_window

from .support import PLANTED_OPENAI_KEY
from .wire_server import WireServer, json_response, oa_text_stream, sse_response

USAGE = Usage(1_000_000, 1_000_000)
HOSTS = {  # base URL, a model it serves, its price for a million tokens in and out (genai-prices)
    "DeepSeek": ("https://api.deepseek.com/v1", "deepseek-chat"),
    "OpenRouter": ("https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4.5"),
    "Groq": ("https://api.groq.com/openai/v1", "llama-3.3-70b-versatile"),
    "Mistral": ("https://api.mistral.ai/v1", "mistral-large-latest"),
    "Together": ("https://api.together.xyz/v1", "meta-llama/Llama-3.3-70B-Instruct-Turbo"),
}


def host_settings(base_url: str) -> ProviderSettings:
    return ProviderSettings(openai_api_key=PLANTED_OPENAI_KEY, openai_base_url=base_url)


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_known_host_prices_its_models(host: str) -> None:
    base_url, name = HOSTS[host]
    model = f"openai:{name}"
    assert cost_of(model, USAGE) is None  # OpenAI's own list does not have it
    cost, saved = priced(model, USAGE, host_settings(base_url))
    assert cost is not None and cost > 0 and saved == 0.0  # nothing cached
    assert cost == cost_of(model, USAGE, base_url=base_url)
    window = model_window(model, settings=host_settings(base_url))
    if host in ("DeepSeek", "OpenRouter"):  # the database gives these hosts' windows
        assert window.known and window.tokens < DEFAULT_CONTEXT_WINDOW
    else:  # a guess from the host's own models, named after the host (never asked: not a server of one's own)
        assert host.lower() in window.source and "openai" not in window.source


def test_a_guess_on_a_known_host_names_that_host() -> None:
    window = model_window("openai:some-new-model", settings=host_settings(HOSTS["Groq"][0]))
    assert not window.known and "groq" in window.source and "openai" not in window.source


def test_prices_and_windows_stay_openais_at_openai() -> None:
    settings = host_settings("https://api.openai.com/v1")
    assert priced("openai:gpt-4o-mini", USAGE, settings)[0] == cost_of("openai:gpt-4o-mini", USAGE)
    assert model_window("openai:gpt-4o-mini", settings=settings).tokens == 128_000


def test_a_vllm_server_is_asked_its_max_model_len(wire: WireServer, settings: ProviderSettings, tmp_path: Path) -> None:
    models = {
        "object": "list",
        "data": [{"id": "other", "max_model_len": 2048}, {"id": "my-llama", "max_model_len": 16_384}],
    }
    wire.served("/v1/models", json_response(200, models))
    wire.script(sse_response(oa_text_stream("Hi.")))
    with Session.open("local", db_path=tmp_path / "l.sqlite3", model="openai:my-llama", settings=settings) as session:
        budget = session.budget()
        assert (budget.window, budget.window_known) == (16_384, True)
        reply = session.submit_turn("Hello")
        assert not [n for n in reply.notes if "context window unknown" in n]
        session.budget()  # asked once, then kept
    assert [r.path for r in wire.api_requests] == ["/v1/models"]


def test_a_llama_cpp_server_is_asked_its_n_ctx(wire: WireServer, settings: ProviderSettings) -> None:
    wire.served("/props", json_response(200, {"default_generation_settings": {"n_ctx": 4_096}, "total_slots": 1}))
    window = model_window("openai:qwen2.5-7b-instruct-q4", settings=settings)
    assert (window.tokens, window.known) == (4_096, True) and "n_ctx" in window.source
    assert [r.path for r in wire.api_requests] == ["/v1/models", "/props"]  # vLLM's answer first, then llama.cpp's


def test_a_server_that_says_nothing_gets_a_small_default_said_once(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    wire.script(sse_response(oa_text_stream("Hi.")), sse_response(oa_text_stream("Hi again.")))
    with Session.open("local", db_path=tmp_path / "l.sqlite3", model="openai:mystery", settings=settings) as session:
        budget = session.budget()
        assert (budget.window, budget.window_known) == (UNKNOWN_SERVER_WINDOW, False)
        first = session.submit_turn("Hello")
        [note] = [n for n in first.notes if "context window unknown" in n]
        assert f"assuming {UNKNOWN_SERVER_WINDOW:,} tokens" in note and "starts early" in note
        assert "context_windows" in note and "\n" not in note
        assert not [n for n in session.submit_turn("Again").notes if "context window unknown" in n]
