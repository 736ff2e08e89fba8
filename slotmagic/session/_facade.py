"""The Session: slots and turns over a store, and the groups that do the rest. Plain Python,
no IPython needed.

    with Session.open("my-notes", model="echo") as session:
        session.submit_turn("Hello")
        session.derive_slot("branch")
        session.switch_slot("branch")
        session.context.add_goal("Get the deposit back")
        session.history.undo()

The session is the public façade: it checks what it is given and delegates. Its own methods
are what a user does most (turns, slots, what the next request holds); the rest is grouped by
concern: ``session.context`` (_context.py), ``session.workflows`` (_workflows.py),
``session.history`` (_history.py), ``session.compactions`` (_compactions.py) and
``session.options`` (_options.py). Turns run in the turn engine (``_engine/run/turn.py``).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._core.checks import check_flag, check_json_mapping, check_optional_text, check_text, check_whole
from .._core.messages import Message
from .._core.records import TurnInfo, TurnRecord
from .._core.slots import (
    DeriveStrategy,
    FocusedConfig,
    Slot,
    SlotConfig,
    SlotMode,
    SlotSource,
    validate_slot_id,
)
from .._core.usage import Usage
from .._core.users import check_user
from .._engine.plan.cells import CellBook
from .._engine.run.fanout import FanOut, FanOutResult, plan_fan_out
from .._engine.run.reply import Reply
from .._engine.run.turn import AsyncTurnStream, TurnEngine, TurnStream, counted
from .._engine.run.warm import warm_up
from .._engine.view.budgeting import SlotBudget, cache_totals
from .._engine.view.next_view import next_view
from .._engine.view.view import View
from .._errors import ConfigError, SlotNotEmpty, StoreError
from .._store import Store, open_store
from .._store.base import TreeSlot
from .._tree import SlotTree, build_tree, gc_deferred
from ..providers import ProviderSettings
from ..providers._settings import default_settings
from ..tools import McpServers, ToolRegistry
from ..tools._mcp import servers_of
from ._checks import check_config, check_messages, check_model, optional_slot, same_definition, turn_options
from ._compactions import Compactions
from ._context import SessionContext
from ._history import SessionHistory
from ._names import check_db_path, default_db_path, new_session_id
from ._options import Options
from ._turn_args import FanOutArgs, TurnArgs
from ._workflows import Workflows

if TYPE_CHECKING:  # typing.Unpack from Python 3.11; typing_extensions has it for type checkers
    from typing_extensions import Unpack


class Session:
    """One conversation workspace: named slots (message histories) and a current slot.

    Grouped by concern: ``context`` (the working context), ``workflows``, ``history`` (undo,
    marks, search, diffs, exports, merges), ``compactions`` and ``options`` (settings of turns);
    ``mcp`` holds the MCP servers whose tools turns offer (:class:`slotmagic.tools.McpServers`)."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        model: str = "echo",
        system: str | None = None,
        owns_store: bool = False,
        settings: ProviderSettings | None = None,
        mcp: McpServers | Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ConfigError("a session id must be a non-empty string")
        check_text(session_id, "the session id")
        if not callable(getattr(store, "ensure_session", None)) or not callable(getattr(store, "history", None)):
            raise ConfigError(
                f"store must be a slotmagic store (slotmagic._store.open_store(path) makes one), not "
                f"{type(store).__name__} {store!r:.60}; or pass db_path= instead"
            )
        settings = settings or default_settings()
        if not isinstance(settings, ProviderSettings):
            raise ConfigError(f"settings must be a ProviderSettings, not {type(settings).__name__}")
        self.store = store
        self.session_id = session_id
        self._owns_store = owns_store
        self.mcp, self._owns_mcp = servers_of(mcp)  # MCP servers: made here from a dict (stopped at close), or shared
        self._engine = TurnEngine(
            store, session_id, check_model(model), check_optional_text(system, "system"), settings
        )
        self.options = Options(self._engine)
        self.context = SessionContext(self._engine)
        self._engine.slot_tools = self.context.offered  # the working-context tools: no way back to the session
        self._engine.mcp = self.mcp
        self.workflows = Workflows(store, session_id)
        self.history = SessionHistory(self._engine)
        self.compactions = Compactions(self._engine)
        # (store generation, model), the slots as the tree lists them and the tree made of them: see tree()
        self._tree: tuple[tuple[int, str], list[TreeSlot], SlotTree] | None = None
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
        mcp: McpServers | Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Session:
        """Open (or start) a session in the store at ``db_path``.

        ``db_path`` defaults to ``$SLOTMAGIC_DB`` or ``.slotmagic/state.sqlite3``; ``":memory:"``
        keeps nothing; a ``postgresql://`` URL opens the PostgreSQL store. A given ``store`` is
        used as is and left open on ``close()``. ``user`` is recorded with each turn (default:
        ``$SLOTMAGIC_USER``, JupyterHub's ``$JUPYTERHUB_USER``, else the OS user).
        ``readonly=True`` opens an existing session as a view (another person's, say): it is
        read and followed as usual, and every write is refused in one line. ``mcp``: MCP servers
        whose tools turns offer, ``{"time": {"command": "mcp-server-time"}}`` or a shared ``McpServers``.
        """
        if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
            raise ConfigError("a session id must be a non-empty string")
        check_model(model)
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
                store, session_id or new_session_id(), model=model, system=system, owns_store=owns, settings=settings,
                mcp=mcp,
            )  # fmt: skip
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
        self._engine.model = check_model(value)
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
    def usage(self) -> Usage:
        """Tokens used by the turns made through this object, all slots."""
        return self._engine.usage

    def close(self) -> None:
        self._engine.close_providers()
        if self._owns_mcp:
            self.mcp.close()
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
        return self.store.slot(self.session_id, optional_slot(slot))

    def list_slots(self) -> list[Slot]:
        return self.store.slots(self.session_id)

    def tree(self) -> SlotTree:
        """The slots as a tree (parents before children), each with its counts, fork point and
        the first words of its last user message, the current slot marked. An unchanged store
        returns the same tree (widgets on screen share it); after a change, only the slots that
        changed are made again, and only those whose history changed read it."""
        key = (self.store.generation(), self.model)
        if self._tree is not None and self._tree[0] == key:
            return self._tree[2]
        previous = None if self._tree is None or self._tree[0][1] != key[1] else self._tree[1:]
        with gc_deferred():
            listing = self.store.tree_slots(self.session_id, questions=previous is None)
            tree = build_tree(self, listing, previous)
        self._tree = (key, listing[0], tree)
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
        config = check_config(config)
        preset = [counted(m) for m in check_messages(messages, "messages")] if messages is not None else []
        if messages is not None:
            config = config.replace(source=SlotSource.static())
        elif config.source.kind == "derived":
            raise ConfigError("use derive_slot() to make a derived slot")
        made, created = self.store.create_slot(self.session_id, slot, config, preset, exist_ok=exist_ok)
        return made if created else same_definition(made, config)

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
        return made if created else same_definition(made, config)

    def configure_slot(self, slot: str | None = None, config: SlotConfig | None = None, **changes: Any) -> Slot:
        """Replace a slot's config, or change some fields: ``configure_slot("a", mode="readonly")``."""
        found = self.slot(slot)
        base = check_config(config) if config is not None else found.config
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
            unique = self.history.unshared_turns(slot)
            if unique:
                raise SlotNotEmpty(slot, len(unique))
        self.store.delete_slot(self.session_id, slot)
        return True

    # -- histories -------------------------------------------------------------------------

    def messages(self, slot: str | None = None, *, expand: bool = False) -> list[Message]:
        """The slot's stored history, every message, in order. Large tool results appear as
        the ``namespace://`` reference the model saw; ``expand=True`` gives their text back."""
        messages = self.store.history(self.session_id, optional_slot(slot)).messages()
        return self._engine.namespace.expand(messages) if expand else messages

    def view(self, slot: str | None = None, *, params: Mapping[str, Any] | None = None) -> list[Message]:
        """Exactly the messages the model would be sent for the slot's next turn, before the
        new user message (the same code path a real request takes)."""
        return list(self.preview(slot, params=params).messages)

    def preview(
        self, slot: str | None = None, *, model: str | None = None, params: Mapping[str, Any] | None = None
    ) -> View:
        """The slot's next request entry by entry: where each message came from, what it costs,
        and which stored positions a compaction or the slot's mode leaves out. ``params``: the
        turn's provider parameters (``submit_turn(params=…)``), where they change what is sent
        (with Anthropic's extended thinking on, a last tool round made without it goes as text)."""
        history = self.store.history(self.session_id, optional_slot(slot))
        assert history.slot is not None
        model, checked = (
            check_model(model) if model else None,
            check_json_mapping(params, "params") if params is not None else None,
        )
        return next_view(self._engine, history.slot, history, model=model, params=checked)

    def budget(self, slot: str | None = None, *, model: str | None = None) -> SlotBudget:
        """The slot's next request against its budget by category, the compaction threshold,
        and the compactions so far (``model`` defaults to the slot's, else the session's)."""
        history = self.store.history(self.session_id, optional_slot(slot))
        assert history.slot is not None
        model = check_model(model) if model else history.slot.config.model or self.model
        view = next_view(self._engine, history.slot, history, model=model)  # the tools a turn offers counted
        window, known = self._engine.window(model)
        assert view.report is not None and view.budget is not None
        compactions = tuple(history.compactions())
        cached, saved = cache_totals(history.cached_turns(), self.settings.prices)
        return SlotBudget(
            history.slot.id, model, window, known, view.budget, view.report, view.exact, compactions, cached, saved
        )

    def append(
        self, messages: Iterable[Message], slot: str | None = None, info: Mapping[str, Any] | None = None
    ) -> TurnRecord:
        """Store messages as one turn without calling the model (all or none)."""
        stored = [counted(m) for m in check_messages(messages, "messages")]
        if not stored:
            raise ConfigError("nothing to append: pass at least one message")
        extra = check_json_mapping(info, "info") if info else {}
        slot_id = optional_slot(slot)
        info_record = TurnInfo(kind="append", extra=extra)
        return self.store.append_turn(self.session_id, slot_id, stored, info_record, writable=True)

    # -- turns -----------------------------------------------------------------------------

    def submit_turn(self, text: str, **options: Unpack[TurnArgs]) -> Reply:
        """Send ``text`` as a user turn on the current slot (or ``slot=``) and store the reply.

        Options (``TurnArgs``, each may be left out): ``slot``, ``model``, ``system``,
        ``temperature``, ``max_tokens``, ``params`` (provider-specific request fields), ``info``
        (recorded with the turn), ``cell_id`` and ``rerun`` (see :meth:`stream_turn`), ``tools``
        (this turn's by name), ``attachments`` (objects sent after the text), ``schema`` (the
        reply's shape, read into ``reply.parsed``) and ``read_variables``. If the model fails,
        nothing is stored and the error says what happened.
        """
        stream = self.stream_turn(text, **options)
        collections.deque(stream, maxlen=0)  # run it to its end (in C: a reply streams thousands of pieces)
        assert stream.reply is not None
        return stream.reply

    def stream_turn(self, text: str, **options: Unpack[TurnArgs]) -> TurnStream:
        """Start a turn; iterate the result for the reply's text as it streams.

        ``cell_id`` names the notebook cell the text comes from. Running a cell again with
        unchanged text leaves the session as that cell left it the first time: the stored
        reply (no model call) and, for a turn on the current slot, the slot it ran on made
        current again. Edited text (or ``rerun``) forks a sibling just before the earlier turn
        and runs there (see :mod:`slotmagic._engine.plan.cell_turn`). Without ``cell_id`` turns append.
        """
        return TurnStream(
            self._engine, *self._engine.start(text, turn_options(options, self.options.namespace_threshold))
        )

    async def asubmit_turn(self, text: str, **options: Unpack[TurnArgs]) -> Reply:
        stream = self.astream_turn(text, **options)
        async for _ in stream:
            pass
        assert stream.reply is not None
        return stream.reply

    def astream_turn(self, text: str, **options: Unpack[TurnArgs]) -> AsyncTurnStream:
        return AsyncTurnStream(
            self._engine, *self._engine.start(text, turn_options(options, self.options.namespace_threshold))
        )

    def fan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Unpack[FanOutArgs],
    ) -> FanOutResult:  # fmt: skip
        """Send ``text`` to several slots (names, ``"all"``, globs like ``"draft-*"``) and/or
        models at once; each model's reply goes to a new branch named after it
        (``default.gpt-4o-mini``). Returns the columns keyed by slot (or branch), each with
        its reply or its error: one failure raises nothing. Other options as for
        :meth:`submit_turn` (``cell_id`` replays and forks every column as it does one turn;
        ``attachments`` go with the text to every column).
        """
        return self.plan_fan_out(text, slots=slots, models=models, **options).run_sync()

    async def afan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Unpack[FanOutArgs],
    ) -> FanOutResult:  # fmt: skip
        """:meth:`fan_out` on the running event loop."""
        return await self.plan_fan_out(text, slots=slots, models=models, **options).run()

    def plan_fan_out(
        self, text: str, *, slots: str | Iterable[str] | None = None, models: str | Iterable[str] | None = None,
        **options: Unpack[FanOutArgs],
    ) -> FanOut:  # fmt: skip
        """A fan-out with its columns planned (replayed ones complete), to ``run()`` or
        ``run_sync(on_event)``: what the magic uses to show columns as they stream."""
        checked = turn_options(dict(options), self.options.namespace_threshold)  # attachments as a turn takes them
        return plan_fan_out(self._engine, text, slots, models, checked, self.options.max_concurrency)
