"""A model's limits, each used for what it limits: the total window (prompt and reply
together, :mod:`._windows`), the most input tokens a request may hold, and the most tokens a
reply may take (``max_tokens``).

The model database (genai-prices) gives the window alone. The input and output limits the
providers document are in :data:`LIMITS`, by model family (the longest leading name that
matches, at a ``-``/``.`` boundary; an OpenAI-compatible host's ``vendor/`` prefix is read past),
each with the page that states them:

- OpenAI, https://platform.openai.com/docs/models (one page per model, "Context window" and
  "Max output tokens"); the gpt-5 family's 400,000 tokens are 272,000 of input and 128,000 of
  output (the API's error reads "Input tokens exceed the configured limit of 272,000 tokens");
- Anthropic, https://docs.anthropic.com/en/docs/about-claude/models/overview ("Max output").

A limit the table does not know is None: then the window alone bounds a request (input and
reply together), as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ._window_rules import Window
from ._windows import model_window

__all__ = ["LIMITS", "ModelLimits", "model_limits", "output_limit"]

_OPENAI = "https://platform.openai.com/docs/models"
_ANTHROPIC = "https://docs.anthropic.com/en/docs/about-claude/models/overview"

# (catalog provider, family) -> (input limit or None, output limit, the page that states them)
LIMITS: Mapping[tuple[str, str], tuple[int | None, int, str]] = {
    ("openai", "gpt-5"): (272_000, 128_000, f"{_OPENAI}/gpt-5"),
    ("openai", "gpt-5-chat"): (128_000 - 16_384, 16_384, f"{_OPENAI}/gpt-5-chat-latest"),
    ("openai", "gpt-5-pro"): (None, 272_000, f"{_OPENAI}/gpt-5-pro"),
    ("openai", "gpt-5.4"): (922_000, 128_000, f"{_OPENAI}/gpt-5.4"),
    ("openai", "gpt-4.1"): (None, 32_768, f"{_OPENAI}/gpt-4.1"),
    ("openai", "gpt-4o"): (None, 16_384, f"{_OPENAI}/gpt-4o"),
    ("openai", "gpt-4-turbo"): (None, 4_096, f"{_OPENAI}/gpt-4-turbo"),
    ("openai", "gpt-4"): (None, 8_192, f"{_OPENAI}/gpt-4"),
    ("openai", "gpt-3.5-turbo"): (None, 4_096, f"{_OPENAI}/gpt-3.5-turbo"),
    ("openai", "o1"): (None, 100_000, f"{_OPENAI}/o1"),
    ("openai", "o1-mini"): (None, 65_536, f"{_OPENAI}/o1-mini"),
    ("openai", "o3"): (None, 100_000, f"{_OPENAI}/o3"),
    ("openai", "o4-mini"): (None, 100_000, f"{_OPENAI}/o4-mini"),
    ("anthropic", "claude-opus-4-6"): (None, 128_000, _ANTHROPIC),
    ("anthropic", "claude-sonnet-4-6"): (None, 128_000, _ANTHROPIC),
    ("anthropic", "claude-opus-4-5"): (None, 64_000, _ANTHROPIC),
    ("anthropic", "claude-sonnet-4-5"): (None, 64_000, _ANTHROPIC),
    ("anthropic", "claude-haiku-4-5"): (None, 64_000, _ANTHROPIC),
    ("anthropic", "claude-sonnet-4"): (None, 64_000, _ANTHROPIC),
    ("anthropic", "claude-opus-4-1"): (None, 32_000, _ANTHROPIC),
    ("anthropic", "claude-opus-4"): (None, 32_000, _ANTHROPIC),
    ("anthropic", "claude-3-7-sonnet"): (None, 64_000, _ANTHROPIC),
    ("anthropic", "claude-3-5-sonnet"): (None, 8_192, _ANTHROPIC),
    ("anthropic", "claude-3-5-haiku"): (None, 8_192, _ANTHROPIC),
    ("anthropic", "claude-3-opus"): (None, 4_096, _ANTHROPIC),
    ("anthropic", "claude-3-haiku"): (None, 4_096, _ANTHROPIC),
}
_BOUNDARY = re.compile(r"[-.@:]")


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """A model's ``window`` (prompt and reply together), the most ``input`` tokens a request
    may hold and the most ``output`` tokens a reply may take (None: not known, the window
    bounds them), and ``source``, where the input and output limits are stated."""

    window: Window
    input: int | None = None
    output: int | None = None
    source: str | None = None
    learned: int | None = None  # a smaller window learnt from the model's own overflow error

    @property
    def budget_window(self) -> int:
        """The window a budget splits: the model's, or less when its input limit is lower than
        what the default split would let a request hold (so the request limit, the budget less
        its reply reserve, stays within the input limit), or when the model refused a request
        as too long (``learned``)."""
        found = self._split_window()
        return found if self.learned is None else max(1, min(found, self.learned))

    def _split_window(self) -> int:
        if self.input is None:
            return self.window.tokens
        from .._core.budget import ContextBudget

        budget = ContextBudget.auto(self.window.tokens)
        if budget.request_limit() <= self.input:
            return self.window.tokens
        # the largest window whose split keeps a request within the input limit
        low, high = self.input, self.window.tokens
        while low < high:
            middle = (low + high + 1) // 2
            if ContextBudget.auto(middle).request_limit() <= self.input:
                low = middle
            else:
                high = middle - 1
        return low


def _family(provider: str, name: str) -> tuple[int | None, int, str] | None:
    name = name.strip().lower().rpartition("/")[2]  # "openai/gpt-5" on OpenRouter is gpt-5
    best: tuple[int, tuple[int | None, int, str]] | None = None
    for (where, family), limits in LIMITS.items():
        if where != provider or not name.startswith(family):
            continue
        rest = name[len(family) :]
        if rest and not _BOUNDARY.match(rest):
            continue
        if best is None or len(family) > best[0]:
            best = (len(family), limits)
    return None if best is None else best[1]


@lru_cache(maxsize=256)
def _lookup(model: str) -> tuple[int | None, int, str] | None:
    """The table's (input, output, source) for ``provider:model``; a host serving another
    vendor's model by its ``vendor/`` name (``anthropic/claude-…`` on OpenRouter) is looked up
    under that vendor too."""
    provider, sep, name = model.partition(":")
    if not sep:
        return None
    from ._registry import REGISTRY

    spec = REGISTRY.get(provider)
    found = _family(spec.catalog, name) if spec is not None and spec.catalog is not None else None
    if found is None and "/" in name:
        found = _family(name.split("/", 1)[0].lower(), name)
    return found


def output_limit(model: str) -> tuple[int, str] | None:
    """(the most tokens a reply of ``model`` may take, the page that says so), or None."""
    found = _lookup(model)
    return None if found is None else (found[1], found[2])


def model_limits(
    model: str, overrides: Mapping[str, int] | None = None, settings: Any = None, *, learned: int | None = None
) -> ModelLimits:
    """The limits of ``provider:model``: its window by :func:`._windows.model_window`, its input
    and output limits from :data:`LIMITS`. A window stated in ``overrides`` is taken as the
    whole truth: the input limit is then the window's business alone. ``learned``: a window
    learnt from the model's overflow error (see :attr:`ModelLimits.learned`)."""
    window = model_window(model, overrides, settings)
    found = _lookup(model)
    if found is None:
        return ModelLimits(window, learned=learned)
    entry, output, source = found
    if window.source == "context_windows" or (entry is not None and entry >= window.tokens):
        entry = None
    return ModelLimits(window, entry, min(output, window.tokens), source, learned)
