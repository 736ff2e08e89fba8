"""What a turn cost, from a small price table in USD per million tokens.

The built-in table holds a few common models at their published list prices when this was
written; prices change, so treat costs as estimates and extend or correct the table through
``ProviderSettings(prices={...})`` (``%config SlotMagic.prices``). A model is looked up by its
full model string, then without a dated snapshot suffix (``claude-sonnet-4-5-20250929`` is
priced as ``claude-sonnet-4-5``), then as ``provider:*``. Models found nowhere have no cost
(None), which is not the same as free; ``echo``, not being a real model, has none.

Cached input tokens are charged at the full input rate, so a cost with cache hits is an upper
bound.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from .base import Usage
from .settings import Price

BUILTIN_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        "openai:gpt-5": (1.25, 10.00),
        "openai:gpt-5-mini": (0.25, 2.00),
        "openai:gpt-5-nano": (0.05, 0.40),
        "openai:gpt-4.1": (2.00, 8.00),
        "openai:gpt-4.1-mini": (0.40, 1.60),
        "openai:gpt-4.1-nano": (0.10, 0.40),
        "openai:gpt-4o": (2.50, 10.00),
        "openai:gpt-4o-mini": (0.15, 0.60),
        "anthropic:claude-opus-4-5": (5.00, 25.00),
        "anthropic:claude-opus-4-1": (15.00, 75.00),
        "anthropic:claude-sonnet-4-5": (3.00, 15.00),
        "anthropic:claude-sonnet-4": (3.00, 15.00),
        "anthropic:claude-sonnet-4-0": (3.00, 15.00),
        "anthropic:claude-haiku-4-5": (1.00, 5.00),
        "anthropic:claude-3-5-haiku": (0.80, 4.00),
        "ollama:*": (0.0, 0.0),  # runs on your own machine
    }
)

# "-20250929", "-2024-07-18": the dated snapshots providers publish under an alias
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def price_of(model: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The (input, output) price of ``model`` per million tokens; ``prices`` wins over the
    built-in table."""
    tables = (prices or {}, BUILTIN_PRICES)
    provider, sep, _ = model.partition(":")
    candidates = [model, _SNAPSHOT.sub("", model)]
    if sep:
        candidates.append(f"{provider}:*")
    for candidate in candidates:
        for table in tables:
            if candidate in table:
                return table[candidate]
    return None


def cost_of(model: str, usage: Usage, prices: Mapping[str, Price] | None = None) -> float | None:
    """USD for ``usage`` on ``model``, or None when the model has no price."""
    price = price_of(model, prices)
    if price is None:
        return None
    per_input, per_output = price
    return (usage.input_tokens * per_input + usage.output_tokens * per_output) / 1_000_000
