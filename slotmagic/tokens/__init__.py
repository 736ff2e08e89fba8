"""Token counting: exact for OpenAI models, calibrated estimates for the rest.

    counter = TokenCounter.for_model("openai:gpt-4o")
    counter.encoding                 # "o200k_base": counts are stored per message and encoding
    counter.count_message(message)   # content, role, name, tool calls and chat-format framing
    counter.count_request(request)   # every prompt token: messages, tool definitions, priming
    counter.breakdown(request)       # the same by category: system / history / tools / tool_results

    calibration.observe("anthropic:claude-sonnet-4-5", estimated, reported)  # after each turn
    counter.calibrated(estimate, calibration)                                 # estimate -> expected

Nothing here needs the network: OpenAI's rank files ship with slotmagic (:mod:`.encodings`). A
model's context window is its provider's knowledge: ``slotmagic.providers.window_for``.
"""

from __future__ import annotations

from ._calibration import Calibration
from ._counter import ESTIMATE, RequestTokens, TokenCounter, encoding_for_model, render_tools
from ._encodings import ENCODINGS, RankFileError, get_encoding
from ._images import image_tokens

__all__ = [
    "ENCODINGS",
    "ESTIMATE",
    "Calibration",
    "RankFileError",
    "RequestTokens",
    "TokenCounter",
    "encoding_for_model",
    "get_encoding",
    "image_tokens",
    "render_tools",
]
