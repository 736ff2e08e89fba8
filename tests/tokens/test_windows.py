"""Context windows: from the maintained data (genai-prices), dated snapshot aliases, families,
a stated default that refuses nothing, user overrides, and Ollama's own answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slotmagic._errors import ConfigError
from slotmagic.providers import DEFAULT_CONTEXT_WINDOW, model_window, window_for
from slotmagic.providers import _catalog as catalog


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4o", 128_000),
        ("openai:gpt-4o-2024-08-06", 128_000),
        ("openai:gpt-5", 400_000),
        ("openai:gpt-5.2", 400_000),  # not in the old hand-written table
        ("openai:o3", 200_000),
        ("openai:o4-mini-2025-04-16", 200_000),
        ("openai:gpt-4", 8_192),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("anthropic:claude-sonnet-4-5-20250929", 200_000),
        ("anthropic:claude-3-5-haiku-latest", 200_000),
        ("anthropic:claude-sonnet-4-6", 1_000_000),  # refused at 6k tokens with the old table
        ("anthropic:claude-opus-4-6", 1_000_000),
    ],
)
def test_known_models_come_from_the_data(model: str, window: int) -> None:
    found = model_window(model)
    assert (found.tokens, found.known) == (window, True)
    assert found.source.startswith("genai-prices")


def test_a_model_of_a_known_family_takes_the_family_s_largest_window() -> None:
    found = model_window("anthropic:claude-sonnet-4-9")
    assert found.known and found.source.endswith("the claude-sonnet-4 family")
    assert found.tokens == max(
        w for m in ("claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6") if (w := _window("anthropic", m))
    )
    assert model_window("openai:gpt-5.99").tokens >= 400_000


def test_an_unknown_model_gets_the_largest_window_of_its_provider_and_a_note() -> None:
    found = model_window("openai:my-local-llama")
    assert not found.known
    assert found.tokens == catalog.largest_window("openai") and found.tokens >= 1_000_000
    note = found.note("openai:my-local-llama")
    assert "\n" not in note and "nothing it would take is refused" in note
    assert "context_windows" in note and f"{found.tokens:,}" in note
    assert window_for("anthropic:claude-next") == (catalog.largest_window("anthropic"), False)


def test_the_offline_model_and_ollama_state_their_own() -> None:
    assert window_for("echo") == (8_192, True)
    assert window_for("ollama:llama3.2") == (4_096, True)  # without settings the server is not asked


def test_a_provider_the_data_does_not_list_gets_the_stated_default() -> None:
    assert model_window("custom:thing").tokens == DEFAULT_CONTEXT_WINDOW
    assert not model_window("custom:thing").known


def test_overrides_win_at_each_step() -> None:
    overrides = {"ollama:*": 32_768, "ollama:llama3.1": 131_072, "openai:gpt-4o": 64_000, "openai:local": 16_384}
    assert window_for("ollama:llama3.2", overrides) == (32_768, True)
    assert window_for("ollama:llama3.1", overrides) == (131_072, True)
    assert window_for("openai:gpt-4o-2024-08-06", overrides) == (64_000, True)  # via the alias
    assert window_for("openai:local", overrides) == (16_384, True)
    assert window_for("openai:gpt-4.1", overrides) == (window_for("openai:gpt-4.1")[0], True)
    assert window_for("openai:gpt-4o", {}) == (128_000, True)
    assert window_for("anthropic:claude-sonnet-4-6", {"anthropic:*": 100_000}) == (100_000, True)


@pytest.mark.parametrize("bad", [{"openai:x": 0}, {"openai:x": -1}, {"openai:x": "big"}, {"openai:x": True}, ["x"]])
def test_bad_overrides_say_how_to_fix_them(bad: object) -> None:
    with pytest.raises(ConfigError, match="context"):
        window_for("openai:x", bad)  # type: ignore[arg-type]


def test_no_window_table_is_written_by_hand() -> None:
    import slotmagic.providers as providers
    import slotmagic.providers._windows as windows

    assert not hasattr(providers, "CONTEXT_WINDOWS") and not hasattr(windows, "CONTEXT_WINDOWS")


def test_import_slotmagic_does_not_load_the_model_data() -> None:
    code = (
        "import sys, slotmagic; from slotmagic.providers import window_for; window_for('echo'); "
        "window_for('ollama:x'); print('genai_prices' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _window(provider: str, model: str) -> int | None:
    found = catalog.find_model(provider, model)
    return None if found is None else found.window
