"""The value a turn hands back: the model's answer and where it was stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..._core.messages import Message
from ..._core.records import ForkRef, TurnInfo
from ..._core.usage import Usage
from ..._markdown import reply_html
from .loop import ToolStep


@dataclass(frozen=True)
class Reply:
    """A model's answer to one turn. Displays in a notebook as its Markdown rendered to HTML,
    raw HTML escaped and unsafe links refused (:mod:`slotmagic._markdown`)."""

    text: str
    message: Message
    usage: Usage
    model: str
    slot: str  # where the turn is stored
    turn: int
    finish_reason: str | None = None
    cost: float | None = None
    info: TurnInfo = field(default_factory=TurnInfo)
    replayed: bool = False  # shown again from the store, the model was not called
    notes: tuple[str, ...] = ()  # what else happened: a compaction, a guessed context window
    saved: float | None = None  # USD the provider's prompt cache saved on this turn
    steps: tuple[ToolStep, ...] = ()  # the tool calls the model made in this turn, with their results
    parsed: Any = None  # with a schema: the reply read as it (a pydantic model's instance, or JSON values)

    @property
    def forked_from(self) -> ForkRef | None:
        """Set when the turn went to a new branch: an edited cell, or a slot that moved on."""
        return self.info.forked_from

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        # Never a text/markdown form: JupyterLab renders trusted Markdown with raw HTML live.
        return reply_html(self.text)
