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
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .attach import attach_all
from .core import context as wc
from .core.checks import check_flag, check_json_mapping, check_optional_text, check_text, check_whole
from .core.compaction import Compaction
from .core.context import (
    Author,
    ContextEvent,
    DecisionItem,
    GoalItem,
    QuestionItem,
    StepInfo,
    WorkingContext,
)
from .core.definition import describe_difference
from .core.messages import Message
from .core.records import TurnInfo, TurnRecord
from .core.slots import DeriveStrategy, FocusedConfig, Slot, SlotConfig, SlotMode, SlotSource, validate_slot_id
from .core.usage import Usage
from .core.users import check_user
from .core.workflow import Workflow, check_workflow_name, no_workflow
from .diff import BranchDiff, diff_slots
from .engine.budgeting import SlotBudget, cache_totals
from .engine.cells import CellBook
from .engine.fanout import MAX_CONCURRENCY, FanOut, FanOutResult, plan_fan_out
from .engine.reply import Reply
from .engine.review import Draft, drop_draft, keep_draft, kept_draft
from .engine.turn import AUTO_COMPACT, AsyncTurnStream, TurnEngine, TurnOptions, TurnStream, counted
from .engine.view import View
from .engine.warm import warm_up
from .errors import ConfigError, DamagedRecord, SlotConflict, SlotNotEmpty, SlotReadonly, StoreError
from .explore import Explorer, Merge
from .export import export_slot
from .providers import ProviderSettings, parse_model
from .snapshot import LastUserCache
from .store import Store, check_target, open_store
from .store.base import GcReport, History, Mark, SearchHit, UndoStep
from .tools import Tool, ToolRegistry
from .tools.variables import READ_VARIABLE, read_variable_tool
from .tree import SlotTree, build_tree

if TYPE_CHECKING:
    from .compare import Comparison

DEFAULT_DB_PATH = Path(".slotmagic") / "state.sqlite3"


def default_db_path() -> str:
    """``$SLOTMAGIC_DB`` if set, else ``.slotmagic/state.sqlite3`` in the working directory."""
    return os.environ.get("SLOTMAGIC_DB") or str(DEFAULT_DB_PATH)


def new_session_id() -> str:
    return time.strftime("session-%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def check_db_path(value: object) -> str:
    """A path to a state file, ``":memory:"`` or a ``postgresql://`` URL; anything else is one
    clear error (the store checks it again, for callers that open one directly)."""
    return check_target(value)


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
        if not callable(getattr(store, "ensure_session", None)) or not callable(getattr(store, "history", None)):
            raise ConfigError(
                f"store must be a slotmagic store (slotmagic.store.open_store(path) makes one), not "
                f"{type(store).__name__} {store!r:.60}; or pass db_path= instead"
            )
        settings = settings or ProviderSettings()
        if not isinstance(settings, ProviderSettings):
            raise ConfigError(f"settings must be a ProviderSettings, not {type(settings).__name__}")
        self.store = store
        self.session_id = session_id
        self._owns_store = owns_store
        self._engine = TurnEngine(
            store, session_id, _check_model(model), check_optional_text(system, "system"), settings
        )
        self._engine.slot_tools = self._slot_tools
        self._explorer = Explorer(store, session_id, self._engine)
        self.context_updates = False  # offer the model the tools that change a working context
        self._max_concurrency = MAX_CONCURRENCY  # a fan-out's requests in flight at once
        # (store generation, model), the slot list and the tree made of it: see tree()
        self._tree: tuple[tuple[int, str], list[Slot], SlotTree] | None = None
        self.cells = CellBook(store, session_id)  # what notebook cells did, for replay
        store.ensure_session(session_id)
        self._warming = warm_up(self.model, self._engine.window)  # off the first turn's path

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
        user: str | None = None,
        readonly: bool = False,
    ) -> Session:
        """Open (or start) a session in the store at ``db_path``.

        ``db_path`` defaults to ``$SLOTMAGIC_DB`` or ``.slotmagic/state.sqlite3``; ``":memory:"``
        keeps nothing; a ``postgresql://`` URL opens the PostgreSQL store. A given ``store`` is
        used as is and left open on ``close()``. ``user`` is recorded with each turn (default:
        ``$SLOTMAGIC_USER``, JupyterHub's ``$JUPYTERHUB_USER``, else the OS user).
        ``readonly=True`` opens an existing session as a view (another person's, say): it is
        read and followed as usual, and every write is refused in one line.
        """
        if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
            raise ConfigError("a session id must be a non-empty string")
        _check_model(model)
        check_optional_text(system, "system")
        checked_user = check_user(user) if user is not None else None
        if not isinstance(readonly, bool):
            raise ConfigError(f"readonly must be True or False, not {readonly!r:.40}")
        owns = store is None
        if store is not None and db_path is not None:
            raise ConfigError("give Session.open a db_path or a store, not both")
        if readonly and (store is not None or session_id is None):
            raise ConfigError("readonly=True opens its own view of a named session: give session_id and db_path")
        if store is None:
            path = check_db_path(db_path if db_path is not None else default_db_path())
            if durability not in ("normal", "full"):
                raise StoreError(f"unknown durability {durability!r}; use 'normal' or 'full'")
            store = open_store(path, durability="full" if durability == "full" else "normal", create=not readonly)
        try:
            if readonly:
                assert session_id is not None
                if session_id not in store.sessions():
                    raise StoreError(f"there is no session {session_id!r} in this store to view")
                store.view_only(session_id)
            if checked_user is not None:
                store.user = checked_user
            return cls(
                store, session_id or new_session_id(), model=model, system=system, owns_store=owns, settings=settings
            )
        except BaseException:
            if owns:
                store.close()
            raise

    # -- settings --------------------------------------------------------------------------

    @property
    def user(self) -> str | None:
        """Who the turns this session's store writes are recorded as made by."""
        return self.store.user

    @user.setter
    def user(self, value: str | None) -> None:
        self.store.user = check_user(value) if value is not None else None

    @property
    def readonly(self) -> bool:
        """Whether this is a read-only view (``Session.open(..., readonly=True)``)."""
        return self.store.viewing

    @property
    def model(self) -> str:
        return self._engine.model

    @model.setter
    def model(self, value: str) -> None:
        self._engine.model = _check_model(value)
        self._warming = warm_up(self._engine.model, self._engine.window)

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
    def tools(self) -> ToolRegistry:
        """The tools this session's turns may offer: every ``@slotmagic.tool`` of the process,
        plus what is added here (``session.tools.add(fn)``), less what is removed here. A slot
        narrows them (``configure_slot(tools=[...])``) and a turn too (``tools=[...]``)."""
        return self._engine.tools

    @property
    def max_tool_rounds(self) -> int:
        """How many rounds of tool calls a turn may take before it stops (8)."""
        return self._engine.max_tool_rounds

    @max_tool_rounds.setter
    def max_tool_rounds(self, value: int) -> None:
        self._engine.max_tool_rounds = check_whole(value, "max_tool_rounds", minimum=1)

    @property
    def prompt_cache(self) -> bool:
        """Mark each request's stable prefix for the provider's prompt cache (Anthropic's
        ``cache_control``; OpenAI caches a repeated prefix by itself). On by default."""
        return bool(self._engine.prompt_cache)

    @prompt_cache.setter
    def prompt_cache(self, value: bool) -> None:
        self._engine.prompt_cache = check_flag(value, "prompt_cache")

    @property
    def namespace_threshold(self) -> int:
        """Tool results larger than this many bytes are kept aside (2,048 by default)."""
        return self._engine.namespace.threshold

    @namespace_threshold.setter
    def namespace_threshold(self, value: int) -> None:
        self._engine.namespace.threshold = check_whole(value, "namespace_threshold", minimum=1)

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
        between calls rereads only the slots whose history changed; nothing is read again
        while the store is unchanged (the same tree is returned: widgets on screen share it)."""
        key = (self.store.generation(), self.model)
        if self._tree is not None and self._tree[0] == key:
            return self._tree[2]
        previous = None if self._tree is None or self._tree[0][1] != key[1] else self._tree[1:]
        slots = self.list_slots()
        tree = build_tree(self, cache, previous, slots)
        self._tree = (key, slots, tree)
        return tree

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
        check_flag(exist_ok, "exist_ok")
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
        check_flag(exist_ok, "exist_ok")
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
        check_flag(force, "force")
        check_flag(missing_ok, "missing_ok")
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

    def messages(self, slot: str | None = None, *, expand: bool = False) -> list[Message]:
        """The slot's stored history, every message, in order. Large tool results appear as
        the ``namespace://`` reference the model saw; ``expand=True`` gives their text back."""
        messages = self.store.history(self.session_id, _optional_slot(slot)).messages()
        return self._engine.namespace.expand(messages) if expand else messages

    def last_message(self, slot: str | None = None, role: str = "user") -> Message | None:
        """The slot's last stored message of ``role``, reading only the end of its history."""
        history = self.store.history(self.session_id, _optional_slot(slot))
        hi, chunk = len(history), 8
        while hi > 0:  # backwards a chunk at a time, each message read once
            lo = max(0, hi - chunk)
            found = next((m for m in reversed(history.messages(lo, hi)) if m.role == role), None)
            if found is not None:
                return found
            hi, chunk = lo, chunk * 4
        return None

    def last_messages(self, slots: Iterable[str], role: str = "user") -> dict[str, Message | None]:
        """The last stored message of ``role`` of each of ``slots``, by slot id: what
        :meth:`last_message` gives one slot, read for many at once (a stretch of history they
        share is read once)."""
        ids = [validate_slot_id(slot) for slot in slots]
        return self.store.last_messages(self.session_id, ids, role)

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
        and the compactions so far (``model`` defaults to the slot's, else the session's)."""
        history = self.store.history(self.session_id, _optional_slot(slot))
        assert history.slot is not None
        model = _check_model(model) if model else history.slot.config.model or self.model
        view = self._engine.view(history.slot, history, model=model)
        window, known = self._engine.window(model)
        assert view.report is not None and view.budget is not None
        compactions = tuple(history.compactions())
        cached, saved = cache_totals(history.cached_turns(), self.settings.prices)
        return SlotBudget(
            history.slot.id, model, window, known, view.budget, view.report, view.exact, compactions, cached, saved
        )

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
        preview: bool = False,
        apply: bool = False,
        summary: str | None = None,
    ) -> Compaction:
        """Compact the slot now: fold all but its newest messages into a summary (all but the
        last ``keep`` messages, or what does not fit in half the room left for history). The
        stored messages stay; only the model's view changes. ``instructions`` steer what the
        summary keeps.

        Reviewed: with ``preview`` the summary is made and kept as the slot's draft, nothing
        applied (:meth:`compaction_draft`); ``apply`` then applies exactly that draft, asking no
        model, or ``summary`` in its place (an edited text). ``summary`` alone applies a summary
        of your own over what would be folded."""
        check_flag(preview, "preview")
        check_flag(apply, "apply")
        if preview and (apply or summary is not None):
            raise ConfigError("preview shows a summary without applying it: use apply=True (or summary=) afterwards")
        if keep is not None:
            check_whole(keep, "keep", minimum=1)
        check_optional_text(instructions, "instructions")
        if summary is not None and not check_text(summary, "summary").strip():
            raise ConfigError("the summary is empty: write what the folded messages should be replaced by")
        model = _check_model(model) if model else self.model
        history = self.store.history(self.session_id, _optional_slot(slot))
        found = history.slot
        assert found is not None
        if found.mode is SlotMode.READONLY:
            raise SlotReadonly(found.id)
        view = self._engine.view(found, history, model=model)
        summarizer = self._engine.summarizer(model, view)
        if apply:
            draft = kept_draft(self.store, self.session_id, found.id)
            if draft is None:
                raise ConfigError(
                    f"no summary was previewed for slot {found.id!r}: %slot compact --preview {found.id} "
                    "(compact(preview=True)) makes one to review"
                )
            draft.check(history)
            made = draft.compaction
            if summary is not None:
                made = made.replace(text=" ".join(summary.split()), method="edited", model=None, note=None)
                made = made.replace(tokens_after=summarizer.counting.count(made.message()))
            return self._apply_compaction(found.id, history, view, made)
        fold = self._engine.plan_compaction(view, history, model, keep)
        if fold is None:
            hint = "it fits its budget" if keep is None else f"it has no more than {keep} messages to keep"
            raise ConfigError(f"nothing to compact in slot {found.id!r}: {hint} (keep=N folds all but the last N)")
        if summary is not None:
            return self._apply_compaction(found.id, history, view, summarizer.written(fold, summary))
        compaction = summarizer.summarize(fold, instructions)
        if preview:
            after = fold.previous.upto if fold.previous is not None else 0
            keep_draft(self.store, self.session_id, Draft(found.id, compaction, history.tip, after))
            return compaction
        return self._apply_compaction(found.id, history, view, compaction)

    def compaction_draft(self, slot: str | None = None) -> Compaction | None:
        """The summary previewed for the slot and not applied yet (None: there is none)."""
        found = self.slot(slot)
        draft = kept_draft(self.store, self.session_id, found.id)
        return None if draft is None else draft.compaction

    def _apply_compaction(self, slot: str, history: History, view: View, compaction: Compaction) -> Compaction:
        assert view.report is not None
        room = view.report.history_available + view.report.system.used
        if compaction.method == "edited" and compaction.tokens_after > room:
            raise ConfigError(
                f"the summary takes {compaction.tokens_after:,} tokens, more than the {room:,} slot {slot!r} has "
                "room for: shorten it"
            )
        stored = self.store.add_compaction(self.session_id, slot, compaction, base=history.tip)
        drop_draft(self.store, self.session_id, slot)
        return stored

    @property
    def context_windows(self) -> dict[str, int]:
        """Context windows that win over the model data (genai-prices, an Ollama server): ``{"openai:my-model":
        32768, "ollama:*": 8192}``; budgets of slots without their own follow them."""
        return dict(self._engine.context_windows)

    @context_windows.setter
    def context_windows(self, value: Mapping[str, int]) -> None:
        self._engine.context_windows = _check_windows(value)

    @property
    def auto_compact(self) -> str:
        """What a turn past the compaction threshold does: "on" compacts first, "ask" stops with
        the numbers and the commands to review the summary (``CompactionNeeded``), "off" refuses."""
        return self._engine.auto_compact

    @auto_compact.setter
    def auto_compact(self, value: str) -> None:
        if value not in AUTO_COMPACT:
            raise ConfigError(f"auto_compact must be one of {', '.join(AUTO_COMPACT)}, not {value!r:.60}")
        self._engine.auto_compact = value

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

    def read_namespace(self, ref: str, offset: int = 0, length: int = 4000) -> str:
        """A page of a large tool result kept aside (what the ``read_namespace`` tool returns)."""
        check_text(ref, "ref")
        return self._engine.namespace.read(ref, check_whole(offset, "offset"), check_whole(length, "length", minimum=1))

    def diff(self, a: str, b: str) -> BranchDiff:
        """Where two slots' histories part and what each has had since."""
        return diff_slots(self.store, self.session_id, self._slot_id(a), self._slot_id(b))

    def compare(self, *slots: str, since_fork: bool = False) -> Comparison:
        """Several slots side by side: each one's last reply, or with ``since_fork`` every
        turn since the point where they part (``print()`` it, or show it in a notebook)."""
        from .compare import compare_slots  # here: importing it (and its columns) costs every kernel

        return compare_slots(self.store, self.session_id, [self._slot_id(s) for s in slots], since_fork=since_fork)

    def export(self, path: str | os.PathLike[str], slot: str | None = None) -> Path:
        """Write a slot's whole history to a ``.md`` or ``.json`` file."""
        return export_slot(self.store, self.session_id, path, self._slot_id(slot))

    # -- exploring branches: the logic is in explore.py ----------------------------------------

    def merge(
        self, child: str, *, into: str | None = None, as_: str = "summary", instructions: str | None = None
    ) -> Merge:
        """Fold what ``child`` has had since it left ``into`` (its parent by default) into
        ``into`` as one turn: a summary (``as_="summary"``) or its messages (``"messages"``)."""
        into = None if into is None else self._slot_id(into)
        return self._explorer.merge(self._slot_id(child), into, as_, instructions, self.model)

    def undo(self, slot: str | None = None, turns: int = 1, *, cell: str | None = None) -> UndoStep:
        """Move the slot's tip back ``turns`` turns; nothing is deleted, ``redo`` returns."""
        return self._explorer.undo(_optional_slot(slot), turns, cell)

    def redo(self, slot: str | None = None, *, branch: str | None = None) -> UndoStep:
        """Return the slot to where its latest undo took it from; with ``branch``, make that
        history a new slot instead (the slot stays as it is)."""
        return self._explorer.redo(_optional_slot(slot), branch)

    def undo_steps(self, slot: str | None = None) -> list[UndoStep]:
        """The slot's undo steps, newest first, each with the undone turns still readable."""
        return self.store.undo_steps(self.session_id, _optional_slot(slot))

    def pin(self, position: int, slot: str | None = None) -> int:
        """Keep the message at ``position`` (negative: from the end) in the model's view
        whatever the focused filter or a compaction leaves out; returns the position."""
        return self._explorer.mark(position, "pin", _optional_slot(slot))

    def exclude(self, position: int, slot: str | None = None) -> int:
        """Never send the message at ``position`` to the model (it stays stored)."""
        return self._explorer.mark(position, "exclude", _optional_slot(slot))

    def unmark(self, position: int, slot: str | None = None) -> int:
        """Clear a pin or an exclusion."""
        return self._explorer.mark(position, "clear", _optional_slot(slot))

    def marks(self, slot: str | None = None) -> dict[int, Mark]:
        """The slot's pinned and excluded positions."""
        return self.store.history(self.session_id, _optional_slot(slot)).marks()

    def search(self, text: str, *, slot: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages of every slot (or of ``slot``'s history) holding every word of ``text``."""
        return self._explorer.search(text, _optional_slot(slot), limit)

    def gc(self, *, drop_undo: bool = False) -> GcReport:
        """Remove what nothing can reach any more and shrink the file (``drop_undo``: forget
        the undo history first)."""
        return self._explorer.gc(check_flag(drop_undo, "drop_undo"))

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
        return TurnStream(self._engine, *self._engine.start(text, self._turn_options(options)))

    async def asubmit_turn(self, text: str, **options: Any) -> Reply:
        stream = self.astream_turn(text, **options)
        async for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def astream_turn(self, text: str, **options: Any) -> AsyncTurnStream:
        return AsyncTurnStream(self._engine, *self._engine.start(text, self._turn_options(options)))

    def allow_variables(self, namespace: Mapping[str, Any] | None) -> None:
        """Let the opt-in ``read_variable`` tool read ``namespace`` (a kernel's ``user_ns``;
        None: no namespace). It is offered only to a turn with ``read_variables=True`` or whose
        tools (or its slot's) name it; it never evaluates code."""
        if namespace is None:
            self._engine.optional_tools.pop(READ_VARIABLE, None)
        else:
            self._engine.optional_tools[READ_VARIABLE] = read_variable_tool(namespace)

    def _turn_options(self, options: Mapping[str, Any]) -> TurnOptions:
        """The options checked; ``attachments`` (objects, or a dict of label -> object) made
        into what the model reads (see :mod:`slotmagic.attach`)."""
        if "attachments" in options:
            made = attach_all(options["attachments"], threshold=self.namespace_threshold)
            options = {**options, "attachments": made}
        return _turn_options(options)

    def stored_reply(self, slot: str, turn: TurnRecord) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed``."""
        return self._engine.stored_reply(validate_slot_id(slot), turn)

    # -- fan-out (see slotmagic.engine.fanout) ----------------------------------------------

    @property
    def max_concurrency(self) -> int:
        """How many requests of a fan-out are in flight at once (4)."""
        return self._max_concurrency

    @max_concurrency.setter
    def max_concurrency(self, value: int) -> None:
        self._max_concurrency = check_whole(value, "max_concurrency", minimum=1)

    def fan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Any,
    ) -> FanOutResult:  # fmt: skip
        """Send ``text`` to several slots (names, ``"all"``, globs like ``"draft-*"``) and/or
        models at once; each model's reply goes to a new branch named after it
        (``default.gpt-4o-mini``). Returns the columns keyed by slot (or branch), each with
        its reply or its error: one failure raises nothing. Other options as for
        :meth:`submit_turn` (``cell_id`` replays and forks every column as it does one turn).
        """
        return self.plan_fan_out(text, slots=slots, models=models, **options).run_sync()

    async def afan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Any,
    ) -> FanOutResult:  # fmt: skip
        """:meth:`fan_out` on the running event loop."""
        return await self.plan_fan_out(text, slots=slots, models=models, **options).run()

    def plan_fan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Any,
    ) -> FanOut:  # fmt: skip
        """A fan-out with its columns planned (replayed ones complete), to ``run()`` or
        ``run_sync(on_event)``: what the magic uses to show columns as they stream."""
        return plan_fan_out(self._engine, text, slots, models, _turn_options(options), self.max_concurrency)

    # -- working context (seed T5) ------------------------------------------------------------

    @property
    def working_context_turns(self) -> int | None:
        """For how many turns a change to a slot's goals, decisions or questions is sent with
        its requests (the current step always is; everything once after a compaction). None
        sends no working context at all; ``configure_slot(working_context=False)`` (``%ctx
        off``) does so for one slot."""
        return self._engine.working_context_turns

    @working_context_turns.setter
    def working_context_turns(self, value: int | None) -> None:
        self._engine.working_context_turns = None if value is None else check_whole(value, "working_context_turns")

    def context(self, slot: str | None = None) -> WorkingContext:
        """The slot's working context: goals, decisions, questions and the current step,
        each with the turn it last changed in (``print()`` it for the whole of it)."""
        return self.store.history(self.session_id, _optional_slot(slot)).context()

    def context_history(self, slot: str | None = None) -> list[ContextEvent]:
        """Every change the slot's working context has seen, oldest first (``.describe()``
        says what changed, ``.turn`` in which turn, ``.by`` whether the model made it)."""
        return self.store.history(self.session_id, _optional_slot(slot)).context_events()

    def change_context(
        self, change: Callable[[WorkingContext], ContextEvent | None], *, slot: str | None = None
    ) -> tuple[WorkingContext, ContextEvent | None]:
        """Apply one change made by a function of ``slotmagic.core.context`` (checked against
        the context and stored in one transaction); the context after it, and the change as
        stored (None when it was already there)."""
        return self.store.change_context(self.session_id, _optional_slot(slot), change)

    def add_goal(self, text: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        """A new active goal (``g1``, ``g2`` …); a goal with the same text is returned as it is."""
        context, event = self.change_context(lambda c: wc.add_goal(c, text, by), slot=slot)
        found = context.goal(event.item_id) if event else context.goal_with_text(text.strip())
        assert found is not None
        return found

    def complete_goal(self, goal_id: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        context, _ = self.change_context(lambda c: wc.set_goal_status(c, goal_id, "completed", by), slot=slot)
        return context.goal(goal_id.strip())

    def cancel_goal(self, goal_id: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        context, _ = self.change_context(lambda c: wc.set_goal_status(c, goal_id, "cancelled", by), slot=slot)
        return context.goal(goal_id.strip())

    def decide(
        self, question: str, decision: str, reason: str = "", *, slot: str | None = None, by: Author = "user"
    ) -> DecisionItem:
        """Record a decision (``d1`` …) on a question; deciding a question again replaces it."""
        context, event = self.change_context(lambda c: wc.record_decision(c, question, decision, reason, by), slot=slot)
        found = context.decision(event.item_id) if event else context.decision_on(question.strip())
        assert found is not None
        return found

    def ask(self, question: str, *, slot: str | None = None, by: Author = "user") -> QuestionItem:
        """An open question (``q1`` …); a question with the same text is returned as it is."""
        context, event = self.change_context(lambda c: wc.ask_question(c, question, by), slot=slot)
        found = context.question(event.item_id) if event else context.question_with_text(question.strip())
        assert found is not None
        return found

    def resolve(self, question_id: str, answer: str, *, slot: str | None = None, by: Author = "user") -> QuestionItem:
        context, _ = self.change_context(lambda c: wc.resolve_question(c, question_id, answer, by), slot=slot)
        return context.question(question_id.strip())

    def set_step(
        self,
        name: str | None = None,
        *,
        status: str | None = None,
        note: str | None = None,
        slot: str | None = None,
        by: Author = "user",
    ) -> StepInfo:
        """The current step: a new ``name`` starts one (in progress unless ``status`` says
        pending, done or blocked); no name changes the current step's status or note."""
        context, _ = self.change_context(lambda c: wc.set_step(c, name, status, note, by), slot=slot)
        assert context.step is not None
        return context.step

    def clear_context(self, slot: str | None = None) -> WorkingContext:
        """Empty the slot's working context (its history of changes stays)."""
        return self.change_context(lambda c: wc.clear(c), slot=slot)[0]

    def _slot_tools(self, slot: Slot, view: View) -> list[Tool[..., Any]]:
        """What a turn on ``slot`` offers besides the session's tools: ``read_context`` when its
        request carries the working-context block (the rest of the context is a call away; a
        request without the block stays byte for byte as without the feature), and the update
        tools when ``context_updates`` is on; none when the working context is off."""
        if self.working_context_turns is None or not slot.config.working_context:
            return []
        if not self.context_updates and not any(e.kind == "context" for e in view.entries):
            return []
        return list(self.context_tools(slot.id, updates=self.context_updates))

    def context_tools(self, slot: str | None = None, *, updates: bool = False) -> list[Tool[..., str]]:
        """Tools that give the model the slot's working context: ``read_context``, and with
        ``updates`` the tools to change it (marked as made by the model). ``slot`` None: the
        current slot when a tool runs."""
        from .tools.context import context_tools

        return context_tools(self, slot, updates=updates)

    # -- workflows (seed T4) -------------------------------------------------------------------

    def workflow(self, name: str | None = None, edges: str | None = None) -> Workflow:
        """With ``edges`` (an edge list, one ``a -> b [label]`` per line): define the workflow
        ``name`` or update it (steps that still exist keep their status) and make it the
        active one; the same edges again change nothing. Without: the workflow ``name``, or
        the active one."""
        if edges is None:
            if name is None:
                return self._active_workflow()
            return self._named_workflow(check_workflow_name(name))
        check_workflow_name(name)
        assert name is not None

        def define(found: Workflow | None) -> Workflow:
            if found is None:
                return Workflow.define(name, edges)
            return found if found.body == edges else found.redefine(edges)

        made = self.store.update_workflow(self.session_id, name, define, activate=True)
        assert made is not None
        return made

    def workflows(self) -> list[Workflow]:
        """The session's workflows in the order they were defined (``.active`` marks one)."""
        return self.store.workflows(self.session_id)

    def active_workflow(self) -> Workflow | None:
        """The workflow whose block requests carry, or None."""
        return self.store.active_workflow(self.session_id)

    def use_workflow(self, name: str | None) -> Workflow | None:
        """Make ``name`` the active workflow (None: none is, and requests carry no block)."""
        return self.store.use_workflow(self.session_id, None if name is None else check_workflow_name(name))

    def set_workflow_status(self, node: str, status: str, *, workflow: str | None = None) -> Workflow:
        """Set a step's status: pending, in_progress, done or blocked."""
        return self._change_workflow(workflow, lambda w: w.with_status(node, status))

    def set_workflow_current(self, node: str, *, workflow: str | None = None) -> Workflow:
        return self._change_workflow(workflow, lambda w: w.with_current(node))

    def attach_workflow_step(self, node: str, slot: str | None, *, workflow: str | None = None) -> Workflow:
        """Record the slot where a step is explored (None: none)."""
        if slot is not None:
            slot = self.slot(slot).id  # an unknown slot is refused, with a suggestion
        return self._change_workflow(workflow, lambda w: w.with_slot(node, slot))

    def delete_workflow(self, name: str | None = None) -> Workflow | None:
        """Delete a workflow (the active one by default); returns it as it was (None when it
        could not be read: a damaged workflow is deleted all the same)."""
        try:
            found: Workflow | None = self.workflow(name)
        except DamagedRecord as exc:  # the active one, damaged
            name, found = exc.name, None
        except ConfigError:
            damaged = [d for d in self.store.damaged_workflows(self.session_id) if d.name == name]
            if not damaged:
                raise
            found = None
        target = found.name if found is not None else name
        assert target is not None
        self.store.update_workflow(self.session_id, target, lambda _: None)
        return found

    def _active_workflow(self) -> Workflow:
        found = self.active_workflow()
        if found is None:
            known = [w.name for w in self.workflows()]
            hint = (
                f"choose one with %workflow use NAME ({', '.join(known)})"
                if known
                else "define one with %%workflow NAME"
            )
            raise ConfigError(f"no workflow is active in this session; {hint}")
        return found

    def _named_workflow(self, name: str) -> Workflow:
        found = {w.name: w for w in self.workflows()}
        if name not in found:
            raise no_workflow(name, list(found))
        return found[name]

    def _change_workflow(self, name: str | None, change: Callable[[Workflow], Workflow]) -> Workflow:
        target = self.workflow(name).name

        def apply(found: Workflow | None) -> Workflow:
            if found is None:  # deleted meanwhile
                raise no_workflow(target, [w.name for w in self.workflows()])
            return change(found)

        changed = self.store.update_workflow(self.session_id, target, apply)
        assert changed is not None
        return changed

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
