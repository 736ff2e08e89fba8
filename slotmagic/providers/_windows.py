"""Context windows: how many tokens (prompt and reply together) a model takes.

No table is written here; a model's window comes from, in this order:

1. ``overrides`` (``%config SlotMagic.context_windows``, ``Session.context_windows``): the full
   model string, then the alias of a dated snapshot (``claude-sonnet-4-5-20250929`` →
   ``claude-sonnet-4-5``), then ``provider:*``;
2. the provider's registration (its ``window`` rule): ``echo``, the offline test model, states
   its own, 8,192 tokens (small, so tutorials and tests reach their budgets); ``ollama:MODEL``
   is what the Ollama server serves it with, asked from the server once (:mod:`.ollama`), when
   the caller passes the provider settings, else Ollama's default, 4,096;
3. the maintained model database (:mod:`.catalog`, genai-prices), under the registration's
   ``catalog`` id: the model
   by name (dated snapshots included), under the provider an OpenAI-compatible base URL
   belongs to first (OpenRouter …);
4. the model's family in the database: the largest window among the models sharing its
   leading name parts (``claude-sonnet-4-7`` → the ``claude-sonnet-4`` models);
5. a model found nowhere gets the largest window any model of its provider has in the
   database (:data:`DEFAULT_CONTEXT_WINDOW` for a provider it does not list), and
   ``known=False``, which the engine says once in a note.

The rule of steps 4 and 5: **never refuse a request the model would accept.** Guessing too
small refused messages the model could take (``claude-sonnet-4-6``, 1M tokens, once got an
8,192 default); guessing large lets a request through that a smaller model refuses with its own
one-line error (nothing is stored), and the note says how to state the window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._errors import ConfigError
from ._registry import REGISTRY
from ._window_rules import Window

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "model_window",
    "window_for",
]

# A provider the database does not list, with no window stated: as large as the largest
# windows the database knows (1M), so nothing a model would accept is refused here.
DEFAULT_CONTEXT_WINDOW = 1_048_576

# "-20250929", "-2024-07-18", "-latest": the names providers publish beside an alias
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def model_window(model: str, overrides: Mapping[str, int] | None = None, settings: Any = None) -> Window:
    """The context window of ``provider:model`` by the rules of the module docstring.
    ``settings`` (a :class:`~slotmagic.providers.ProviderSettings`) lets an Ollama server be
    asked and an OpenAI-compatible base URL pick its provider in the database."""
    table = _checked(overrides) if overrides else {}
    provider, sep, name = model.partition(":")
    candidates = [model, _SNAPSHOT.sub("", model)]
    if sep:
        candidates.append(f"{provider}:*")
    for candidate in candidates:
        if candidate in table:
            return Window(table[candidate], True, "context_windows")
    spec = REGISTRY.get(provider if sep else model)
    if spec is not None and spec.window is not None and (sep or spec.bare):
        served = None if settings is None else (lambda: REGISTRY.endpoint(settings, spec.name))
        return spec.window.window(spec.name, name if sep else model, served)
    from . import _catalog as catalog  # the database loads only when a model needs it

    base_url = base_url_of(settings, provider)
    ids = catalog.provider_ids(spec.catalog if spec is not None else None, base_url) if sep else ()
    family = None
    for provider_id in ids:
        found = catalog.find_model(provider_id, name)
        if found is None or found.window is None:
            continue
        if not found.family:
            return Window(found.window, True, f"{catalog.database_version()}: {found.model_id}")
        family = family or found
    if family is not None and family.window is not None:
        return Window(family.window, True, f"{catalog.database_version()}: the {family.model_id} family")
    if sep and spec is not None and spec.asks_server and base_url and catalog.provider_by_url(base_url) is None:
        return _own_server(settings, provider, name)  # vLLM, llama.cpp, a proxy: asked, else a small default
    host = next(((i, w) for i in ids if (w := catalog.largest_window(i)) is not None), None)
    if host is not None:
        return Window(host[1], False, f"the largest of any {host[0]} model in {catalog.database_version()}")
    where = f"slotmagic's default for a provider not in {catalog.database_version()}"
    return Window(DEFAULT_CONTEXT_WINDOW, False, where)


def window_for(model: str, overrides: Mapping[str, int] | None = None, settings: Any = None) -> tuple[int, bool]:
    """(context window in tokens, whether it is known) for ``provider:model``; see
    :func:`model_window`."""
    found = model_window(model, overrides, settings)
    return found.tokens, found.known


def _own_server(settings: Any, provider: str, name: str) -> Window:
    """The window a server the database does not know says it serves ``name`` with, else
    :data:`._served.UNKNOWN_SERVER_WINDOW` (see :mod:`._served`)."""
    from ._served import UNKNOWN_SERVER_WINDOW, served_window

    endpoint = REGISTRY.endpoint(settings, provider)
    found = served_window(endpoint, name)
    if found is not None:
        return Window(found[0], True, found[1])
    return Window(
        UNKNOWN_SERVER_WINDOW, False, f"slotmagic's default for a model {endpoint.host} does not describe", small=True
    )


def base_url_of(settings: Any, provider: str) -> str | None:
    """The base URL ``settings`` point ``provider`` at (None: none can be made yet)."""
    spec = REGISTRY.get(provider)
    if settings is None or spec is None or spec.endpoint is None:  # no server to point at (echo)
        return None
    try:
        return REGISTRY.endpoint(settings, provider).base_url
    except Exception:  # no key yet, a URL that cannot work: the request says so; the window does not care
        return None


def _checked(overrides: Mapping[str, int]) -> Mapping[str, int]:
    if not isinstance(overrides, Mapping):
        raise ConfigError("context_windows must map model strings to a number of tokens, e.g. {'ollama:*': 32768}")
    for model, window in overrides.items():
        if not isinstance(model, str) or isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ConfigError(
                f"context window for {model!r} must be a positive whole number of tokens, e.g. 32768, not {window!r}"
            )
    return overrides
