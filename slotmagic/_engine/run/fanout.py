"""Fan-out: one user turn sent to several slots or models at once, each reply in its column.

Each column is a turn of its own, planned as a single turn is (see :mod:`..plan.cell_turn`): a cell run
again unchanged replays every column from the store, and an edited cell forks each. A slot
column is the turn ``slot=S`` would be. A model column asks its model on slot S's history and
is stored on a new branch of S named after the model (:mod:`..plan.targets`), made in the same
transaction as its turn; run again, the cell finds that branch through the cell's turns.

The requests run concurrently on one event loop (:meth:`FanOut.run`), at most ``limit`` at a
time, a 429 pacing only its own provider (:mod:`slotmagic.providers._pacing`). Replies are held
until every column has finished and then stored, each in its own transaction, with no await
between them: a failed column stores nothing and leaves the others alone, and an interrupt or a
cancellation before that point stores nothing at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from time import monotonic
from typing import TYPE_CHECKING, Literal

from ..._core.checks import check_text, check_whole
from ..._core.records import CellRef, FanOutExtra
from ..._errors import ConfigError, SlotMagicError
from ..._store.base import CellTurn, Store
from ..plan.cell_turn import plan_cell_turn
from ..plan.pending import TurnOptions
from ..plan.targets import Target, resolve_models, resolve_slots, targets
from .reply import Reply
from .streams import AsyncTurnStream
from .turn import TurnEngine

if TYPE_CHECKING:
    from ...providers._pacing import Pacer

# asyncio, the pacer and the worker thread are imported when a fan-out runs: importing the
# package stays light (tests/test_tools_schema.py)

__all__ = ["MAX_CONCURRENCY", "Column", "ColumnResult", "FanOut", "FanOutEvent", "FanOutResult", "plan_fan_out"]

MAX_CONCURRENCY = 4  # requests in flight at once, by default: kind to rate limits

Status = Literal["waiting", "streaming", "done", "replayed", "failed", "interrupted"]


@dataclass(frozen=True)
class FanOutEvent:
    """What happened in column ``index``: it started, got ``text``, finished or failed."""

    index: int
    kind: Literal["start", "text", "done", "failed"]
    text: str = ""  # the piece of reply (text), or the error's line (failed)


@dataclass(frozen=True)
class ColumnResult:
    """One column's outcome: the stored reply, or the error that stopped it (nothing stored)."""

    key: str
    slot: str  # the slot whose history was sent
    model: str
    reply: Reply | None = None
    error: BaseException | None = None
    latency: float | None = None  # seconds from sending the request to the complete reply (a replay: then)
    branch: bool = False  # a model column: the reply went to a new branch

    @property
    def ok(self) -> bool:
        return self.reply is not None

    @property
    def text(self) -> str:
        return self.reply.text if self.reply is not None else ""


def error_line(error: BaseException) -> str:
    """An error in one line: ours say what to do; anything else is named by its type."""
    text = " ".join(str(error).split())
    if isinstance(error, SlotMagicError):
        return text or type(error).__name__
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class FanOutResult(Mapping[str, ColumnResult]):
    """The columns by key (the slot, or for a model column the branch named after its model),
    in column order. ``replies`` and ``errors`` split them; one failure raises nothing."""

    def __init__(self, columns: list[ColumnResult]) -> None:
        self.columns = tuple(columns)
        self._by_key = {c.key: c for c in columns}

    def __getitem__(self, key: str) -> ColumnResult:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def replies(self) -> dict[str, Reply]:
        return {c.key: c.reply for c in self.columns if c.reply is not None}

    @property
    def errors(self) -> dict[str, BaseException]:
        return {c.key: c.error for c in self.columns if c.error is not None}

    def summary(self) -> str:
        """One line: how many replies, their total cost, the slowest and the fastest."""
        return summary_line(self.columns)

    def __repr__(self) -> str:
        return f"<FanOutResult {len(self.replies)} replies, {len(self.errors)} failed: {', '.join(self)}>"


def format_seconds(seconds: float) -> str:
    return f"{seconds:.2f} s"


def summary_line(columns: tuple[ColumnResult, ...] | list[ColumnResult]) -> str:
    replies = [c for c in columns if c.reply is not None]
    failed = [c for c in columns if c.error is not None]
    parts = [f"{len(replies)} of {len(columns)} repl{'y' if len(columns) == 1 else 'ies'}"]
    replayed = sum(1 for c in replies if c.reply is not None and c.reply.replayed)
    if replayed and replayed == len(columns):  # as a single turn's footer says it
        parts.insert(0, "replayed from the store, no model call")
    elif replayed:
        parts.append(f"{replayed} replayed from the store")
    if failed:
        parts.append(f"{len(failed)} failed")
    costs = [c.reply.cost for c in replies if c.reply is not None and c.reply.cost is not None]
    if costs:
        total = sum(costs)
        parts.append("total cost " + ("<$0.0001" if 0 < total < 0.0001 else f"${total:.4f}"))
    timed = [c for c in columns if c.latency is not None and c.error is None]
    if timed:
        slowest = max(timed, key=lambda c: c.latency or 0.0)
        fastest = min(timed, key=lambda c: c.latency or 0.0)
        assert slowest.latency is not None and fastest.latency is not None
        parts.append(f"slowest {slowest.key} {format_seconds(slowest.latency)}")
        if len(timed) > 1:
            parts.append(f"fastest {fastest.key} {format_seconds(fastest.latency)}")
    return " · ".join(parts)


class Column:
    """A column while it runs (touched only by the loop that runs the fan-out)."""

    def __init__(self, target: Target, model: str) -> None:
        self.target = target
        self.model = model
        self.stream: AsyncTurnStream | None = None
        self.reply: Reply | None = None
        self.error: BaseException | None = None
        self.started: float | None = None
        self.finished: float | None = None
        self.status: Status = "waiting"

    @property
    def latency(self) -> float | None:
        """Milliseconds are enough, and what is stored is what was shown."""
        if self.started is None or self.finished is None:
            return None
        return round(self.finished - self.started, 3)

    def result(self) -> ColumnResult:
        t = self.target
        latency = self.latency
        if self.reply is not None and self.reply.replayed:  # the time it took when it was asked
            latency = self.reply.info.latency()
        model = self.reply.model if self.reply is not None else self.model
        return ColumnResult(t.key, t.slot, model, self.reply, self.error, latency, t.branch is not None)


class FanOut:
    """One fan-out: its columns planned at construction (a replayed column is complete then),
    run with :meth:`run`. ``options`` are the turn's (``slot`` and ``cell_id`` aside);
    ``cell_id`` names the notebook cell, for replay and edit-fork."""

    def __init__(
        self,
        engine: TurnEngine,
        text: object,
        targets: list[Target],
        options: TurnOptions,
        *,
        limit: int = MAX_CONCURRENCY,
    ) -> None:
        text = check_text(text, "the turn")
        if not text.strip():
            raise ConfigError("the turn is empty: write the message to send to the model")
        if not targets:
            raise ConfigError("a fan-out needs at least one slot or model")
        self.engine = engine
        self.text = text
        self.limit = check_whole(limit, "max_concurrency", minimum=1)
        self.columns = [self._plan(t, options) for t in targets]
        self.result: FanOutResult | None = None  # set once every reply is stored
        self._ran = False
        refused = [c.error for c in self.columns if c.error is not None]
        if len(refused) == len(self.columns) and len({str(e) for e in refused}) == 1:
            raise refused[0]  # one mistake (an unknown tool, a bad option), said once, not per column

    # -- planning --------------------------------------------------------------------------

    def _plan(self, target: Target, base: TurnOptions) -> Column:
        engine = self.engine
        options = replace(base, slot=target.slot, model=target.model or base.model)
        column = Column(target, options.model or engine.model)
        try:
            plan = self._plan_slot if target.branch is None else self._plan_branch
            stream = plan(target, options)
        except SlotMagicError as exc:  # over budget, a missing key ...: this column only
            column.error, column.status = exc, "failed"
            return column
        if stream.replayed:
            column.reply, column.status = stream.reply, "replayed"
        else:
            stream.hold = True
            column.stream = stream
        return column

    def _plan_slot(self, target: Target, options: TurnOptions) -> AsyncTurnStream:
        """A slot column: the turn ``slot=S`` would be, except that only the cell's turns on S's
        own line count (the slot, its forks, what it inherited): slots with the same history
        before the cell (empty ones) must not answer for each other."""
        engine, slot = self.engine, target.slot
        if options.cell_id is None:
            return AsyncTurnStream(engine, engine.prepare(self.text, slot, options, None, None, False))
        cell = CellRef(options.cell_id, self.text, options.cell_options())
        line = self._lineage(slot)
        plan = plan_cell_turn(
            engine.store, engine.session_id, slot, cell, rerun=options.rerun, keep=lambda t: t.held or t.home in line
        )
        if plan.action == "replay":
            assert plan.turn is not None
            return AsyncTurnStream(engine, None, None, engine.stored_reply(plan.slot, plan.turn, schema=options.schema))
        fork_before = plan.turn if plan.action == "fork" else None
        return AsyncTurnStream(engine, engine.prepare(self.text, plan.slot, options, cell, fork_before, False))

    def _lineage(self, slot: str) -> set[str]:
        """``slot`` and every slot derived from it, at any depth."""
        children: dict[str, list[str]] = {}
        for found in self.engine.store.slots(self.engine.session_id):
            if found.meta.parent_id is not None:
                children.setdefault(found.meta.parent_id, []).append(found.id)
        line, todo = set(), [slot]
        while todo:
            current = todo.pop()
            if current not in line:
                line.add(current)
                todo.extend(children.get(current, ()))
        return line

    def _plan_branch(self, target: Target, options: TurnOptions) -> AsyncTurnStream:
        """A model column: replay its earlier turn (same text), fork its branch (edited), or
        ask on a new branch of the slot named after the model (first run)."""
        engine, branch = self.engine, target.branch
        assert branch is not None
        cell_id = options.cell_id
        cell = None
        earlier: list[CellTurn] = []
        if cell_id is not None:
            # The column's own identity: each model's turns are found apart from the others'.
            cell = CellRef(f"{cell_id}@{options.model}", self.text, options.cell_options())
            earlier = self._branch_turns(cell.id, target.slot)
        same = [
            t
            for t in earlier
            if cell is not None and t.record.info.cell is not None and t.record.info.cell.same_text(cell)
        ]
        if same and not options.rerun:
            found = same[-1]
            return AsyncTurnStream(
                engine, None, None, engine.stored_reply(found.home, found.record, schema=options.schema)
            )
        if earlier:  # edited (or rerun): a sibling of its branch, forked just before its turn
            found = earlier[-1]
            turn = engine.prepare(self.text, found.home, options, cell, found.record, False)
            return AsyncTurnStream(engine, turn)
        turn = engine.prepare(self.text, target.slot, options, cell, None, False)
        return AsyncTurnStream(engine, replace(turn, branch=branch))

    def _branch_turns(self, cell_id: str, slot: str) -> list[CellTurn]:
        """The cell's turns on branches made from ``slot`` (its model columns' earlier runs)."""
        store, session_id = self.engine.store, self.engine.session_id
        found = store.cell_turns(session_id, cell_id, slot)
        if not found:
            return []
        line = self._lineage(slot) - {slot}
        history = store.history(session_id, slot)
        return [
            t
            for t in found
            if t.home in line
            and history.shares_prefix(store.history(session_id, t.home), min(t.record.start, len(history)))
        ]

    # -- running ---------------------------------------------------------------------------

    async def run(self, emit: Callable[[FanOutEvent], None] | None = None) -> FanOutResult:
        """Stream every column concurrently, then store the replies; ``emit`` hears each
        column start, stream, finish or fail. Cancelled, it stores nothing and re-raises."""
        if self._ran:
            raise ConfigError("this fan-out has run already; plan another (session.plan_fan_out) to ask again")
        self._ran = True
        import asyncio

        from ...providers._pacing import PACER, Pacer

        say = emit or (lambda event: None)
        pacer = Pacer(self.limit)
        token = PACER.set(pacer)  # the tasks made below inherit it: their requests are paced
        try:
            tasks = [
                asyncio.create_task(self._run_column(i, c, pacer, say))
                for i, c in enumerate(self.columns)
                if c.stream is not None
            ]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for column in self.columns:
                    if column.status in ("waiting", "streaming", "done"):
                        column.status, column.reply = "interrupted", None
                raise
        finally:
            PACER.reset(token)
        self._store_all()
        self.result = FanOutResult([c.result() for c in self.columns])
        return self.result

    async def _run_column(self, index: int, column: Column, pacer: Pacer, say: Callable[[FanOutEvent], None]) -> None:
        stream = column.stream
        assert stream is not None
        async with pacer.place():
            column.started, column.status = monotonic(), "streaming"
            say(FanOutEvent(index, "start"))
            try:
                async for text in stream:
                    say(FanOutEvent(index, "text", text))
            except Exception as exc:  # this column fails alone; the others go on
                column.finished, column.error, column.status = monotonic(), exc, "failed"
                say(FanOutEvent(index, "failed", error_line(exc)))
                return
            column.finished, column.status = monotonic(), "done"
            say(FanOutEvent(index, "done"))

    def _store_all(self) -> None:
        """Store every complete reply, each in its own transaction (no await in between)."""
        for column in self.columns:
            if column.stream is not None and column.stream.held is not None:
                latency = column.latency
                try:  # its time is kept: a replay reads as the first run did
                    column.reply = column.stream.commit(**FanOutExtra(latency=latency))
                except SlotMagicError as exc:  # its slot was renamed or deleted meanwhile
                    column.error, column.status = exc, "failed"

    def run_sync(
        self, on_event: Callable[[FanOutEvent], None] | None = None, on_idle: Callable[[], None] | None = None
    ) -> FanOutResult:
        """:meth:`run` from synchronous code, on a loop of its own in a worker thread (a notebook
        cell's thread already runs the kernel's loop); ``on_event`` is called in this thread, and
        ``on_idle`` while no event comes. Ctrl-C stops every column, stores nothing and propagates."""
        from .background import run_beside

        return run_beside(self.run, on_event or (lambda event: None), on_idle)


def plan_fan_out(
    engine: TurnEngine,
    text: object,
    slots: str | Iterable[str] | None,
    models: str | Iterable[str] | None,
    options: TurnOptions,
    limit: int,
) -> FanOut:
    """A fan-out of ``text`` to ``slots`` (names, ``all``, globs; None: the current slot) times
    ``models`` (None: the turn's model, no new branches)."""
    if options.slot is not None:
        raise ConfigError("a fan-out takes slots=[...], not slot=; e.g. slots=['a', 'b'] or slots='all'")
    if slots is None and models is None:
        raise ConfigError(
            "a fan-out needs slots= or models= (or both), e.g. slots='a,b' or models='echo,openai:gpt-4o-mini'"
        )
    store, session_id = engine.store, engine.session_id
    chosen_models = resolve_models(models)
    made = made_by_cell(store, session_id, options.cell_id, chosen_models) if options.cell_id else set()
    chosen = resolve_slots(slots, store.slots(session_id), store.current_slot(session_id), skip=made)
    return FanOut(engine, text, targets(chosen, chosen_models), options, limit=limit)


def made_by_cell(store: Store, session_id: str, cell_id: str, models: list[str]) -> set[str]:
    """The branches earlier runs of a fan-out cell made: forks of its edits, and its model
    columns' branches."""
    current = store.current_slot(session_id)
    made = {t.owner for t in store.cell_turns(session_id, cell_id, current) if t.record.info.forked_from is not None}
    for model in models:
        made |= {t.owner for t in store.cell_turns(session_id, f"{cell_id}@{model}", current)}
    return {slot for slot in made if slot is not None}
