"""Context windows: the table, dated snapshot aliases, provider wildcards and user overrides."""

from __future__ import annotations

import pytest

from slotmagic.errors import ConfigError
from slotmagic.tokens import CONTEXT_WINDOWS, DEFAULT_CONTEXT_WINDOW, window_for


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4o", 128_000),
        ("openai:gpt-4o-2024-08-06", 128_000),
        ("openai:gpt-4.1-mini", 1_047_576),
        ("openai:gpt-5", 400_000),
        ("openai:o3", 200_000),
        ("openai:o4-mini-2025-04-16", 200_000),
        ("openai:gpt-4", 8_192),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("anthropic:claude-sonnet-4-5-20250929", 200_000),
        ("anthropic:claude-3-5-haiku-latest", 200_000),
        ("anthropic:claude-opus-4-1-20250805", 200_000),
        ("ollama:llama3.2", 4_096),
        ("ollama:qwen2.5:32b", 4_096),
    ],
)
def test_known_models(model: str, window: int) -> None:
    assert window_for(model) == (window, True)


def test_unknown_models_get_the_stated_default() -> None:
    assert DEFAULT_CONTEXT_WINDOW == 8_192
    assert window_for("openai:local") == (8_192, False)
    assert window_for("anthropic:claude-next") == (8_192, False)
    assert window_for("echo") == (8_192, True)  # the offline model states its own


def test_overrides_win_at_each_step() -> None:
    overrides = {"ollama:*": 32_768, "ollama:llama3.1": 131_072, "openai:gpt-4o": 64_000, "openai:local": 16_384}
    assert window_for("ollama:llama3.2", overrides) == (32_768, True)
    assert window_for("ollama:llama3.1", overrides) == (131_072, True)
    assert window_for("openai:gpt-4o-2024-08-06", overrides) == (64_000, True)  # via the alias
    assert window_for("openai:local", overrides) == (16_384, True)
    assert window_for("openai:gpt-4.1", overrides) == (CONTEXT_WINDOWS["openai:gpt-4.1"], True)
    assert window_for("openai:gpt-4o", {}) == (128_000, True)


@pytest.mark.parametrize("bad", [{"openai:x": 0}, {"openai:x": -1}, {"openai:x": "big"}, {"openai:x": True}, ["x"]])
def test_bad_overrides_say_how_to_fix_them(bad: object) -> None:
    with pytest.raises(ConfigError, match="context"):
        window_for("openai:x", bad)  # type: ignore[arg-type]
