"""Token counting: exact for OpenAI models, calibrated estimates for the rest; context windows.

    counter = TokenCounter.for_model("openai:gpt-4o")
    counter.encoding                 # "o200k_base": counts are stored per message and encoding
    counter.count_message(message)   # content, role, name, tool calls and chat-format framing
    counter.count_request(request)   # every prompt token: messages, tool definitions, priming
    counter.breakdown(request)       # the same by category: system / history / tools / tool_results

    calibration.observe("anthropic:claude-sonnet-4-5", estimated, reported)  # after each turn
    counter.calibrated(estimate, calibration)                                 # estimate -> expected

    window_for("anthropic:claude-sonnet-4-5-20250929", overrides)  # (200000, True): genai-prices data

Nothing here needs the network: OpenAI's rank files ship with slotmagic (:mod:`.encodings`), and
windows come from genai-prices' bundled data (only an Ollama server is asked for its own).
"""

from __future__ import annotations

from typing import Any

from ._calibration import Calibration
from ._counter import ESTIMATE, RequestTokens, TokenCounter, encoding_for_model, render_tools
from ._encodings import ENCODINGS, RankFileError, get_encoding
from ._images import image_tokens

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "ENCODINGS",
    "ESTIMATE",
    "Calibration",
    "RankFileError",
    "RequestTokens",
    "TokenCounter",
    "Window",
    "encoding_for_model",
    "get_encoding",
    "image_tokens",
    "model_window",
    "render_tools",
    "window_for",
]

_WINDOWS = frozenset({"DEFAULT_CONTEXT_WINDOW", "Window", "model_window", "window_for"})


def __getattr__(name: str) -> Any:
    """The window names this package always had, forwarded to :mod:`slotmagic.providers._windows`
    (a window is the provider's knowledge; counting sits below the providers)."""
    if name in _WINDOWS:
        from ..providers import _windows as windows

        return getattr(windows, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
