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


class TurnStream:
    """Iterate to receive the reply's text as it streams; ``reply`` is set once it is stored.

    Stopping early (``break``, an exception, an interrupt) stores nothing; ``close()``, or
    leaving a ``with`` block, closes the connection to the model at once. ``plan`` says what
    a turn from a notebook cell does (append, replay or fork); a replay yields the stored reply
    at once and calls no model.
    """

    def __init__(self, session: Session, turn: PendingTurn | None, plan: CellPlan | None = None,
                 replay: Reply | None = None) -> None:
        self._session = session
        self._turn = turn
        self._events: Iterator[StreamEvent] | None = None
        self.plan = plan
        self.reply: Reply | None = replay
        self.slot = replay.slot if replay is not None else turn.slot if turn is not None else ""

    @property
    def replayed(self) -> bool:
        return self._turn is None

    def __iter__(self) -> Iterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        completion: Completion | None = None
        self._events = self._turn.provider.stream(self._turn.request)
        try:
            for event in self._events:
                if isinstance(event, TextDelta):
                    if event.text:
                        yield event.text
                else:
                    completion = event
        finally:
            self.close()
        self.reply = self._session._store_turn(self._turn, self._turn.completion_or_raise(completion))

    def close(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> TurnStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTurnStream:
    """``async for`` form of :class:`TurnStream`."""

    def __init__(self, session: Session, turn: PendingTurn | None, plan: CellPlan | None = None,
                 replay: Reply | None = None) -> None:
        self._session = session
        self._turn = turn
        self._events: AsyncIterator[StreamEvent] | None = None
        self.plan = plan
        self.reply: Reply | None = replay

    async def __aiter__(self) -> AsyncIterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        completion: Completion | None = None
        self._events = self._turn.provider.astream(self._turn.request)
        try:
            async for event in self._events:
                if isinstance(event, TextDelta):
                    if event.text:
                        yield event.text
                else:
                    completion = event
        finally:
            await self.aclose()
        self.reply = self._session._store_turn(self._turn, self._turn.completion_or_raise(completion))

    async def aclose(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncTurnStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
