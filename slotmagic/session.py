"""The Session: slots, histories and turns over a store. Plain Python, no IPython needed.

    with Session.open("my-notes", model="echo") as session:
        session.submit_turn("Hello")
        session.derive_slot("branch")
        session.switch_slot("branch")

The session is the public façade: it checks what it is given and delegates. Turns run in the
turn engine (``engine/turn.py``), diffs and exports read the store (``diff.py``,
``export.py``); the session holds no turn logic of its own.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .core.checks import check_json_mapping, check_optional_text, check_text, check_whole
from .core.compaction import Compaction
from .core.definition import describe_difference
from .core.messages import Message
from .core.records import TurnInfo, TurnRecord
from .core.slots import DeriveStrategy, FocusedConfig, Slot, SlotConfig, SlotMode, SlotSource, validate_slot_id
from .core.usage import Usage
from .diff import BranchDiff, diff_slots
from .engine.budgeting import SlotBudget
from .engine.pipeline import View
from .engine.reply import Reply
from .engine.turn import AsyncTurnStream, TurnEngine, TurnOptions, TurnStream, counted
from .errors import ConfigError, SlotConflict, SlotNotEmpty, SlotReadonly, StoreError
from .export import export_slot
from .providers import ProviderSettings, parse_model
from .snapshot import LastUserCache
from .store import SQLiteStore, Store
from .tree import SlotTree, build_tree

DEFAULT_DB_PATH = Path(".slotmagic") / "state.sqlite3"


def default_db_path() -> str:
    """``$SLOTMAGIC_DB`` if set, else ``.slotmagic/state.sqlite3`` in the working directory."""
    return os.environ.get("SLOTMAGIC_DB") or str(DEFAULT_DB_PATH)


def new_session_id() -> str:
    return time.strftime("session-%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def check_db_path(value: object) -> str:
    """A path to a state file, or ``":memory:"``; anything else is one clear error."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigError(f"db_path must be a file path (str or Path) or ':memory:', not {type(value).__name__}")
    if not value.strip():
        raise ConfigError("db_path is empty: name a state file, e.g. .slotmagic/state.sqlite3, or ':memory:'")
    return check_text(value, "db_path")


def _check_model(value: object) -> str:
    parse_model(check_text(value, "model"))  # refuse a malformed model string now, not at the first turn
    return str(value)


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
        check_text(session_id, "the session id")
        settings = settings or ProviderSettings()
        if not isinstance(settings, ProviderSettings):
            raise ConfigError(f"settings must be a ProviderSettings, not {type(settings).__name__}")
        self.store = store
        self.session_id = session_id
        self._owns_store = owns_store
        self._engine = TurnEngine(
            store, session_id, _check_model(model), check_optional_text(system, "system"), settings
        )
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
        if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
            raise ConfigError("a session id must be a non-empty string")
        _check_model(model)
        check_optional_text(system, "system")
        owns = store is None
        if store is None:
            path = check_db_path(db_path if db_path is not None else default_db_path())
            if durability not in ("normal", "full"):
                raise StoreError(f"unknown durability {durability!r}; use 'normal' or 'full'")
            store = SQLiteStore(path, durability="full" if durability == "full" else "normal")
        try:
            return cls(
                store, session_id or new_session_id(), model=model, system=system, owns_store=owns, settings=settings
            )
        except BaseException:
            if owns:
                store.close()
            raise

    # -- settings --------------------------------------------------------------------------

    @property
    def model(self) -> str:
        return self._engine.model

    @model.setter
    def model(self, value: str) -> None:
        self._engine.model = _check_model(value)

    @property
    def system(self) -> str | None:
        """The system prompt for slots that have none of their own."""
        return self._engine.system

    @system.setter
    def system(self, value: str | None) -> None:
        self._engine.system = check_optional_text(value, "system")

    @property
    def settings(self) -> ProviderSettings:
        """Keys, URLs, timeouts, retries and prices for the providers (see ProviderSettings)."""
        return self._engine.settings

    @settings.setter
    def settings(self, value: ProviderSettings) -> None:
        if not isinstance(value, ProviderSettings):
            raise ConfigError(f"settings must be a ProviderSettings, not {type(value).__name__}")
        self._engine.close_providers()  # the next turn builds providers that use the new settings
        self._engine.settings = value

    @property
    def usage(self) -> Usage:
        """Tokens used by the turns made through this object, all slots."""
        return self._engine.usage

    def close(self) -> None:
        self._engine.close_providers()
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

    def slot(self, slot: str | None = None) -> Slot:
        return self.store.slot(self.session_id, _optional_slot(slot))

    def list_slots(self) -> list[Slot]:
        return self.store.slots(self.session_id)

    def tree(self, cache: LastUserCache | None = None) -> SlotTree:
        """The slots as a tree (parents before children), each with its counts, fork point and
        the first words of its last user message, the current slot marked. A ``cache`` kept
        between calls rereads only the slots whose history changed."""
        return build_tree(self, cache)

    def has_slot(self, slot: str) -> bool:
        return self.store.has_slot(self.session_id, validate_slot_id(slot))

    def create_slot(
        self,
        slot: str,
        config: SlotConfig | None = None,
        *,
        messages: Iterable[Message] | None = None,
        exist_ok: bool = False,
    ) -> Slot:
        """A new empty slot, or a *static* one holding ``messages`` (e.g. a reference document).

        An existing ``slot`` raises ``SlotExists``; with ``exist_ok`` an existing slot of the
        same definition is returned as is (a re-run notebook cell) and one of another
        definition raises ``SlotConflict`` naming the difference.
        """
        validate_slot_id(slot)
        config = _check_config(config)
        preset = [counted(m) for m in _check_messages(messages, "messages")] if messages is not None else []
        if messages is not None:
            config = config.replace(source=SlotSource.static())
        elif config.source.kind == "derived":
            raise ConfigError("use derive_slot() to make a derived slot")
        made, created = self.store.create_slot(self.session_id, slot, config, preset, exist_ok=exist_ok)
        return made if created else self._same_definition(made, config)

    def switch_slot(self, slot: str) -> Slot:
        self.store.set_current_slot(self.session_id, validate_slot_id(slot))
        return self.slot(slot)

    def derive_slot(
        self,
        slot: str,
        parent: str | None = None,
        strategy: DeriveStrategy | FocusedConfig | str | None = "full",
        *,
        at: int | None = None,
        exist_ok: bool = False,
    ) -> Slot:
        """Branch ``parent`` (the current slot by default) into a new slot.

        The new slot shares the parent's history up to ``at`` messages (all by default, else a
        turn boundary); no message is copied. With a focused strategy it sees that history
        through the filter. Turns in either slot are invisible to the other. ``exist_ok``
        works as in :meth:`create_slot` (the fork point is not part of the definition).
        """
        validate_slot_id(slot)
        if at is not None:
            check_whole(at, "at (the fork point, a message position)")
        if exist_ok and parent is None and self.has_slot(slot):
            # Re-running "derive from the current slot" after it switched to the new slot:
            # the parent meant is the one it was derived from.
            parent = self.slot(slot).config.source.parent_id
        parent_slot = self.slot(parent)
        chosen = DeriveStrategy.parse(strategy)
        base = parent_slot.config
        if chosen.kind == "focused":
            mode, focused = SlotMode.FOCUSED, chosen.focused or FocusedConfig()
        else:
            mode, focused = SlotMode.FULL, base.focused
        config = base.replace(mode=mode, focused=focused, source=SlotSource.derived(parent_slot.id, chosen))
        made, created = self.store.derive_slot(self.session_id, slot, parent_slot.id, config, at, exist_ok=exist_ok)
        return made if created else self._same_definition(made, config)

    def _same_definition(self, existing: Slot, config: SlotConfig) -> Slot:
        difference = describe_difference(existing.config, config)
        if difference is not None:
            raise SlotConflict(existing.id, difference)
        return existing

    def configure_slot(self, slot: str | None = None, config: SlotConfig | None = None, **changes: Any) -> Slot:
        """Replace a slot's config, or change some fields: ``configure_slot("a", mode="readonly")``."""
        found = self.slot(slot)
        base = _check_config(config) if config is not None else found.config
        try:
            new = base.replace(**changes)
        except TypeError as exc:
            raise ConfigError(f"cannot configure slot {found.id!r}: {exc}") from None
        return self.store.update_config(self.session_id, found.id, new)

    def rename_slot(self, slot: str, new: str) -> Slot:
        return self.store.rename_slot(self.session_id, validate_slot_id(slot), validate_slot_id(new))

    def delete_slot(self, slot: str, *, force: bool = False, missing_ok: bool = False) -> bool:
        """Delete a slot. Its derived slots keep their whole history; ``default`` stays.

        A slot holding turns that no other slot shares is refused (``SlotNotEmpty``) unless
        ``force``. With ``missing_ok`` an unknown slot is not an error. Returns whether a slot
        was deleted.
        """
        validate_slot_id(slot)
        if missing_ok and not self.has_slot(slot):
            return False
        if not force:
            unique = self.unshared_turns(slot)
            if unique:
                raise SlotNotEmpty(slot, len(unique))
        self.store.delete_slot(self.session_id, slot)
        return True

    def unshared_turns(self, slot: str) -> list[TurnRecord]:
        """The turns of the slot that no other slot's history holds (what deleting it loses)."""
        return self.store.unshared_turns(self.session_id, validate_slot_id(slot))

    # -- histories -------------------------------------------------------------------------

    def messages(self, slot: str | None = None) -> list[Message]:
        """The slot's stored history, every message, in order."""
        return self.store.history(self.session_id, _optional_slot(slot)).messages()

    def turns(self, slot: str | None = None) -> list[TurnRecord]:
        return self.store.history(self.session_id, _optional_slot(slot)).turns()

    def view(self, slot: str | None = None) -> list[Message]:
        """Exactly the messages the model would be sent for the slot's next turn, before the
        new user message (the same code path a real request takes)."""
        return list(self.preview(slot).messages)

    def preview(self, slot: str | None = None, *, model: str | None = None) -> View:
        """The slot's next request entry by entry: where each message came from, what it costs,
        and which stored positions a compaction or the slot's mode leaves out."""
        history = self.store.history(self.session_id, _optional_slot(slot))
        assert history.slot is not None
        return self._engine.view(history.slot, history, model=_check_model(model) if model else None)

    def budget(self, slot: str | None = None, *, model: str | None = None) -> SlotBudget:
        """The slot's next request against its budget by category, the compaction threshold,
        and the compactions so far (``model`` defaults to the session's)."""
        model = _check_model(model) if model else self.model
        history = self.store.history(self.session_id, _optional_slot(slot))
        assert history.slot is not None
        view = self._engine.view(history.slot, history, model=model)
        window, known = self._engine.window(model)
        assert view.report is not None and view.budget is not None
        compactions = tuple(history.compactions())
        return SlotBudget(history.slot.id, model, window, known, view.budget, view.report, view.exact, compactions)

    def compactions(self, slot: str | None = None) -> list[Compaction]:
        """The compactions the slot's view has seen, oldest first (the latest applies)."""
        return self.store.history(self.session_id, _optional_slot(slot)).compactions()

    def compact(
        self,
        slot: str | None = None,
        *,
        keep: int | None = None,
        instructions: str | None = None,
        model: str | None = None,
    ) -> Compaction:
        """Compact the slot now: fold all but its newest messages into a summary (all but the
        last ``keep`` messages, or what does not fit in half the room left for history). The
        stored messages stay; only the model's view changes. ``instructions`` steer what the
        summary keeps."""
        if keep is not None:
            check_whole(keep, "keep", minimum=1)
        check_optional_text(instructions, "instructions")
        model = _check_model(model) if model else self.model
        history = self.store.history(self.session_id, _optional_slot(slot))
        found = history.slot
        assert found is not None
        if found.mode is SlotMode.READONLY:
            raise SlotReadonly(found.id)
        view = self._engine.view(found, history, model=model)
        fold = self._engine.plan_compaction(view, history, model, keep)
        if fold is None:
            hint = "it fits its budget" if keep is None else f"it has no more than {keep} messages to keep"
            raise ConfigError(f"nothing to compact in slot {found.id!r}: {hint} (keep=N folds all but the last N)")
        compaction = self._engine.summarizer(model, view).summarize(fold, instructions)
        return self.store.add_compaction(self.session_id, found.id, compaction, base=history.tip)

    @property
    def context_windows(self) -> dict[str, int]:
        """Context windows that override or extend the built-in table: ``{"openai:my-model":
        32768, "ollama:*": 8192}``; budgets of slots without their own follow them."""
        return dict(self._engine.context_windows)

    @context_windows.setter
    def context_windows(self, value: Mapping[str, int]) -> None:
        self._engine.context_windows = _check_windows(value)

    @property
    def compaction_model(self) -> str | None:
        """The model that writes compaction summaries; None: the turn's own model."""
        return self._engine.compaction_model

    @compaction_model.setter
    def compaction_model(self, value: str | None) -> None:
        self._engine.compaction_model = None if not value else _check_model(value)

    def append(
        self, messages: Iterable[Message], slot: str | None = None, info: Mapping[str, Any] | None = None
    ) -> TurnRecord:
        """Store messages as one turn without calling the model (all or none)."""
        stored = [counted(m) for m in _check_messages(messages, "messages")]
        if not stored:
            raise ConfigError("nothing to append: pass at least one message")
        extra = check_json_mapping(info, "info") if info else {}
        slot_id = _optional_slot(slot)
        info_record = TurnInfo(kind="append", extra=extra)
        return self.store.append_turn(self.session_id, slot_id, stored, info_record, writable=True)

    def diff(self, a: str, b: str) -> BranchDiff:
        """Where two slots' histories part and what each has had since."""
        return diff_slots(self.store, self.session_id, self._slot_id(a), self._slot_id(b))

    def export(self, path: str | os.PathLike[str], slot: str | None = None) -> Path:
        """Write a slot's whole history to a ``.md`` or ``.json`` file."""
        return export_slot(self.store, self.session_id, path, self._slot_id(slot))

    # -- turns -----------------------------------------------------------------------------

    def submit_turn(self, text: str, **options: Any) -> Reply:
        """Send ``text`` as a user turn on the current slot (or ``slot=``) and store the reply.

        Options: ``slot``, ``model``, ``system``, ``temperature``, ``max_tokens``, ``params``
        (provider-specific request fields), ``info`` (recorded with the turn), ``cell_id`` and
        ``rerun`` (see :meth:`stream_turn`). If the model fails, nothing is stored and the
        error says what happened.
        """
        stream = self.stream_turn(text, **options)
        for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def stream_turn(self, text: str, **options: Any) -> TurnStream:
        """Start a turn; iterate the result for the reply's text as it streams.

        ``cell_id`` names the notebook cell the text comes from. Running a cell again with
        unchanged text leaves the session as that cell left it the first time: the stored
        reply (no model call) and, for a turn on the current slot, the slot it ran on made
        current again. Edited text (or ``rerun``) forks a sibling just before the earlier turn
        and runs there (see :mod:`slotmagic.engine.plan`). Without ``cell_id`` turns append.
        """
        return TurnStream(self._engine, *self._engine.start(text, _turn_options(options)))

    async def asubmit_turn(self, text: str, **options: Any) -> Reply:
        stream = self.astream_turn(text, **options)
        async for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def astream_turn(self, text: str, **options: Any) -> AsyncTurnStream:
        return AsyncTurnStream(self._engine, *self._engine.start(text, _turn_options(options)))

    def stored_reply(self, slot: str, turn: TurnRecord) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed``."""
        return self._engine.stored_reply(validate_slot_id(slot), turn)

    # -- internals -------------------------------------------------------------------------

    def _slot_id(self, slot: str | None) -> str:
        return self.current_slot if slot is None else validate_slot_id(slot)


def _check_windows(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"context windows must be a dict of model -> tokens, not {type(value).__name__}")
    checked = {}
    for model, tokens in value.items():
        if not isinstance(model, str):
            raise ConfigError(f"context windows are keyed by model strings, not {model!r}")
        checked[model] = check_whole(tokens, f"the context window of {model}", minimum=1)
    return checked


def _optional_slot(slot: object) -> str | None:
    """A slot id to look up, or None for the current slot."""
    return None if slot is None else validate_slot_id(slot)


def _turn_options(options: Mapping[str, Any]) -> TurnOptions:
    try:
        return TurnOptions(**options)
    except TypeError:
        known = ", ".join(TurnOptions.__dataclass_fields__)
        unknown = ", ".join(sorted(set(options) - set(TurnOptions.__dataclass_fields__)))
        raise ConfigError(f"unknown turn option(s) {unknown}; known: {known}") from None


def _check_config(config: object) -> SlotConfig:
    if config is None:
        return SlotConfig()
    if not isinstance(config, SlotConfig):
        hint = f"; for a mode write SlotConfig(mode={config!r})" if isinstance(config, str) else ""
        raise ConfigError(f"config must be a SlotConfig, not {type(config).__name__}{hint}")
    return config


def _check_messages(messages: object, what: str) -> list[Message]:
    if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Iterable):
        raise ConfigError(f"{what} must be a list of Message values, not {type(messages).__name__}")
    checked = list(messages)
    for message in checked:
        if not isinstance(message, Message):
            raise ConfigError(f"{what} must hold Message values (Message.user(...)), not {type(message).__name__}")
    return checked
