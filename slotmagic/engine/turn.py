"""A turn's life, in one place: plan (append / replay / fork) → assemble the request through
the view pipeline → stream the reply → commit it in one transaction.

Nothing is stored until the reply is complete, and a turn is stored only on the history its
request was made from: when the slot moved on meanwhile (another thread, process or kernel
stored a turn on it), the turn goes to a new sibling branch forked at the point it was made
from, and its footer says so. Nothing is lost and no reply sits after messages it never saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.checks import check_json_mapping, check_number, check_optional_text, check_text, check_whole
from ..core.messages import Message
from ..core.records import CellRef, ForkRef, TurnInfo, TurnRecord
from ..core.slots import DeriveStrategy, Slot, SlotMode, SlotSource, validate_slot_id
from ..core.tokens import estimate_message_tokens
from ..core.usage import Usage
from ..errors import ConfigError, ProviderError, SlotMoved, SlotNotFound, SlotReadonly, TurnNotStored
from ..providers import ProviderSettings, cost_of, parse_model, resolve_provider
from ..providers.base import ChatRequest, Completion, Provider, StreamEvent, TextDelta
from ..store.base import History, Store, Tip
from .pipeline import View, assemble
from .plan import CellPlan, fork_name, plan_cell_turn
from .reply import Reply


def count_tokens(message: Message) -> int:
    return estimate_message_tokens(message)


def counted(message: Message) -> Message:
    return message if message.tokens else message.with_tokens(count_tokens(message))


@dataclass(frozen=True)
class TurnOptions:
    """A turn's options, checked when made: nothing malformed reaches a request or the store."""

    slot: str | None = None
    model: str | None = None
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    cell_id: str | None = None
    rerun: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.slot is not None:
            validate_slot_id(self.slot)
        if self.model is not None:
            parse_model(check_text(self.model, "model"))
        set_(self, "system", check_optional_text(self.system, "system"))
        if self.temperature is not None:
            set_(self, "temperature", check_number(self.temperature, "temperature"))
        if self.max_tokens is not None:
            check_whole(self.max_tokens, "max_tokens", minimum=1)
        set_(self, "params", check_json_mapping(self.params if self.params is not None else {}, "params"))
        set_(self, "info", check_json_mapping(self.info if self.info is not None else {}, "info"))
        if self.cell_id is not None:
            check_text(self.cell_id, "cell_id", empty_ok=False)
        if not isinstance(self.rerun, bool):
            raise ConfigError(f"rerun must be True or False, not {self.rerun!r:.60}")

    def cell_options(self) -> dict[str, Any]:
        """The request options a cell sets itself: changing one of them is editing the cell."""
        chosen = {"model": self.model, "system": self.system, "temperature": self.temperature,
                  "max_tokens": self.max_tokens, "params": dict(self.params) or None}  # fmt: skip
        return {k: v for k, v in chosen.items() if v is not None}


@dataclass(frozen=True)
class PendingTurn:
    """Everything decided before the model is called; nothing is stored until it answers."""

    slot: str  # the slot whose history the request was made from
    base: Tip  # that history: the turn is stored only on it
    user: Message
    model: str
    provider: Provider
    request: ChatRequest
    info: TurnInfo
    fork_before: TurnRecord | None = None  # an edited cell: run on a sibling forked before this turn
    follow: bool = False  # a turn on the current slot: a fork it makes becomes current

    def completion_or_raise(self, completion: Completion | None) -> Completion:
        if completion is None:
            raise ProviderError(
                f"the reply from {self.model} ended before it was complete; "
                f"slot {self.slot!r} is unchanged, run the turn again"
            )
        return completion


class TurnEngine:
    """Runs the turns of one session over a store. ``model``, ``system`` and ``settings`` are
    the session's defaults; ``usage`` adds up what the turns made here used."""

    def __init__(
        self, store: Store, session_id: str, model: str, system: str | None, settings: ProviderSettings
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.model = model
        self.system = system
        self.settings = settings
        self.usage = Usage()
        self._providers: dict[str, Provider] = {}

    # -- providers -------------------------------------------------------------------------

    def provider(self, model: str) -> Provider:
        """The provider for ``model``, one per provider name, kept for its open connections."""
        name, _ = parse_model(model)
        if name not in self._providers:
            self._providers[name] = resolve_provider(model, self.settings)[0]
        return self._providers[name]

    def close_providers(self) -> None:
        for provider in self._providers.values():
            provider.close()
        self._providers.clear()

    # -- views -----------------------------------------------------------------------------

    def view(self, slot: Slot, history: History, system: str | None = None) -> View:
        """What the model would be sent for the slot's next turn, before the new message."""
        prompt = system if system is not None else slot.config.system or self.system
        return assemble(slot.id, slot.config, history, prompt, count_tokens)

    # -- a turn's life ---------------------------------------------------------------------

    def start(self, text: object, options: TurnOptions) -> tuple[PendingTurn | None, CellPlan | None, Reply | None]:
        """A turn about to stream, its cell plan, and the stored reply when it is a replay."""
        text = check_text(text, "the turn")
        if not text.strip():
            raise ConfigError("the turn is empty: write the message to send to the model")
        follow = options.slot is None
        slot = options.slot or self.store.current_slot(self.session_id)
        if options.cell_id is None:
            return self.prepare(text, slot, options, None, None, follow), None, None
        cell = CellRef(options.cell_id, text, options.cell_options())
        # Only a cell sent to "the current slot" may be found elsewhere; rerun asks again here.
        plan = plan_cell_turn(
            self.store, self.session_id, slot, cell, rerun=options.rerun, anywhere=follow and not options.rerun
        )
        if plan.action == "replay":
            assert plan.turn is not None
            if follow and plan.slot != self.store.current_slot(self.session_id):
                self.store.set_current_slot(self.session_id, plan.slot)  # where the cell left it
            return None, plan, self.stored_reply(plan.slot, plan.turn)
        fork_before = plan.turn if plan.action == "fork" else None
        return self.prepare(text, plan.slot, options, cell, fork_before, follow), plan, None

    def prepare(
        self,
        text: str,
        slot_id: str,
        options: TurnOptions,
        cell: CellRef | None,
        fork_before: TurnRecord | None,
        follow: bool,
    ) -> PendingTurn:
        history = self.store.history(self.session_id, slot_id)
        slot = history.slot
        assert slot is not None
        if slot.mode is SlotMode.READONLY:
            raise SlotReadonly(slot.id)
        model = options.model or self.model
        provider = self.provider(model)
        if fork_before is not None:
            history = history.prefix(fork_before.start)  # what the sibling will share
        user = counted(Message.user(text))
        view = self.view(slot, history, options.system).with_new(user)
        request = ChatRequest(
            model=parse_model(model)[1],
            messages=view.messages,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            params=dict(options.params),
        )
        info = TurnInfo(kind="turn", model=model, system=options.system, cell=cell, extra=options.info)
        return PendingTurn(slot.id, history.tip, user, model, provider, request, info, fork_before, follow)

    def commit(self, turn: PendingTurn, completion: Completion) -> Reply:
        """Store the turn on the history it was made from, in one transaction."""
        assistant = counted(completion.message)
        cost = cost_of(turn.model, completion.usage, self.settings.prices)
        info = turn.info.replace(usage=completion.usage, finish_reason=completion.finish_reason, cost=cost)
        messages = [turn.user, assistant]
        store, session_id = self.store, self.session_id
        try:
            with store.atomic():  # a fork exists only with its turn, even after a crash
                slot = turn.slot
                if turn.fork_before is not None:
                    slot = self._fork(turn.slot, turn.fork_before.start)
                    info = info.replace(forked_from=ForkRef(turn.slot, turn.fork_before.number, "edit"))
                    record = store.append_turn(session_id, slot, messages, info)
                    if turn.follow:
                        store.set_current_slot(session_id, slot)
                else:
                    try:
                        record = store.append_turn(session_id, slot, messages, info, base=turn.base, writable=True)
                    except SlotMoved:
                        if store.tip(session_id, slot).key != turn.base.key:
                            raise  # not the same slot any more: a new one took its name
                        slot = self._fork(turn.slot, turn.base.length)
                        info = info.replace(forked_from=ForkRef(turn.slot, None, "moved"))
                        record = store.append_turn(session_id, slot, messages, info)
        except (SlotMoved, SlotNotFound):
            raise TurnNotStored(turn.slot, assistant.content) from None
        self.usage = self.usage + completion.usage
        return Reply(
            assistant.content, assistant, completion.usage, turn.model, slot, record.number,
            completion.finish_reason, cost, info,
        )  # fmt: skip

    def _fork(self, parent_id: str, at: int) -> str:
        """Derive the sibling a turn runs on; it behaves like the branch it forks."""
        parent = self.store.slot(self.session_id, parent_id)
        strategy = (
            DeriveStrategy.focused_on(parent.config.focused)
            if parent.mode is SlotMode.FOCUSED
            else DeriveStrategy.full()
        )
        name = fork_name(parent.id, frozenset(s.id for s in self.store.slots(self.session_id)))
        config = parent.config.replace(source=SlotSource.derived(parent.id, strategy))
        self.store.derive_slot(self.session_id, name, parent.id, config, at)
        return name

    def stored_reply(self, slot: str, record: TurnRecord) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed``."""
        produced = self.store.history(self.session_id, slot).messages(record.start, record.end)
        message = next((m for m in reversed(produced) if m.role == "assistant"), None)
        if message is None:
            raise ConfigError(f"turn {record.number} of slot {slot!r} has no reply to show")
        info = record.info
        return Reply(
            message.content, message, info.usage or Usage(), info.model or self.model, slot, record.number,
            info.finish_reason, info.cost, info, replayed=True,
        )  # fmt: skip


class _Stream:
    """What the sync and async streams share: the turn, its plan, and the reply once stored."""

    def __init__(
        self, engine: TurnEngine, turn: PendingTurn | None, plan: CellPlan | None = None, replay: Reply | None = None
    ) -> None:
        self._engine = engine
        self._turn = turn
        self._completion: Completion | None = None
        self.plan = plan
        self.reply: Reply | None = replay

    @property
    def replayed(self) -> bool:
        return self._turn is None

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

    def _receive(self, event: StreamEvent) -> str:
        """The text an event adds (none for the final one, which is kept for storing)."""
        if isinstance(event, TextDelta):
            return event.text
        self._completion = event
        return ""

    def _store(self, turn: PendingTurn) -> None:
        self.reply = self._engine.commit(turn, turn.completion_or_raise(self._completion))


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
