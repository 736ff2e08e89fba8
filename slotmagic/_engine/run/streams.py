"""A turn as it streams: :class:`TurnStream` (iterate) and :class:`AsyncTurnStream` (``async for``).

The turn loop — compact first when the slot is over budget, stream a reply, run the tool calls
it makes and stream the next, until a reply without calls, then store the turn — is written
once, in :meth:`_Stream._steps`, as the effects it needs (:mod:`.effects`). Each form only
performs them: the sync one in this thread, the async one awaiting (parallel tool calls run
concurrently). Nothing is stored until the last reply is complete: a turn stopped early
(``break``, an exception, an interrupt, a cancelled task) leaves its slot as it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from ..._namespace import Namespace
from ...providers._base import StreamEvent
from ..compaction.overflow import Recovering, is_overflow, recover_steps
from ..plan.cell_turn import CellPlan
from ..plan.pending import PendingTurn
from .effects import Received, Runner, RunTools, Say, Steps, Stream, aperform, perform
from .loop import ToolRounds, ToolStep, checked
from .reply import Reply


class Streaming(Recovering, Protocol):
    """What a stream asks of the turn's engine (a :class:`~slotmagic._engine.run.turn.TurnEngine`,
    which makes the streams): named here so that the streams do not import the engine."""

    namespace: Namespace
    max_tool_rounds: int

    def commit(self, turn: PendingTurn, rounds: ToolRounds) -> Reply: ...


class _Stream:
    """What the sync and async streams share: the turn, its plan, its loop, and the reply once
    stored. ``on_step`` is called with each tool call's outcome as it comes."""

    def __init__(
        self, engine: Streaming, turn: PendingTurn | None, plan: CellPlan | None = None, replay: Reply | None = None
    ) -> None:
        self._engine = engine
        self._turn = turn
        self.plan = plan
        self.reply: Reply | None = replay
        self.on_step: Callable[[ToolStep], None] | None = None
        # Called with (part, parts) while a long compaction is summarized in parts.
        self.on_progress: Callable[[int, int], None] | None = None
        # ``hold``: a complete reply waits in ``held`` for commit() instead of being stored at
        # once, so a fan-out stores its columns only when all of them have finished.
        self.hold = False
        self.held: ToolRounds | None = None

    def commit(self, **extra: Any) -> Reply:
        """Store a reply kept back by ``hold``, in one transaction, ``extra`` recorded with it
        (known only once it streamed, such as how long it took); returns it."""
        assert self._turn is not None and self.held is not None, "nothing held to store"
        turn = self._turn
        if extra:
            turn = replace(turn, info=turn.info.replace(extra={**turn.info.extra, **extra}))
        self.reply = self._engine.commit(turn, self.held)
        self.held = None
        return self.reply

    @property
    def replayed(self) -> bool:
        return self._turn is None

    @property
    def compacting(self) -> str | None:
        """A line to show before the reply when the turn compacts its slot first (a model
        call, which takes a while): ``compacting 42 messages (38.1k tokens) to fit …``."""
        turn = self._turn
        if turn is None or turn.fold is None:
            return None
        return f"compacting {turn.fold.describe()} to fit {turn.model}'s window…"

    @property
    def slot(self) -> str:
        """The slot the turn runs on (a fork's parent until the fork exists)."""
        if self._turn is not None:
            return self._turn.slot
        assert self.reply is not None
        return self.reply.slot

    @property
    def model(self) -> str:
        if self._turn is not None:
            return self._turn.model
        assert self.reply is not None
        return self.reply.model

    def _steps(self) -> Steps[None]:
        """The turn loop, once for both forms: each reply streamed, each round's tool calls run,
        and the turn stored (or held) once a reply makes none."""
        engine, turn = self._engine, self._turn
        assert turn is not None
        if turn.fold is not None:  # a model call: part of the turn, stored with it
            turn = self._turn = yield from engine.compact_steps(turn, self.on_progress)
        rounds = ToolRounds(
            turn.tools, engine.namespace, engine.max_tool_rounds, turn.request, on_step=self.on_step,
            fit=turn.fit, room=turn.room, reader=turn.reader,
        )  # fmt: skip
        request = turn.request
        recovered = False
        while True:
            try:
                received: Received = yield Stream(turn.provider, request)
            except Exception as exc:  # too long for the model: compact and send again, once (see overflow.py)
                if recovered or request is not turn.request or not is_overflow(exc):
                    raise
                recovered = True
                turn = self._turn = yield from recover_steps(engine, turn, exc, self.on_progress)
                rounds = ToolRounds(
                    turn.tools, engine.namespace, engine.max_tool_rounds, turn.request, on_step=self.on_step,
                    fit=turn.fit, room=turn.room, reader=turn.reader,
                )  # fmt: skip
                request = turn.request
                continue
            completion = checked(turn.completion_or_raise(received.completion), turn.model, rounds.call_ids())
            calls = rounds.calls(completion)
            if calls is None:
                break
            if received.said:
                yield Say("\n\n")
            results = yield RunTools(rounds, calls)
            next_request = rounds.next_request(completion, results)
            if next_request is None:
                break
            request = next_request
        if self.hold:
            self.held = rounds
        else:
            self.reply = engine.commit(turn, rounds)


class TurnStream(_Stream):
    """Iterate to receive the reply's text as it streams; ``reply`` is set once it is stored.

    Stopping early (``break``, an exception, an interrupt) stores nothing; ``close()``, or
    leaving a ``with`` block, closes the connection to the model at once. ``plan`` says what
    a turn from a notebook cell does (append, replay or fork); a replay yields the stored reply
    at once and calls no model. Tool calls the model makes are run between its replies (see
    :mod:`slotmagic._engine.run.loop`); the text of every reply is yielded as it comes.
    """

    _events: Iterator[StreamEvent] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        runner = Runner(self._steps())
        for effect in runner:
            if isinstance(effect, Say):
                yield effect.text
                continue
            try:
                if isinstance(effect, Stream):
                    received = Received()
                    self._events = effect.provider.stream(effect.request)
                    try:
                        yield from received.texts(self._events)
                    finally:
                        self.close()
                    runner.outcome = received
                else:
                    runner.outcome = perform(effect)
            except Exception as exc:  # thrown back into the loop, which lets it through
                runner.failure = exc

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
    """``async for`` form of :class:`TurnStream` (parallel tool calls run concurrently)."""

    _events: AsyncIterator[StreamEvent] | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        runner = Runner(self._steps())
        for effect in runner:
            if isinstance(effect, Say):
                yield effect.text
                continue
            try:
                if isinstance(effect, Stream):
                    received = Received()
                    self._events = effect.provider.astream(effect.request)
                    try:
                        async for event in self._events:
                            text = received.take(event)
                            if text:
                                yield text
                    finally:
                        await self.aclose()
                    runner.outcome = received
                else:
                    runner.outcome = await aperform(effect)
            except Exception as exc:
                runner.failure = exc

    async def aclose(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncTurnStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
