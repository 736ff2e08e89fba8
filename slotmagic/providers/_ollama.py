"""The context length an Ollama server actually serves a model with, asked from the server.

Ollama runs every model with the server's context length, whatever the model was trained for:
4,096 tokens unless ``OLLAMA_CONTEXT_LENGTH`` or the model's Modelfile (``num_ctx``) says
otherwise, and requests past it are cut silently, not refused. So the window is asked, once per
server and model:

1. ``GET /api/ps``: a model that is loaded reports the ``context_length`` it runs with; that
   is the answer, and it is kept for the session;
2. else ``POST /api/show``: a ``num_ctx`` in the model's parameters is the answer (kept);
   otherwise the server's default applies, :data:`OLLAMA_DEFAULT_CONTEXT` (never more than the
   model's own ``<arch>.context_length``). That is a guess until the model is loaded, so it is
   asked again after :data:`GUESS_SECONDS`;
3. a server that does not answer (down, or not Ollama) gets the default, asked again after
   :data:`GUESS_SECONDS` too.

``%config SlotMagic.context_windows = {"ollama:llama3.2": 32768}`` wins over all of this and
asks nothing (the engine looks there first).

Docs: https://github.com/ollama/ollama/blob/main/docs/api.md (``/api/ps``, ``/api/show``) and
https://github.com/ollama/ollama/blob/main/docs/faq.md (how the context length is set).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ._endpoint import Endpoint

__all__ = ["GUESS_SECONDS", "OLLAMA_DEFAULT_CONTEXT", "ServedContext", "forget", "served_context"]

OLLAMA_DEFAULT_CONTEXT = 4_096
GUESS_SECONDS = 30.0
_TIMEOUT = 2.0  # seconds: a local server answers at once; a missing one must not hold a turn up


@dataclass(frozen=True, slots=True)
class ServedContext:
    tokens: int
    final: bool  # told by the server (loaded, or num_ctx); else the server's default, a guess
    how: str  # for the note: where the number came from


_cache: dict[tuple[str, str], tuple[ServedContext, float]] = {}
_lock = threading.Lock()


def served_context(endpoint: Endpoint, model: str) -> ServedContext:
    """The context length ``endpoint``'s Ollama server serves ``model`` with (see the module
    docstring); asked at most once per model, or once per :data:`GUESS_SECONDS` while it is
    only the default."""
    key = (endpoint.base_url, model)
    with _lock:
        kept = _cache.get(key)
        if kept is not None and (kept[0].final or time.monotonic() - kept[1] < GUESS_SECONDS):
            return kept[0]
        found = _ask(endpoint, model)
        _cache[key] = (found, time.monotonic())
        return found


def forget() -> None:
    """Drop every kept answer (tests; a server reconfigured)."""
    with _lock:
        _cache.clear()


def _ask(endpoint: Endpoint, model: str) -> ServedContext:
    import httpx  # here: `import slotmagic` loads no httpx

    root = endpoint.base_url.removesuffix("/v1")
    headers = {"authorization": endpoint.basic_auth} if endpoint.basic_auth else {}
    try:
        with httpx.Client(timeout=_TIMEOUT, headers=headers) as client:
            loaded = _loaded_context(client.get(f"{root}/api/ps"), model)
            if loaded is not None:
                return ServedContext(loaded, True, "the context length the Ollama server runs it with")
            shown = client.post(f"{root}/api/show", json={"model": model})
    except httpx.HTTPError:
        return ServedContext(OLLAMA_DEFAULT_CONTEXT, False, "Ollama's default (the server did not answer)")
    num_ctx, trained = _show(shown)
    if num_ctx is not None:
        return ServedContext(num_ctx, True, "num_ctx in the model's Modelfile")
    tokens = min(OLLAMA_DEFAULT_CONTEXT, trained) if trained else OLLAMA_DEFAULT_CONTEXT
    return ServedContext(tokens, False, "Ollama's default context length (the model is not loaded yet)")


def _names(model: str) -> set[str]:
    return {model, model if ":" in model else f"{model}:latest"}


def _loaded_context(response: Any, model: str) -> int | None:
    data = _json(response)
    models = data.get("models") if isinstance(data, dict) else None
    for entry in models if isinstance(models, list) else ():
        if not isinstance(entry, dict):
            continue
        if _names(model) & {entry.get("name"), entry.get("model")}:
            return _positive(entry.get("context_length"))
    return None


def _show(response: Any) -> tuple[int | None, int | None]:
    """(``num_ctx`` from the model's parameters, the ``<arch>.context_length`` it was trained for)."""
    data = _json(response)
    if not isinstance(data, dict):
        return None, None
    num_ctx = None
    parameters = data.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx":
                num_ctx = _positive(_int(value.strip()))
    info = data.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next((_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None)
    return num_ctx, trained


def _json(response: Any) -> Any:
    if getattr(response, "status_code", 0) != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
