"""Context windows: how many tokens (prompt and reply together) a model takes.

Looked up like prices: the full model string, then the alias of a dated snapshot
(``claude-sonnet-4-5-20250929`` and ``claude-3-5-haiku-latest`` as ``claude-sonnet-4-5`` and
``claude-3-5-haiku``), then ``provider:*``. A mapping passed by the caller
(``%config SlotMagic.context_windows``) wins over the table at each step.

A model found nowhere gets :data:`DEFAULT_CONTEXT_WINDOW`, 8,192 tokens, and ``known`` is False.
The common models of hosted providers are in the table, so an unknown model is most often a
local or self-hosted one (llama.cpp's server, vLLM, LM Studio), whose served context is often
that small whatever the model could take. Guessing too small costs an earlier compaction;
guessing too large sends requests that fail, or that a local server silently truncates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from ..errors import ConfigError

__all__ = ["CONTEXT_WINDOWS", "DEFAULT_CONTEXT_WINDOW", "window_for"]

DEFAULT_CONTEXT_WINDOW = 8_192

_GPT_4_1 = 1_047_576
_CLAUDE = 200_000  # every current Claude model; Sonnet 4 / 4.5 take 1M only behind a beta header

CONTEXT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {
        # OpenAI (platform.openai.com model pages: total context, reply included)
        "openai:gpt-5": 400_000,
        "openai:gpt-5-mini": 400_000,
        "openai:gpt-5-nano": 400_000,
        "openai:gpt-5.1": 400_000,
        "openai:gpt-5-chat-latest": 128_000,
        "openai:gpt-4.1": _GPT_4_1,
        "openai:gpt-4.1-mini": _GPT_4_1,
        "openai:gpt-4.1-nano": _GPT_4_1,
        "openai:gpt-4o": 128_000,
        "openai:gpt-4o-mini": 128_000,
        "openai:chatgpt-4o": 128_000,
        "openai:o1": 200_000,
        "openai:o1-mini": 128_000,
        "openai:o1-pro": 200_000,
        "openai:o3": 200_000,
        "openai:o3-mini": 200_000,
        "openai:o3-pro": 200_000,
        "openai:o4-mini": 200_000,
        "openai:gpt-4-turbo": 128_000,
        "openai:gpt-4": 8_192,
        "openai:gpt-4-32k": 32_768,
        "openai:gpt-3.5-turbo": 16_385,
        # Anthropic
        "anthropic:claude-opus-4-5": _CLAUDE,
        "anthropic:claude-opus-4-1": _CLAUDE,
        "anthropic:claude-opus-4-0": _CLAUDE,
        "anthropic:claude-opus-4": _CLAUDE,
        "anthropic:claude-sonnet-4-5": _CLAUDE,
        "anthropic:claude-sonnet-4-0": _CLAUDE,
        "anthropic:claude-sonnet-4": _CLAUDE,
        "anthropic:claude-haiku-4-5": _CLAUDE,
        "anthropic:claude-3-7-sonnet": _CLAUDE,
        "anthropic:claude-3-5-sonnet": _CLAUDE,
        "anthropic:claude-3-5-haiku": _CLAUDE,
        "anthropic:claude-3-opus": _CLAUDE,
        "anthropic:claude-3-haiku": _CLAUDE,
        # Ollama serves every model with the server's context length, whatever the model could
        # take: 4,096 unless OLLAMA_CONTEXT_LENGTH (or a Modelfile's num_ctx) says otherwise (it
        # picks 32k or 256k by itself only on GPUs with 24 / 48 GiB or more). Its /v1 endpoint
        # cannot change it per request; a server set up for more needs a context_windows entry.
        "ollama:*": 4_096,
        # The offline test model takes anything; a small window keeps its budgets easy to reach
        # in tutorials and tests.
        "echo": 8_192,
    }
)

# "-20250929", "-2024-07-18", "-latest": the names providers publish beside an alias
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def window_for(model: str, overrides: Mapping[str, int] | None = None) -> tuple[int, bool]:
    """(context window in tokens, whether ``model`` was found) for ``provider:model``.

    ``overrides`` maps model strings (or ``provider:*``) to windows and wins over the built-in
    table; a model found in neither gets ``DEFAULT_CONTEXT_WINDOW`` and ``known=False``.
    """
    tables = (_checked(overrides) if overrides else {}, CONTEXT_WINDOWS)
    provider, sep, _ = model.partition(":")
    candidates = [model, _SNAPSHOT.sub("", model)]
    if sep:
        candidates.append(f"{provider}:*")
    for candidate in candidates:
        for table in tables:
            if candidate in table:
                return table[candidate], True
    return DEFAULT_CONTEXT_WINDOW, False


def _checked(overrides: Mapping[str, int]) -> Mapping[str, int]:
    if not isinstance(overrides, Mapping):
        raise ConfigError("context_windows must map model strings to a number of tokens, e.g. {'ollama:*': 32768}")
    for model, window in overrides.items():
        if not isinstance(model, str) or isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ConfigError(
                f"context window for {model!r} must be a positive whole number of tokens, e.g. 32768, not {window!r}"
            )
    return overrides
