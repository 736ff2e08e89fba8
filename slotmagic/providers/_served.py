"""The context length an OpenAI-compatible server of one's own says it serves a model with.

A model the database does not know, on a server it does not know by its URL (vLLM, llama.cpp's
``llama-server``, LM Studio, a proxy), is asked about once, at the server:

1. ``GET {base_url}/models``: vLLM lists each model with its ``max_model_len``
   (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html; a ``context_length``
   as LM Studio and others list it is read too);
2. else ``GET {root}/props``: llama.cpp's server reports ``n_ctx``, its context size, under
   ``default_generation_settings`` (https://github.com/ggml-org/llama.cpp/tree/master/tools/server).

A server that says neither (or is not reachable) is asked again after :data:`RETRY_SECONDS`;
meanwhile the window is a conservative default (:data:`UNKNOWN_SERVER_WINDOW`), never the
largest window known: compaction that starts early can be relaxed with one line
(``%config SlotMagic.context_windows``), a model that silently cuts its prompt cannot.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ._endpoint import Endpoint

__all__ = ["RETRY_SECONDS", "UNKNOWN_SERVER_WINDOW", "forget", "served_window"]

UNKNOWN_SERVER_WINDOW = 8_192
RETRY_SECONDS = 30.0
_TIMEOUT = 2.0
# vLLM's name for a model's context length; others that list models say it so (OpenRouter and
# Together "context_length", Groq "context_window", Mistral "max_context_length").
_LENGTH_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")

_cache: dict[tuple[str, str], tuple[tuple[int, str] | None, float]] = {}
_lock = threading.Lock()


def served_window(endpoint: Endpoint, model: str) -> tuple[int, str] | None:
    """(the context length ``endpoint``'s server serves ``model`` with, how it said so), or
    None when it says nothing; an answer is kept, a silence asked again after a while."""
    key = (endpoint.base_url, model)
    with _lock:
        kept = _cache.get(key)
        if kept is not None and (kept[0] is not None or time.monotonic() - kept[1] < RETRY_SECONDS):
            return kept[0]
        found = _ask(endpoint, model)
        _cache[key] = (found, time.monotonic())
        return found


def forget() -> None:
    """Drop every kept answer (tests; a server restarted with another context size)."""
    with _lock:
        _cache.clear()


def _ask(endpoint: Endpoint, model: str) -> tuple[int, str] | None:
    import httpx  # here: `import slotmagic` loads no httpx

    headers = {"authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    if endpoint.basic_auth:
        headers["authorization"] = endpoint.basic_auth
    base = endpoint.base_url
    try:
        with httpx.Client(timeout=_TIMEOUT, headers=headers) as client:
            listed = _max_model_len(_json(client.get(f"{base}/models")), model)
            if listed is not None:
                return listed, f"the max_model_len {endpoint.host} serves it with"
            n_ctx = _n_ctx(_json(client.get(f"{base.removesuffix('/v1')}/props")))
            if n_ctx is not None:
                return n_ctx, f"the n_ctx {endpoint.host} serves it with"
    except httpx.HTTPError:
        return None
    return None


def _max_model_len(data: Any, model: str) -> int | None:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    named = [e for e in entries if model in (e.get("id"), e.get("root"))]
    chosen = named or (entries if len(entries) == 1 else [])  # a server of one model answers for it
    sizes = (_positive(e.get(key)) for e in chosen for key in _LENGTH_KEYS)
    return next((n for n in sizes if n is not None), None)


def _n_ctx(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    found = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return found if found is not None else _positive(data.get("n_ctx"))


def _json(response: Any) -> Any:
    if getattr(response, "status_code", 0) != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
