"""The old place of :mod:`slotmagic.providers._windows`: a model's window is the provider's
knowledge (its registration, the model database, an Ollama server), so it lives in the
providers layer; this module only forwards the names it always had."""

from __future__ import annotations

from ..providers._windows import DEFAULT_CONTEXT_WINDOW, ECHO_WINDOW, Window, model_window, window_for

__all__ = ["DEFAULT_CONTEXT_WINDOW", "ECHO_WINDOW", "Window", "model_window", "window_for"]
