"""What a provider's registration says of its models' windows (its ``window`` rule), and the
:class:`Window` every way of knowing one gives. Which rule applies, and what comes after it,
is :func:`~slotmagic.providers.model_window`'s (:mod:`._windows`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ._endpoint import Endpoint

__all__ = ["ECHO_WINDOW", "FixedWindow", "Served", "ServedWindow", "Window", "WindowRule"]

ECHO_WINDOW = 8_192
# The endpoint of the provider's server, made when a rule asks for it (only when settings were given).
Served = Callable[[], Endpoint]


@dataclass(frozen=True, slots=True)
class Window:
    """A model's context window, whether it is known, and where it came from."""

    tokens: int
    known: bool
    source: str
    small: bool = False  # a conservative guess (a server of one's own), not the largest known

    def note(self, model: str) -> str:
        """One line saying the window is a guess, by which rule, and how to state it."""
        if self.small:
            return (
                f"{model}: context window unknown; assuming {self.tokens:,} tokens ({self.source}), so compaction "
                f"starts early rather than never (%config SlotMagic.context_windows = {{{model!r}: N}} sets its "
                "real size)"
            )
        return (
            f"{model}: context window unknown; assuming {self.tokens:,} tokens, {self.source}, so nothing it "
            f"would take is refused here (%config SlotMagic.context_windows = {{{model!r}: N}} sets its real size)"
        )


class WindowRule(Protocol):
    """How a provider knows its models' windows (a :class:`ProviderSpec`'s ``window``)."""

    def window(self, provider: str, name: str, served: Served | None) -> Window: ...


@dataclass(frozen=True, slots=True)
class FixedWindow:
    """Every model of the provider takes ``tokens``."""

    tokens: int
    source: str

    def window(self, provider: str, name: str, served: Served | None) -> Window:
        return Window(self.tokens, True, self.source)


@dataclass(frozen=True, slots=True)
class ServedWindow:
    """What an Ollama server serves the model with, asked once; its default without settings."""

    def window(self, provider: str, name: str, served: Served | None) -> Window:
        from ._ollama import OLLAMA_DEFAULT_CONTEXT, served_context

        if served is None:
            return Window(OLLAMA_DEFAULT_CONTEXT, True, "Ollama's default context length")
        found = served_context(served(), name)
        return Window(found.tokens, True, found.how)
