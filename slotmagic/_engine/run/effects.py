"""What a turn asks of the outside world, apart from the turn itself (as h11 leaves the socket
to its caller).

The turn loop (:mod:`.streams`) and the summarizer (:mod:`..compaction.compactor`) are written once, as
generators that yield an effect — stream this request, ask this one for its whole text, run
these tool calls, show this text — and receive its outcome; an effect that fails is thrown
back in where it was yielded. A sync and an async driver perform the effects: that is all
the two forms differ in, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..._core.messages import ToolCall
from ..._core.request import ChatRequest
from ...providers._base import Completion, Provider, StreamEvent, TextDelta
from .loop import ToolRounds

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Ask:
    """Send ``request``; the outcome is the reply's whole text (a summary, not shown)."""

    provider: Provider
    request: ChatRequest


@dataclass(frozen=True, slots=True)
class Stream:
    """Send ``request`` and show its text as it comes; the outcome is a :class:`Received`."""

    provider: Provider
    request: ChatRequest


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run ``calls`` with the turn's tools (in parallel when async); the outcome is their results."""

    rounds: ToolRounds
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Say:
    """Show ``text`` (between two replies of a tool loop); no outcome."""

    text: str


Effect = Ask | Stream | RunTools | Say
Steps = Generator[Effect, Any, T]  # yields effects, is sent their outcomes, returns a T


class Received:
    """What one streamed reply brought: whether it said anything, and its complete form
    (None when the stream ended before it was complete)."""

    def __init__(self) -> None:
        self.said = False
        self.completion: Completion | None = None

    def take(self, event: StreamEvent) -> str:
        """The text ``event`` adds to show (none for the final event, which is kept)."""
        if isinstance(event, TextDelta):
            self.said = self.said or bool(event.text)
            return event.text
        self.completion = event
        return ""

    def texts(self, events: Iterable[StreamEvent]) -> Iterator[str]:
        """The texts ``events`` add to show, each event taken as ``take`` takes it: one
        generator for the reply rather than a call an event (a long reply streams thousands)."""
        for event in events:
            if isinstance(event, TextDelta):
                if event.text:
                    self.said = True
                    yield event.text
            else:
                self.completion = event


class Runner(Generic[T]):
    """Steps ``steps``: iterate for the effects it asks for, setting ``outcome`` (or ``failure``)
    for each before asking for the next; ``result`` is what it returned."""

    def __init__(self, steps: Steps[T]) -> None:
        self._steps = steps
        self.outcome: Any = None
        self.failure: Exception | None = None
        self._result: Any = None
        self._done = False

    @property
    def result(self) -> T:
        assert self._done, "the steps have not returned"
        value: T = self._result
        return value

    def __iter__(self) -> Iterator[Effect]:
        try:
            effect = next(self._steps)
            while True:
                yield effect
                outcome, failure = self.outcome, self.failure
                self.outcome = self.failure = None
                effect = self._steps.send(outcome) if failure is None else self._steps.throw(failure)
        except StopIteration as stop:
            self._result, self._done = stop.value, True


def collect(events: Iterator[StreamEvent]) -> str:
    """A reply's whole text: the complete one's, else what streamed before it ended."""
    received, chunks = Received(), []
    for event in events:
        chunks.append(received.take(event))
    return received.completion.message.content if received.completion is not None else "".join(chunks)


async def acollect(events: AsyncIterator[StreamEvent]) -> str:
    received, chunks = Received(), []
    async for event in events:
        chunks.append(received.take(event))
    return received.completion.message.content if received.completion is not None else "".join(chunks)


def perform(effect: Ask | RunTools) -> Any:
    """The outcome of an effect nothing is shown for, done here and now."""
    if isinstance(effect, Ask):
        return collect(effect.provider.stream(effect.request))
    return effect.rounds.run_sync(effect.calls)


async def aperform(effect: Ask | RunTools) -> Any:
    if isinstance(effect, Ask):
        return await acollect(effect.provider.astream(effect.request))
    return await effect.rounds.run(effect.calls)


def run_sync(steps: Steps[T]) -> T:
    """What ``steps`` returns, its effects done one after another (it shows nothing)."""
    runner = Runner(steps)
    for effect in runner:
        assert not isinstance(effect, Stream | Say), "run_sync shows nothing"
        try:
            runner.outcome = perform(effect)
        except Exception as exc:  # thrown back in: the steps decide what a failure means
            runner.failure = exc
    return runner.result


async def run_async(steps: Steps[T]) -> T:
    runner = Runner(steps)
    for effect in runner:
        assert not isinstance(effect, Stream | Say), "run_async shows nothing"
        try:
            runner.outcome = await aperform(effect)
        except Exception as exc:
            runner.failure = exc
    return runner.result
