"""A turn in flight: the request decided before the model is called, the stream of its reply,
and the ``Reply`` it leaves once stored. Nothing is stored until the reply is complete."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .core.messages import Message
from .errors import ProviderError
from .providers.base import ChatRequest, Completion, Provider, StreamEvent, TextDelta, Usage
from .replay import CellPlan

if TYPE_CHECKING:
    from .session import Session


@dataclass(frozen=True)
class Reply:
    """A model's answer to one turn. Displays as Markdown in a notebook."""

    text: str
    message: Message
    usage: Usage
    model: str
    slot: str
    turn: int
    finish_reason: str | None = None
    cost: float | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    replayed: bool = False  # shown again from the store, the model was not called

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


@dataclass(frozen=True)
class PendingTurn:
    """Everything decided before the model is called; nothing is stored until it answers."""

    slot: str
    user: Message
    model: str
    provider: Provider
    request: ChatRequest
    info: Mapping[str, Any]
    fork: CellPlan | None = None  # run on a new sibling of fork.slot, just before fork.turn
    follow: bool = False  # make the fork the current slot

    def completion_or_raise(self, completion: Completion | None) -> Completion:
        if completion is None:
            raise ProviderError(
                f"the reply from {self.model} ended before it was complete; "
                f"slot {self.slot!r} is unchanged, run the turn again"
            )
        return completion


class _Stream:
    """What the sync and async streams share: the turn, its plan, and the reply once stored."""

    def __init__(
        self, session: Session, turn: PendingTurn | None, plan: CellPlan | None = None, replay: Reply | None = None
    ) -> None:
        self._session = session
        self._turn = turn
        self._completion: Completion | None = None
        self.plan = plan
        self.reply: Reply | None = replay

    @property
    def replayed(self) -> bool:
        return self._turn is None

    def _receive(self, event: StreamEvent) -> str:
        """The text an event adds (none for the final one, which is kept for storing)."""
        if isinstance(event, TextDelta):
            return event.text
        self._completion = event
        return ""

    def _store(self, turn: PendingTurn) -> None:
        self.reply = self._session._store_turn(turn, turn.completion_or_raise(self._completion))


class TurnStream(_Stream):
    """Iterate to receive the reply's text as it streams; ``reply`` is set once it is stored.

    Stopping early (``break``, an exception, an interrupt) stores nothing; ``close()``, or
    leaving a ``with`` block, closes the connection to the model at once. ``plan`` says what
    a turn from a notebook cell does (append, replay or fork); a replay yields the stored reply
    at once and calls no model.
    """

    _events: Iterator[StreamEvent] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        self._events = self._turn.provider.stream(self._turn.request)
        try:
            for event in self._events:
                text = self._receive(event)
                if text:
                    yield text
        finally:
            self.close()
        self._store(self._turn)

    def close(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> TurnStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTurnStream(_Stream):
    """``async for`` form of :class:`TurnStream`."""

    _events: AsyncIterator[StreamEvent] | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        self._events = self._turn.provider.astream(self._turn.request)
        try:
            async for event in self._events:
                text = self._receive(event)
                if text:
                    yield text
        finally:
            await self.aclose()
        self._store(self._turn)

    async def aclose(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncTurnStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
