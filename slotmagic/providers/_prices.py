"""What a turn cost, in USD, from a maintained price database that works offline.

Prices come from, in this order:

1. ``ProviderSettings(prices={...})`` (``%config SlotMagic.prices``): USD per million input and
   output tokens, by full model string or the alias of a dated snapshot;
2. the `genai-prices <https://pypi.org/project/genai-prices/>`_ package (maintained by pydantic):
   a price snapshot bundled in the package, read locally and never fetched (its optional
   auto-update thread is never started here). It knows OpenAI's and Anthropic's models, their
   dated snapshots, cached-input rates and long-context tiers; upgrading the package refreshes it;
3. ``provider:*`` entries, the user's first, then the provider's registration (its ``price``),
   gathered in :data:`BUILTIN_PRICES`: ``ollama:*`` is free (it runs on your machine).

No price is written here: a model the database lacks has no price until it is given one.

A model found nowhere has no cost (None), which is not the same as free; ``echo``, not being a
real model, has none. Cached input tokens are charged at the provider's cached rate when the
database knows it; :func:`cache_savings_of` says what they saved. A price given in settings has
no cached rate, so cached tokens are charged in full there (an upper bound). Anthropic's cache
*writes* (1.25x the input rate) are charged as plain input: :class:`Usage` does not count them
apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._core.usage import Usage
from . import _catalog as catalog
from ._registry import REGISTRY
from ._settings import Price

if TYPE_CHECKING:
    from decimal import Decimal  # imported when a price is read: genai-prices needs it then anyway

__all__ = ["BUILTIN_PRICES", "ModelPrice", "cache_savings_of", "cost_of", "model_price_of", "price_of", "priced"]

# What no database says, from the registrations: a model served by Ollama runs on your machine.
_RULES: Mapping[str, tuple[float, float, float | None]] = MappingProxyType(
    {f"{spec.name}:*": spec.price for spec in REGISTRY if spec.price is not None}
)
BUILTIN_PRICES: Mapping[str, Price] = MappingProxyType({k: (v[0], v[1]) for k, v in _RULES.items()})

# "-20250929", "-2024-07-18": the dated snapshots providers publish under an alias
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
_PER_MILLION = 1_000_000
_PROBE = 1_000  # tokens priced to read a per-million rate below any long-context tier


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens for one model, and where the price came from."""

    input: float
    output: float
    cached_input: float | None  # None: cached input tokens cost the full input rate
    source: str  # "settings", "genai-prices <version>" or "built-in rule"


def model_price_of(
    model: str, prices: Mapping[str, Price] | None = None, *, base_url: str | None = None
) -> ModelPrice | None:
    """The price of ``model`` (``provider:model``), or None when it is in no table. ``base_url``:
    the server the provider is pointed at; an OpenAI-compatible host the database knows by its
    URL (DeepSeek, OpenRouter, Groq, Mistral, Together …) is priced as that host first."""
    user = prices or {}
    provider, sep, name = model.partition(":")
    alias = _SNAPSHOT.sub("", model)
    for candidate in dict.fromkeys((model, alias)):
        if candidate in user:
            return ModelPrice(*user[candidate], None, "settings")
    for catalog_id in _catalog_ids(provider, base_url) if sep else ():
        found = _database_price(catalog_id, name)
        if found is not None:
            return found
    if sep:
        wildcard = f"{provider}:*"
        if wildcard in user:
            return ModelPrice(*user[wildcard], None, "settings")
        if wildcard in _RULES:
            return ModelPrice(*_RULES[wildcard], "built-in rule")
    return None


def price_of(model: str, prices: Mapping[str, Price] | None = None, *, base_url: str | None = None) -> Price | None:
    """The (input, output) price of ``model`` per million tokens; ``prices`` wins over the
    database and the built-in rule."""
    found = model_price_of(model, prices, base_url=base_url)
    return None if found is None else (found.input, found.output)


def cost_of(
    model: str, usage: Usage, prices: Mapping[str, Price] | None = None, *, base_url: str | None = None
) -> float | None:
    """USD for ``usage`` on ``model``, cached input at the cached rate; None when the model has
    no price."""
    found = model_price_of(model, prices, base_url=base_url)
    return None if found is None else _cost(model, usage, found, base_url)


def _cost(model: str, usage: Usage, found: ModelPrice, base_url: str | None) -> float:
    if found.source.startswith("genai-prices"):
        # The database prices the whole usage itself: cached rate and long-context tiers.
        provider, _, name = model.partition(":")
        for catalog_id in _catalog_ids(provider, base_url):
            exact = _database_cost(catalog_id, name, usage)
            if exact is not None:
                return exact
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_rate = found.input if found.cached_input is None else found.cached_input
    return (
        (usage.input_tokens - cached) * found.input + cached * cached_rate + usage.output_tokens * found.output
    ) / 1e6


def _catalog_ids(provider: str, base_url: str | None) -> tuple[str, ...]:
    """The provider's ids in the database, most specific first: the host ``base_url`` belongs
    to (OpenRouter …), then the registration's ``catalog``."""
    spec = REGISTRY.get(provider)
    return catalog.provider_ids(spec.catalog if spec is not None else None, base_url)


def priced(model: str, usage: Usage, settings: Any) -> tuple[float | None, float | None]:
    """(:func:`cost_of`, :func:`cache_savings_of`) for a turn made with ``settings`` (a
    :class:`ProviderSettings`: its prices, and the server the model's provider is pointed at)."""
    from ._windows import base_url_of

    base_url = base_url_of(settings, model.partition(":")[0])
    found = model_price_of(model, settings.prices, base_url=base_url)  # once: every turn asks
    if found is None:
        return None, None
    cost = _cost(model, usage, found, base_url)
    return cost, _savings(model, usage, found, base_url, cost)


def cache_savings_of(
    model: str, usage: Usage, prices: Mapping[str, Price] | None = None, *, base_url: str | None = None
) -> float | None:
    """USD that ``usage``'s cached input tokens saved against paying for them in full: 0.0 when
    nothing was cached or the price has no cached rate, None when the model has no price."""
    found = model_price_of(model, prices, base_url=base_url)
    return None if found is None else _savings(model, usage, found, base_url, _cost(model, usage, found, base_url))


def _savings(model: str, usage: Usage, found: ModelPrice, base_url: str | None, cost: float) -> float:
    """What ``usage`` (which ``cost``) would cost without its cached tokens, less ``cost``."""
    if usage.cached_tokens <= 0:
        return 0.0
    without = _cost(model, Usage(usage.input_tokens, usage.output_tokens, 0), found, base_url)
    return max(0.0, without - cost)


# -- the genai-prices database --------------------------------------------------------------------


@lru_cache(maxsize=256)
def _database_price(provider_id: str, model: str) -> ModelPrice | None:
    module = _genai_prices()
    if module is None:
        return None
    base = _calc(module, provider_id, model, input_tokens=_PROBE)
    output = _calc(module, provider_id, model, output_tokens=_PROBE)
    cached = _calc(module, provider_id, model, input_tokens=_PROBE, cache_read_tokens=_PROBE)
    if base is None or output is None:
        return None
    scale = _PER_MILLION // _PROBE  # an int: Decimal * int stays exact
    return ModelPrice(
        float(base * scale),
        float(output * scale),
        None if cached is None else float(cached * scale),
        catalog.database_version(),
    )


def _database_cost(provider_id: str, model: str, usage: Usage) -> float | None:
    module = _genai_prices()
    if module is None:
        return None
    cost = _calc(
        module,
        provider_id,
        model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=min(usage.cached_tokens, usage.input_tokens),
    )
    return None if cost is None else float(cost)


def _calc(module: Any, provider_id: str, model: str, **tokens: int) -> Decimal | None:
    try:
        result = module.calc_price(module.Usage(**tokens), model, provider_id=provider_id)
    except Exception:  # LookupError for unknown models; anything else means the package can't price it
        return None
    from decimal import Decimal

    total = result.total_price
    return total if isinstance(total, Decimal) else Decimal(str(total))


def _genai_prices() -> Any:
    return catalog.genai_prices()
