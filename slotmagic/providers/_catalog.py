"""What the maintained model database says about a model: the installed genai-prices data, read
offline.

`genai-prices <https://pypi.org/project/genai-prices/>`_ (maintained by pydantic) bundles a
snapshot of its database in the package; it is read locally and never fetched (its optional
auto-update thread is never started here), so upgrading the package refreshes it. For each
provider it lists the models, how their names (and dated snapshots) match, their prices and
their context windows. It is imported on first use (~0.5 s), never by ``import slotmagic``:
the offline ``echo`` model and Ollama never need it.

A model is found in its provider's list (``openai``, ``anthropic``); an OpenAI-compatible
server the database knows by its URL (OpenRouter, Groq, DeepSeek, Together …) is searched
first under that provider. A model the list does not name belongs to the *family* of the
models whose names share its longest leading run of name parts (``claude-sonnet-4-7`` →
``claude-sonnet-4``; ``gpt-5.9`` → ``gpt-5``), and takes the largest window in that family.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["DatabaseModel", "database", "database_version", "find_model", "provider_ids"]

_PARTS = re.compile(r"[-.:/_]")
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class DatabaseModel:
    """A model as the database has it, or the family that stands in for it."""

    provider_id: str  # the genai-prices provider
    model_id: str  # the database's id of the model, or the family's common name part
    window: int | None  # context window in tokens, None when the database gives none
    family: bool = False  # found by family, not by name


def provider_ids(own: str | None, base_url: str | None = None) -> tuple[str, ...]:
    """The genai-prices providers to search for a model, most specific first: the one the base
    URL belongs to (OpenRouter …), then ``own``, its provider's (the registration's ``catalog``)."""
    found: list[str] = []
    if base_url:  # a server the database knows by its URL (OpenRouter behind openai:)
        by_url = _provider_by_url(base_url)
        if by_url is not None:
            found.append(by_url)
    if own is not None:
        found.append(own)
    return tuple(dict.fromkeys(found))


def find_model(provider_id: str, name: str) -> DatabaseModel | None:
    """``name`` in provider ``provider_id``'s list, else its family there; None when the
    database is missing or neither is there."""
    return _find(provider_id, name.strip().lower())


@lru_cache(maxsize=512)
def _find(provider_id: str, name: str) -> DatabaseModel | None:
    snapshot = database()
    if snapshot is None or not name:
        return None
    provider = next((p for p in snapshot.providers if p.id == provider_id), None)
    if provider is None:
        return None
    try:
        model = provider.find_model(name, all_providers=snapshot.providers)
    except Exception:  # a database entry it cannot match against: treat as absent
        model = None
    if model is not None:
        return DatabaseModel(provider_id, model.id, _window(model))
    return _family(provider_id, provider.models, name)


def _family(provider_id: str, models: list[Any], name: str) -> DatabaseModel | None:
    """The largest window among the models sharing the longest run of leading name parts
    with ``name`` (at least the first two parts: ``claude-sonnet``, ``gpt-5``)."""
    parts = _PARTS.split(name)
    best: tuple[int, list[int]] = (1, [])
    for model in models:
        window = _window(model)
        if window is None:
            continue
        shared = 0
        for a, b in zip(parts, _PARTS.split(str(model.id).lower()), strict=False):
            if a != b:
                break
            shared += 1
        if shared > best[0]:
            best = (shared, [window])
        elif shared == best[0] and shared > 1:
            best[1].append(window)
    shared, windows = best
    if not windows:
        return None
    return DatabaseModel(provider_id, "-".join(parts[:shared]), max(windows), family=True)


def largest_window(provider_id: str) -> int | None:
    """The largest context window any model of ``provider_id`` has in the database."""
    snapshot = database()
    if snapshot is None:
        return None
    windows = [w for p in snapshot.providers if p.id == provider_id for m in p.models if (w := _window(m)) is not None]
    return max(windows) if windows else None


def _window(model: Any) -> int | None:
    window = getattr(model, "context_window", None)
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def provider_by_url(base_url: str) -> str | None:
    """The database's provider an API at ``base_url`` belongs to (None: a server it does not know)."""
    return _provider_by_url(base_url.rstrip("/"))


@lru_cache(maxsize=64)
def _provider_by_url(base_url: str) -> str | None:
    snapshot = database()
    if snapshot is None:
        return None
    for provider in snapshot.providers:
        try:
            if re.match(provider.api_pattern, base_url):
                return str(provider.id)
        except (re.error, TypeError):
            continue
    return None


def database() -> Any:
    """The bundled genai-prices snapshot, loaded on first use, or None when the package is
    missing or cannot load its data."""
    module = genai_prices()
    if module is None:
        return None
    with _lock:
        try:
            from genai_prices import data_snapshot

            return data_snapshot.get_snapshot()
        except Exception:
            return None


def database_version() -> str:
    """``genai-prices <version>``, as notes and price sources name the data."""
    module = genai_prices()
    return f"genai-prices {getattr(module, '__version__', '')}".strip() if module is not None else "genai-prices"


@lru_cache(maxsize=1)
def genai_prices() -> Any:
    """The genai_prices module, imported on first use, or None when not installed."""
    try:
        import genai_prices
    except Exception:
        return None
    return genai_prices
