"""The Session: slots, turns and the model, over a store. Plain Python, no IPython needed.

with Session.open("my-notes", model="echo") as session:
    session.submit_turn("Hello")
    session.derive_slot("branch")
    session.switch_slot("branch")
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .core.definition import describe_difference
from .core.focus import slot_view
from .core.messages import Message
from .core.slots import (
    DeriveStrategy,
    FocusedConfig,
    Slot,
    SlotConfig,
    SlotMode,
    SlotSource,
    validate_slot_id,
)
from .core.tokens import estimate_message_tokens
from .diff import BranchDiff, diff_slots
from .errors import ConfigError, SlotConflict, SlotNotEmpty, SlotReadonly
from .export import export_slot
from .providers import ProviderSettings, cost_of, parse_model, resolve_provider
from .providers.base import ChatRequest, Completion, Provider, Usage
from .replay import CellPlan, CellSource, fork_name, plan_cell_turn
from .store import SQLiteStore, Store, TurnRecord
from .turns import AsyncTurnStream, PendingTurn, Reply, TurnStream

DEFAULT_DB_PATH = Path(".slotmagic") / "state.sqlite3"
# The request options a cell sets itself: changing one of them is editing the cell.
_CELL_OPTIONS = ("model", "system", "temperature", "max_tokens", "params")


def default_db_path() -> str:
    """``$SLOTMAGIC_DB`` if set, else ``.slotmagic/state.sqlite3`` in the working directory."""
    return os.environ.get("SLOTMAGIC_DB") or str(DEFAULT_DB_PATH)


def new_session_id() -> str:
    return time.strftime("session-%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class Session:
    """One conversation workspace: named slots (message histories) and a current slot."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        model: str = "echo",
        system: str | None = None,
        owns_store: bool = False,
        settings: ProviderSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ConfigError("a session id must be a non-empty string")
        self.store = store
        self.session_id = session_id
        self.model = model
        self.system = system
        self.usage = Usage()  # tokens used through this object, all slots
        self._owns_store = owns_store
        self._providers: dict[str, Provider] = {}
        self.settings = settings or ProviderSettings()
        store.ensure_session(session_id)

    @classmethod
    def open(
        cls,
        session_id: str | None = None,
        *,
        db_path: str | os.PathLike[str] | None = None,
        model: str = "echo",
        system: str | None = None,
        store: Store | None = None,
        durability: str = "normal",
        settings: ProviderSettings | None = None,
    ) -> Session:
        """Open (or start) a session in the store at ``db_path``.

        ``db_path`` defaults to ``$SLOTMAGIC_DB`` or ``.slotmagic/state.sqlite3``; ``":memory:"``
        keeps nothing. A given ``store`` is used as is and left open on ``close()``.
        """
        owns = store is None
        if store is None:
            store = SQLiteStore(db_path if db_path is not None else default_db_path(), durability=durability)  # type: ignore[arg-type]
        return cls(
            store, session_id or new_session_id(), model=model, system=system, owns_store=owns, settings=settings
        )

    # -- settings --------------------------------------------------------------------------

    @property
    def model(self) -> str:
        return self._model

    @model.setter
    def model(self, value: str) -> None:
        parse_model(value)  # refuse a malformed model string now, not at the first turn
        self._model = value

    @property
    def settings(self) -> ProviderSettings:
        """Keys, URLs, timeouts, retries and prices for the providers (see ProviderSettings)."""
        return self._settings

    @settings.setter
    def settings(self, value: ProviderSettings) -> None:
        if not isinstance(value, ProviderSettings):
            raise ConfigError(f"settings must be a ProviderSettings, not {type(value).__name__}")
        self._close_providers()  # the next turn builds providers that use the new settings
        self._settings = value

    def _close_providers(self) -> None:
        for provider in self._providers.values():
            provider.close()
        self._providers.clear()

    def close(self) -> None:
        self._close_providers()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self.session_id!r} slot={self.current_slot!r} model={self.model!r}>"

    # -- slots -----------------------------------------------------------------------------

    @property
    def current_slot(self) -> str:
        return self.store.current_slot(self.session_id)

    def slot(self, slot_id: str | None = None) -> Slot:
        return self.store.slot(self.session_id, self._slot_id(slot_id))

    def list_slots(self) -> list[Slot]:
        return self.store.slots(self.session_id)

    def has_slot(self, slot_id: str) -> bool:
        return any(slot.id == slot_id for slot in self.list_slots())

    def create_slot(
        self,
        slot_id: str,
        config: SlotConfig | None = None,
        *,
        messages: Iterable[Message] | None = None,
        exist_ok: bool = False,
    ) -> Slot:
        """A new empty slot, or a *static* one holding ``messages`` (e.g. a reference document).

        An existing ``slot_id`` raises ``SlotExists``; with ``exist_ok`` an existing slot of the
        same definition is returned as is (a re-run notebook cell) and one of another
        definition raises ``SlotConflict`` naming the difference.
        """
        validate_slot_id(slot_id)
        config = config or SlotConfig()
        preset = [self._counted(m) for m in messages or ()]
        if messages is not None:
            config = config.replace(source=SlotSource.static())
        elif config.source.kind == "derived":
            raise ConfigError("use derive_slot() to make a derived slot")
        if exist_ok and self.has_slot(slot_id):
            return self._same_definition(slot_id, config)
        return self.store.create_slot(self.session_id, slot_id, config, preset)

    def switch_slot(self, slot_id: str) -> Slot:
        self.store.set_current_slot(self.session_id, validate_slot_id(slot_id))
        return self.slot(slot_id)

    def derive_slot(
        self,
        slot_id: str,
        parent: str | None = None,
        strategy: DeriveStrategy | FocusedConfig | str | None = "full",
        *,
        at: int | None = None,
        exist_ok: bool = False,
    ) -> Slot:
        """Branch ``parent`` (the current slot by default) into a new slot.

        The new slot shares the parent's history up to ``at`` messages (all by default); no
        message is copied. With a focused strategy it sees that history through the filter.
        Turns in either slot are invisible to the other. ``exist_ok`` works as in
        :meth:`create_slot` (the fork point is not part of the definition).
        """
        validate_slot_id(slot_id)
        exists = exist_ok and self.has_slot(slot_id)
        if exists and parent is None:
            # Re-running "derive from the current slot" after it switched to the new slot:
            # the parent meant is the one it was derived from.
            parent = self.slot(slot_id).config.source.parent_id
        parent_slot = self.slot(parent)
        strategy = DeriveStrategy.parse(strategy)
        base = parent_slot.config
        if strategy.kind == "focused":
            mode, focused = SlotMode.FOCUSED, strategy.focused or FocusedConfig()
        else:
            mode, focused = SlotMode.FULL, base.focused
        config = base.replace(mode=mode, focused=focused, source=SlotSource.derived(parent_slot.id, strategy))
        if exists:
            return self._same_definition(slot_id, config)
        return self.store.derive_slot(self.session_id, slot_id, parent_slot.id, config, at)

    def _same_definition(self, slot_id: str, config: SlotConfig) -> Slot:
        existing = self.slot(slot_id)
        difference = describe_difference(existing.config, config)
        if difference is not None:
            raise SlotConflict(slot_id, difference)
        return existing

    def configure_slot(self, slot_id: str | None = None, config: SlotConfig | None = None, **changes: Any) -> Slot:
        """Replace a slot's config, or change some fields: ``configure_slot("a", mode="readonly")``."""
        slot = self.slot(slot_id)
        try:
            new = (config or slot.config).replace(**changes)
        except TypeError as exc:
            raise ConfigError(f"cannot configure slot {slot.id!r}: {exc}") from None
        return self.store.update_config(self.session_id, slot.id, new)

    def rename_slot(self, old_id: str, new_id: str) -> Slot:
        return self.store.rename_slot(self.session_id, old_id, validate_slot_id(new_id))

    def delete_slot(self, slot_id: str, *, force: bool = True, missing_ok: bool = False) -> bool:
        """Delete a slot. Its derived slots keep their whole history; ``default`` stays.

        With ``force=False`` a slot holding turns that no other slot shares is refused
        (``SlotNotEmpty``). With ``missing_ok`` an unknown slot is not an error. Returns whether
        a slot was deleted.
        """
        validate_slot_id(slot_id)
        if missing_ok and not self.has_slot(slot_id):
            return False
        if not force:
            unique = self.unshared_turns(slot_id)
            if unique:
                raise SlotNotEmpty(slot_id, len(unique))
        self.store.delete_slot(self.session_id, slot_id)
        return True

    def unshared_turns(self, slot_id: str) -> list[TurnRecord]:
        """The turns of the slot that no other slot's history holds (what deleting it loses)."""
        shared = {t.origin for slot in self.list_slots() if slot.id != slot_id for t in self.turns(slot.id)}
        return [t for t in self.turns(slot_id) if t.origin not in shared]

    # -- histories -------------------------------------------------------------------------

    def messages(self, slot: str | None = None) -> list[Message]:
        """The slot's stored history, every message, in order."""
        return self.store.messages(self.session_id, self._slot_id(slot))

    def turns(self, slot: str | None = None) -> list[TurnRecord]:
        return self.store.turns(self.session_id, self._slot_id(slot))

    def view(self, slot: str | None = None) -> list[Message]:
        """Exactly the messages the model would be sent for the slot's next turn, before the
        new user message (the same code path a real request takes)."""
        slot_obj = self.slot(slot)
        return list(self._request(slot_obj, self.messages(slot_obj.id), self.model).messages)

    def append(
        self, messages: Iterable[Message], slot: str | None = None, info: Mapping[str, Any] | None = None
    ) -> TurnRecord:
        """Store messages as one turn without calling the model (all or none)."""
        slot_obj = self._writable(slot)
        counted = [self._counted(m) for m in messages]
        if not counted:
            raise ConfigError("nothing to append: pass at least one message")
        return self.store.append_turn(self.session_id, slot_obj.id, counted, {"kind": "append", **(info or {})})

    def diff(self, a: str, b: str) -> BranchDiff:
        """Where two slots' histories part and what each has had since."""
        return diff_slots(self, self._slot_id(a), self._slot_id(b))

    def export(self, path: str | os.PathLike[str], slot: str | None = None) -> Path:
        """Write a slot's whole history to a ``.md`` or ``.json`` file."""
        return export_slot(self, path, slot)

    # -- turns -----------------------------------------------------------------------------

    def submit_turn(self, text: str, **options: Any) -> Reply:
        """Send ``text`` as a user turn on the current slot (or ``slot=``) and store the reply.

        Options: ``slot``, ``model``, ``system``, ``temperature``, ``max_tokens``, ``params``
        (provider-specific request fields) and ``info`` (recorded with the turn). If the model
        fails, nothing is stored and the error says what happened.
        """
        stream = self.stream_turn(text, **options)
        for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def stream_turn(self, text: str, *, cell_id: str | None = None, rerun: bool = False, **options: Any) -> TurnStream:
        """Start a turn; iterate the result for the reply's text as it streams.

        ``cell_id`` names the notebook cell the text comes from. When that cell already
        produced a turn in the slot, unchanged text replays the stored reply (no model call)
        and edited text (or ``rerun``) forks a sibling just before the earlier turn and runs
        there (see :mod:`slotmagic.replay`). A turn on the current slot (no ``slot=``) makes
        the fork, or the replayed branch, current. Without ``cell_id`` turns append.
        """
        return TurnStream(self, *self._start(text, cell_id, rerun, options))

    async def asubmit_turn(self, text: str, **options: Any) -> Reply:
        stream = self.astream_turn(text, **options)
        async for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def astream_turn(
        self, text: str, *, cell_id: str | None = None, rerun: bool = False, **options: Any
    ) -> AsyncTurnStream:
        return AsyncTurnStream(self, *self._start(text, cell_id, rerun, options))

    def stored_reply(self, slot: str, turn: TurnRecord) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed``."""
        history = self.messages(slot)
        produced = history[turn.start : turn.end]
        message = next((m for m in reversed(produced) if m.role == "assistant"), None)
        if message is None:
            raise ConfigError(f"turn {turn.number} of slot {slot!r} has no reply to show")
        usage = Usage(
            **{
                k: int(v)
                for k, v in (turn.info.get("usage") or {}).items()
                if k in ("input_tokens", "output_tokens", "cached_tokens")
            }
        )
        return Reply(
            message.content,
            message,
            usage,
            str(turn.info.get("model", self.model)),
            slot,
            turn.number,
            turn.info.get("finish_reason"),
            turn.info.get("cost"),
            turn.info,
            replayed=True,
        )

    # -- internals -------------------------------------------------------------------------

    def _slot_id(self, slot: str | None) -> str:
        return self.current_slot if slot is None else validate_slot_id(slot)

    def _writable(self, slot: str | None) -> Slot:
        slot_obj = self.slot(slot)
        if slot_obj.config.mode is SlotMode.READONLY:
            raise SlotReadonly(slot_obj.id)
        return slot_obj

    @staticmethod
    def _counted(message: Message) -> Message:
        return message.with_tokens(estimate_message_tokens(message))

    def _provider(self, model: str) -> Provider:
        """The provider for ``model``, one per provider name, kept for its open connections."""
        provider_name, _ = parse_model(model)
        if provider_name not in self._providers:
            self._providers[provider_name] = resolve_provider(model, self.settings)[0]
        return self._providers[provider_name]

    def _request(
        self,
        slot: Slot,
        history: list[Message],
        model: str,
        *,
        new: Message | None = None,
        system: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> ChatRequest:
        """The one place a model request is assembled: the system prompt and the slot's
        history through its mode's filter, then the new message (never filtered out)."""
        prompt = system if system is not None else slot.config.system or self.system
        messages = slot_view(([Message.system(prompt)] if prompt else []) + history, slot.config)
        if new is not None:
            messages.append(new)
        return ChatRequest(
            model=parse_model(model)[1],
            # Messages made here (system prompt, summary) get their token count too.
            messages=tuple(m if m.tokens else self._counted(m) for m in messages),
            temperature=temperature,
            max_tokens=max_tokens,
            params=dict(params or {}),
        )

    @staticmethod
    def _check_text(text: object) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("the turn is empty: write the message to send to the model")

    def _plan(
        self, text: str, cell_id: str | None, rerun: bool, options: Mapping[str, Any]
    ) -> tuple[CellPlan | None, CellSource | None]:
        self._check_text(text)
        if cell_id is None:
            return None, None
        cell = CellSource(cell_id, text, {k: options[k] for k in _CELL_OPTIONS if options.get(k) is not None})
        slot = options.get("slot")
        # Only a cell sent to "the current slot" may be found elsewhere; --rerun asks again here.
        anywhere = slot is None and not rerun
        return plan_cell_turn(self, self._slot_id(slot), cell, rerun=rerun, anywhere=anywhere), cell

    def _start(
        self, text: str, cell_id: str | None, rerun: bool, options: dict[str, Any]
    ) -> tuple[PendingTurn | None, CellPlan | None, Reply | None]:
        """A turn about to stream, its cell plan, and the stored reply when it is a replay."""
        plan, cell = self._plan(text, cell_id, rerun, options)
        if plan is not None and plan.action == "replay":
            return None, plan, self._replay(plan, follow=options.get("slot") is None)
        return self._prepare(text, cell=cell, plan=plan, **options), plan, None

    def _replay(self, plan: CellPlan, *, follow: bool) -> Reply:
        assert plan.turn is not None
        if follow and plan.slot != self.current_slot:
            self.switch_slot(plan.slot)  # the edited cell's branch, as when it was forked
        return self.stored_reply(plan.slot, plan.turn)

    def _prepare(
        self,
        text: str,
        *,
        slot: str | None = None,
        model: str | None = None,
        system: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        params: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
        cell: CellSource | None = None,
        plan: CellPlan | None = None,
    ) -> PendingTurn:
        slot_obj = self._writable(slot)
        model = model or self.model
        provider = self._provider(model)
        user = self._counted(Message.user(text))
        history = self.messages(slot_obj.id)
        fork = plan if plan is not None and plan.action == "fork" else None
        if fork is not None:
            assert fork.turn is not None
            history = history[: fork.turn.start]  # what the sibling will share
        request = self._request(
            slot_obj,
            history,
            model,
            new=user,
            system=system,
            temperature=temperature,
            max_tokens=max_tokens,
            params=params,
        )
        turn_info: dict[str, Any] = {"kind": "turn", "model": model, **(info or {})}
        if system is not None:
            turn_info["system"] = system
        if cell is not None:
            turn_info["cell"] = cell.to_info()
        return PendingTurn(slot_obj.id, user, model, provider, request, turn_info, fork, slot is None)

    def _store_turn(self, turn: PendingTurn, completion: Completion) -> Reply:
        assistant = self._counted(completion.message)
        cost = cost_of(turn.model, completion.usage, self.settings.prices)
        info = {
            **turn.info,
            "usage": completion.usage.to_dict(),
            "finish_reason": completion.finish_reason,
            "cost": cost,
        }
        slot_id = turn.slot
        with self.store.atomic():  # a fork exists only with its turn, even after a crash
            if turn.fork is not None:
                slot_id = self._fork_for(turn.fork)
                info["forked_from"] = {"slot": turn.slot, "turn": turn.fork.turn.number if turn.fork.turn else None}
            record = self.store.append_turn(self.session_id, slot_id, [turn.user, assistant], info)
            if turn.fork is not None and turn.follow:
                self.store.set_current_slot(self.session_id, slot_id)
        self.usage = self.usage + completion.usage
        return Reply(
            assistant.content,
            assistant,
            completion.usage,
            turn.model,
            slot_id,
            record.number,
            completion.finish_reason,
            cost,
            info,
        )

    def _fork_for(self, plan: CellPlan) -> str:
        """Derive the sibling a fork plan runs on; it behaves like the branch it edits."""
        assert plan.turn is not None
        parent = self.slot(plan.slot)
        strategy = (
            DeriveStrategy.focused_on(parent.config.focused)
            if parent.mode is SlotMode.FOCUSED
            else DeriveStrategy.full()
        )
        name = fork_name(parent.id, frozenset(s.id for s in self.list_slots()))
        self.derive_slot(name, parent.id, strategy, at=plan.turn.start)
        return name
