"""An attachment made ready for a turn: what the model reads of an object, as plain values.

:mod:`slotmagic._attach` makes them from Python objects (DataFrames, figures, images, long
text); the turn engine puts them into the user message after its text (:func:`message_parts`)
and keeps the whole of what was shortened in the namespace store (``kept``), where the model
pages through it with ``read_namespace``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .images import Image, Part, TextPart


@dataclass(frozen=True, slots=True)
class Attached:
    """``text``: what the model reads about the object (a header, an excerpt, a reference to
    the whole); ``images``: image parts that follow it; ``kept``: (tool, content) pairs the
    namespace store keeps, which ``text`` refers to."""

    label: str
    text: str
    images: tuple[Image, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        """What changes when the model would be sent something else (replay compares it)."""
        import hashlib  # here: OpenSSL's module loads in ~3 ms, at the first digest

        h = hashlib.sha256(self.text.encode("utf-8"))
        for image in self.images:
            h.update(image.digest.encode("ascii"))
        return h.hexdigest()[:16]


def message_parts(text: str, attachments: Sequence[Attached]) -> list[Part]:
    """The user message's parts: its text, then each attachment's text and images."""
    parts: list[Part] = [TextPart(text)]
    for attached in attachments:
        parts.append(TextPart(f"\n\n{attached.text}"))
        parts.extend(attached.images)
    return parts
