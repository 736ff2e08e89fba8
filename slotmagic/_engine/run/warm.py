"""Loading, off a turn's critical path, what the first turn with a model would load itself.

The first reply of a kernel used to wait for the provider's module, the HTTP stack and its
TLS settings, the genai-prices data (the model's window and prices) and the tokenizer: about
0.6 s on the development machine, against a few ms for every turn after it. A session with a
networked model starts a daemon thread that loads them at once (once per process and model):
by the time a user has typed the first question they are there. Whatever the thread has not
finished, the turn loads as before (imports wait on Python's import lock, caches are filled
by whichever comes first), so nothing depends on it having run.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable

__all__ = ["warm_up"]

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_started: dict[str, threading.Thread] = {}


def warm_up(model: str, window: Callable[[str], object]) -> threading.Thread | None:
    """Start loading what a first turn with ``model`` needs (``window`` looks up its context
    window); the thread doing it, or None for the offline model. Once per process and model."""
    if model == "echo":
        return None
    with _lock:
        thread = _started.get(model)
        if thread is None:
            thread = threading.Thread(target=_warm, args=(model, window), name="slotmagic-warm-up", daemon=True)
            _started[model] = thread
            thread.start()
        return thread


def _warm(model: str, window: Callable[[str], object]) -> None:
    from ...providers._registry import REGISTRY
    from ...tokens import TokenCounter

    provider, _ = REGISTRY.parse_model(model)
    spec = next(s for s in REGISTRY if s.name == provider)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("provider module", lambda: importlib.import_module(spec.factory.partition(":")[0])),
        ("tokenizer", lambda: TokenCounter.for_model(model).count_text("warming up")),
    ]
    if spec.endpoint is not None:
        steps.insert(1, ("HTTP stack", _http))
    if provider != "ollama":  # its window is asked of the server: not before a turn does
        steps.append(("model facts and prices", lambda: window(model)))
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # the turn will meet (and report) it itself
            logger.debug("warming up %s for %s failed: %s", name, model, exc)


def _http() -> None:
    import httpcore  # noqa: F401  (what the first httpx.Client imports)

    from ...providers._transport import _tls_context

    _tls_context()
