"""A turn's life, in one place: plan (append / replay / fork) → assemble the request through
the view pipeline → stream the reply → commit it in one transaction.

Nothing is stored until the reply is complete, and a turn is stored only on the history its
request was made from: when the slot moved on meanwhile (another thread, process or kernel
stored a turn on it), the turn goes to a new sibling branch forked at the point it was made
from, and its footer says so. Nothing is lost and no reply sits after messages it never saw.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from ..core.attachments import Attached, message_parts
from ..core.budget import ContextBudget
from ..core.checks import check_json_mapping, check_names, check_number, check_optional_text, check_text, check_whole
from ..core.compaction import Compaction
from ..core.context import DEFAULT_RECENT_TURNS
from ..core.messages import Message
from ..core.records import CellRef, ForkRef, TurnInfo, TurnRecord
from ..core.slots import DeriveStrategy, Slot, SlotMode, SlotSource, validate_slot_id
from ..core.tokens import estimate_message_tokens
from ..core.usage import Usage
from ..core.vision import no_images_reason, takes_images
from ..core.workflow import Workflow
from ..errors import (
    CompactionNeeded,
    ConfigError,
    DamagedRecord,
    OverBudget,
    ProviderError,
    SlotMoved,
    SlotNotFound,
    SlotReadonly,
    StoreError,
    TurnNotStored,
)
from ..namespace import Namespace, has_reference
from ..providers import ProviderSettings, cost_of, parse_model, resolve_provider
from ..providers.base import ChatRequest, Completion, Provider, StreamEvent, TextDelta
from ..providers.prices import cache_savings_of
from ..providers.windows import model_window
from ..store.base import History, Store, Tip
from ..tokens import Calibration, TokenCounter
from ..tools import Tool, ToolRegistry, default_registry
from .compactor import Fold, Summarizer, plan_fold
from .fit import RequestFit
from .inputs import Source, ViewInputs
from .loop import ToolRounds, ToolStep, checked, steps_of
from .pipeline import make_view
from .plan import CellPlan, fork_name, plan_cell_turn
from .reading import RECALL, PageRoom, read_namespace_tool, recall_spec, recall_tool
from .reply import Reply
from .tool_results import to_shelve
from .view import Counting, View
from .view_cache import ViewCache

logger = logging.getLogger("slotmagic")
OPT_IN = frozenset(("read_variable",))  # built-in tools offered only when named
AutoCompact = Literal["on", "ask", "off"]
AUTO_COMPACT: tuple[AutoCompact, ...] = ("on", "ask", "off")
_CALIBRATION = "calibration"  # the store's meta key
_SUMMARY_PARTS = 4  # the most requests one compaction's summary takes


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
    tools: tuple[str, ...] | None = None  # this turn's tools by name; () none; None the slot's
    attachments: tuple[Attached, ...] = ()  # objects sent after the text (see slotmagic.attach)
    read_variables: bool = False  # offer the opt-in read_variable tool (a kernel's variables)

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
        if self.tools is not None:
            set_(self, "tools", check_names(self.tools, "tools"))
        if not isinstance(self.read_variables, bool):
            raise ConfigError(f"read_variables must be True or False, not {self.read_variables!r:.60}")
        set_(self, "attachments", tuple(self.attachments or ()))
        if not all(isinstance(a, Attached) for a in self.attachments):
            raise ConfigError("attachments are made by slotmagic.attach.attach(...) (Session.submit_turn does it)")

    def cell_options(self) -> dict[str, Any]:
        """The request options a cell sets itself: changing one of them is editing the cell."""
        chosen = {"model": self.model, "system": self.system, "temperature": self.temperature,
                  "max_tokens": self.max_tokens, "params": dict(self.params) or None,
                  "tools": list(self.tools) if self.tools is not None else None,
                  "attachments": [a.digest() for a in self.attachments] or None,
                  "read_variables": self.read_variables or None}  # fmt: skip
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
    view: View | None = None  # what the request holds, entry by entry
    history: History | None = None  # what it was made from
    options: TurnOptions | None = None
    fold: Fold | None = None  # over budget: what to compact before the request is sent
    compaction: Compaction | None = None  # made for this turn, stored with it
    notes: tuple[str, ...] = ()  # lines for the footer
    tools: ToolRegistry | None = None  # what the model may call in this turn
    branch: str | None = None  # stored on a new branch of ``slot`` so named (a fan-out's model column)
    room: PageRoom = field(default_factory=PageRoom)  # what a page read in a round may take
    reader: Tool[..., str] | None = None  # this turn's read_namespace, offered once a reference is in view
    fit: RequestFit | None = None  # keeps every request of the tool loop within the window

    def completion_or_raise(self, completion: Completion | None) -> Completion:
        if completion is None:
            raise ProviderError(
                f"the reply from {self.model} ended before it was complete; "
                f"slot {self.slot!r} is unchanged, run the turn again"
            )
        return completion


@cache
def _auto_budget(window: int) -> ContextBudget:
    return ContextBudget.auto(window)


# A position-only cell's edit that would leave out at least this many messages is refused.
_FAR_FORK = 8


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
        self.context_windows: dict[str, int] = {}  # win over the model data (tokens/windows.py)
        self.compaction_model: str | None = None  # None: the turn's own model
        self.tools = default_registry.scope(f"session {session_id!r}")  # the process's tools, and this session's
        self.max_tool_rounds = 8
        self.prompt_cache = True  # providers that need it (Anthropic) are told where the stable prefix ends
        # Past the threshold a turn compacts first ("on"), stops with the numbers and the commands
        # to review and apply the compaction ("ask"), or refuses ("off").
        self.auto_compact: AutoCompact = "on"
        # Tools that come with the slot itself (the working context's), given by the session.
        self.slot_tools: Callable[[Slot, View], list[Tool[..., Any]]] | None = None
        self.namespace = Namespace(store, session_id)
        self.working_context_turns: int | None = DEFAULT_RECENT_TURNS  # turns a change is sent (None: off)
        # Opt-in built-in tools (read_variable): offered only when a turn or a slot names them.
        self.optional_tools: dict[str, Tool[..., Any]] = {}
        self._providers: dict[str, Provider] = {}
        self._calibration: Calibration | None = None
        self._windows_noted: set[str] = set()
        self._counters: dict[str, TokenCounter] = {}
        self._views = ViewCache()  # previews kept while their inputs stand (see view())
        self._warned: set[str] = set()  # warnings given (see warn_once)

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

    # -- counting and budgets --------------------------------------------------------------

    @property
    def calibration(self) -> Calibration:
        """Per-model factors for token estimates, kept in the store across restarts."""
        if self._calibration is None:
            stored = self.store.meta(_CALIBRATION)
            self._calibration = Calibration.from_dict(json.loads(stored) if stored else None)
        return self._calibration

    def counting(self, model: str) -> Counting:
        counter = self._counters.get(model)
        if counter is None:
            counter = self._counters[model] = TokenCounter.for_model(model)
        return Counting(counter, 1.0 if counter.exact else self.calibration.factor(model))

    def window(self, model: str) -> tuple[int, bool]:
        """The model's context window and whether it is known (else a stated default)."""
        found = model_window(model, self.context_windows, self.settings)
        return found.tokens, found.known

    def budget(self, slot: Slot, model: str) -> ContextBudget:
        """The slot's own budget, else the model's window split in the default ratios."""
        return slot.config.budget or _auto_budget(self.window(model)[0])

    def window_note(self, model: str) -> str | None:
        """A one-line note, once per model, when its window is a guess."""
        found = model_window(model, self.context_windows, self.settings)
        if found.known or model in self._windows_noted:
            return None
        self._windows_noted.add(model)
        return found.note(model)

    def observe(self, model: str, request: ChatRequest, usage: Usage) -> None:
        """Calibrate the estimate of a model counted by estimate, from what it reported."""
        counter = TokenCounter.for_model(model)
        if counter.exact or usage.input_tokens <= 0 or model == "echo":
            return
        estimated = sum(m.tokens or estimate_message_tokens(m) for m in request.messages)

        def update(stored: str | None) -> str:
            calibration = Calibration.from_dict(json.loads(stored) if stored else None)
            calibration.observe(model, estimated, usage.input_tokens)
            self._calibration = calibration
            return json.dumps(calibration.to_dict())

        self.store.update_meta(_CALIBRATION, update)

    # -- views -----------------------------------------------------------------------------

    def view(
        self,
        slot: Slot,
        history: History,
        system: str | None = None,
        *,
        model: str | None = None,
        reserve: int = 0,
        compaction: Compaction | None = None,
        new: Message | None = None,
        tools: ToolRegistry | None = None,
    ) -> View:
        """What the model would be sent for the slot's next turn (``new`` last, if given;
        ``tools`` counted in the budget's tools share). A preview is kept until anything it was
        made from changes (its inputs are the key): widgets and %slot preview ask again and again."""
        model = model or slot.config.model or self.model
        # The history stands when nothing was written since it was read (here or, once noticed,
        # by another connection): then what the steps read from it lazily is what it was.
        generation = self.store.generation()
        stands = history.generation == generation
        inputs = ViewInputs(
            slot=slot.id,
            config=slot.config,
            source=Source(history, stands),
            prompt=system if system is not None else slot.config.system or self.system,
            counting=self.counting(model),
            budget=self.budget(slot, model),
            reserve=reserve,
            compaction=compaction,
            new=new,
            tools=tuple(tools.specs()) if tools is not None else (),
            workflow=self._active_workflow(generation),
            context_turns=self.working_context_turns,
        )
        view = self._views.get(inputs)
        if view is None:
            view = make_view(inputs)
            for problem in view.problems:
                self.warn_once(problem)
            self._views.put(inputs, view)
        return view

    def _active_workflow(self, generation: int) -> Workflow | None:
        """The session's active workflow as of the store's ``generation`` (read once per
        generation: every view asks); one that cannot be read is left out of the request (a
        warning says how to repair it), so it never stops a turn."""

        def read() -> Workflow | None:
            try:
                return self.store.active_workflow(self.session_id)
            except DamagedRecord as exc:
                self.warn_once(f"{exc}; requests go without it meanwhile")
                return None

        return self._views.workflow(generation, read)

    def warn_once(self, line: str) -> None:
        """Log ``line`` as a warning, once per session."""
        if line not in self._warned:
            self._warned.add(line)
            logger.warning("%s", line)

    def plan_compaction(
        self, view: View, history: History, model: str, keep: int | None = None, *, recall: int = 0
    ) -> Fold | None:
        """What to fold so the history fits again: keep what fits in half of the room left
        for history, the new message included (so the next turns do not compact at once), or
        the last ``keep`` messages. Whatever is kept fits beside the summary (at most its
        limit) and ``recall``'s definition (``recall`` tokens: a turn adds it once compacted)."""
        assert view.report is not None
        room = view.report.history_available - recall
        new = sum(e.tokens for e in view.entries if e.kind == "new")
        counting = self.counting(model)
        # A summary reads the fold's newest parts, at most this many (a long fold's oldest part is
        # folded unread, within recall's reach): a first turn on a huge slot stays quick.
        summarizer = self.summarizer(model, view, recall=recall)
        read = _SUMMARY_PARTS * summarizer.part_budget()
        if keep is not None:
            return plan_fold(history, counting, keep_messages=keep, read_tokens=read)
        most = max(0, room - self._summary_limit(view, recall) - new)
        return plan_fold(history, counting, keep_tokens=min(max(0, room // 2 - new), most), most=most, read_tokens=read)

    def _summary_limit(self, view: View, recall: int) -> int:
        """The most a summary may cost: a third of the room for history, and never so much
        that with ``recall``'s definition the kept half would not fit."""
        assert view.report is not None
        room = view.report.history_available
        return max(64, min((room + view.report.system.used) // 3, (room - recall) // 2))

    def summarizer(
        self, model: str, view: View, *, recall: int = 0, progress: Callable[[int, int], None] | None = None
    ) -> Summarizer:
        """Who writes the summary, and the most it may cost (see :meth:`_summary_limit`)."""
        chosen = self.compaction_model or model
        limit = self._summary_limit(view, recall)
        # Each summary request fits the summarizing model's window, its reply (the summary and
        # its markup) left room for.
        request_room = _auto_budget(self.window(chosen)[0]).request_limit((limit * 4) // 3 + 64)
        return Summarizer(
            self.provider(chosen), chosen, self.counting(model), limit,
            room=request_room, request_counting=self.counting(chosen), progress=progress,
        )  # fmt: skip

    def recall_cost(self, turn: PendingTurn) -> int:
        """The tokens ``recall``'s definition adds to ``turn``'s request once it is compacted
        (0 when the turn offers no tools, or offers it already)."""
        assert turn.options is not None and turn.history is not None and turn.history.slot is not None
        chosen = turn.options.tools if turn.options.tools is not None else turn.history.slot.config.tools
        if chosen == () or (turn.tools is not None and RECALL in turn.tools):
            return 0
        counter = self.counting(turn.model)
        specs = turn.tools.specs() if turn.tools is not None else []
        has_system = any(m.role == "system" for m in turn.request.messages)
        added = counter.counter.count_tools([*specs, recall_spec()], has_system=True)
        return counter.scale(added - counter.counter.count_tools(specs, has_system=has_system))

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
            return None, plan, self.stored_reply(plan.slot, plan.turn, plan.source)
        fork_before = plan.turn if plan.action == "fork" else None
        if fork_before is not None and not options.rerun and options.cell_id.startswith("position:"):
            self._refuse_far_fork(slot, fork_before)
        return self.prepare(text, plan.slot, options, cell, fork_before, follow), plan, None

    def _refuse_far_fork(self, slot: str, earlier: TurnRecord) -> None:
        """A cell known only by its position (no cell id) whose text differs from the turn at
        that position may be another notebook's cell, not an edit: forking there would drop
        most of the history the notebook ran on, so it is refused with what to do."""
        length = len(self.store.history(self.session_id, slot))
        if earlier.start * 2 < length and length - earlier.start >= _FAR_FORK:
            raise ConfigError(
                f"this %%turn differs from the turn its place in the notebook had (turn {earlier.number}, "
                f"after {earlier.start} messages), and treating it as an edit would fork from there, leaving "
                f"out {length - earlier.start} of the {length} messages of slot {slot!r}; nothing was sent. "
                'If this is another notebook, name it (%config SlotMagic.notebook = "NAME" or SLOTMAGIC_NOTEBOOK); '
                "to send it as a new turn give the cell an id (%%turn --id NAME); --rerun forks anyway"
            )

    def prepare(
        self,
        text: str,
        slot_id: str,
        options: TurnOptions,
        cell: CellRef | None,
        fork_before: TurnRecord | None,
        follow: bool,
    ) -> PendingTurn:
        if self.store.refusal is not None:  # a turn that could not be stored is not worth paying for
            raise StoreError(self.store.refusal)
        history = self.store.history(self.session_id, slot_id)
        slot = history.slot
        assert slot is not None
        if slot.mode is SlotMode.READONLY:
            raise SlotReadonly(slot.id)
        model = options.model or slot.config.model or self.model
        provider = self.provider(model)
        if fork_before is not None:
            history = history.prefix(fork_before.start)  # what the sibling will share
        user = counted(Message.from_parts("user", message_parts(text, options.attachments)))
        if user.images:
            reason = no_images_reason(model)
            if reason is not None:
                raise ConfigError(
                    f"{reason}: this turn attaches {len(user.images)} image(s); use a model that takes images "
                    "(openai:gpt-4o-mini, anthropic:..., ollama:llava) or attach something else; nothing was sent"
                )
        for attached in options.attachments:
            for tool, content in attached.kept:  # readable by read_namespace from the first request on
                self.namespace.keep(tool, content)
        info = TurnInfo(kind="turn", model=model, system=options.system, cell=cell, extra=options.info)
        note = self.window_note(model)
        turn = PendingTurn(
            slot.id, history.tip, user, model, provider, ChatRequest(model=model, messages=()), info,
            fork_before, follow, None, history, options, notes=(note,) if note else (),
        )  # fmt: skip
        return self._check_budget(self._made(turn))

    def _made(self, turn: PendingTurn, compaction: Compaction | None = None) -> PendingTurn:
        """The turn with its view, tools and request made (over ``compaction``, one made for
        it and not stored yet). The tools depend on the view (a reference in it offers
        ``read_namespace``, a compaction ``recall``) and count in it, so both are made until
        they agree. Older results the view shortened are kept aside before anything is sent."""
        history, options = turn.history, turn.options
        assert history is not None and options is not None and history.slot is not None
        slot, model = history.slot, turn.model
        counting = self.counting(model)
        room = PageRoom(count=lambda text: counting.scale(counting.counter.count_text(text)))
        reader = read_namespace_tool(self.namespace, room)
        reserve = options.max_tokens or 0

        def view_with(tools: ToolRegistry | None) -> View:
            return self.view(
                slot, history, options.system, model=model, reserve=reserve, compaction=compaction, new=turn.user,
                tools=tools,
            )  # fmt: skip

        view = view_with(None)
        also = ("read_variable",) if options.read_variables else ()
        tools = self.turn_tools(slot, options.tools, view, room, reader, also)
        for _ in range(3):  # their definitions count too (on the system side), which may change the view
            if tools is None:
                break
            view = view_with(tools)
            again = self.turn_tools(slot, options.tools, view, room, reader, also)
            if again is None or again.names() == tools.names():
                break
            tools = again
        for tool, content in to_shelve(view.entries, history):
            self.namespace.keep(tool, content)  # an older result shortened in this request reads whole
        assert view.report is not None
        fit = RequestFit(counting, view.report.limit, self.namespace)
        request = self._request(view, model, options, tools)
        return replace(turn, view=view, tools=tools, request=request, room=room, reader=reader, fit=fit)

    def turn_tools(
        self,
        slot: Slot,
        names: tuple[str, ...] | None,
        view: View,
        room: PageRoom | None = None,
        reader: Tool[..., str] | None = None,
        also: tuple[str, ...] = (),
    ) -> ToolRegistry | None:
        """The tools a turn offers: the turn's names, else the slot's, else every tool of the
        session and the slot's own (its working context's); and unless the turn asked for no
        tools, ``read_namespace`` whenever a reference is in the view (a result kept aside, or a
        summary naming one) and ``recall`` whenever a compaction folded part of it away. None
        when there are none (the request then carries no tools at all). An opt-in tool
        (``optional_tools``) is offered when ``also`` or the chosen names name it."""
        chosen = names if names is not None else slot.config.tools
        optional = [self._optional(name) for name in dict.fromkeys((*(chosen or ()), *also)) if name in OPT_IN]
        if chosen is not None:
            chosen = tuple(name for name in chosen if name not in OPT_IN)
        selected = self.tools if chosen is None else self.tools.select(chosen)
        tools = list(selected.tools()) if chosen is None else [selected.get(name) for name in dict.fromkeys(chosen)]
        tools += optional
        if chosen != () and has_reference(view.messages):
            tools.append(reader if reader is not None else read_namespace_tool(self.namespace, room))
        if chosen != () and view.compaction is not None:
            tools.append(recall_tool(self.store, self.session_id, slot.id, view.compaction.upto, room))
        if chosen is None and self.slot_tools is not None:
            tools.extend(self.slot_tools(slot, view))
        unique: dict[str, Tool[..., Any]] = {}
        for tool in tools:
            unique.setdefault(tool.name, tool)  # a name the user gave a tool of their own wins
        return ToolRegistry(unique.values(), label=f"turn on slot {slot.id!r}") if unique else None

    def _optional(self, name: str) -> Tool[..., Any]:
        found = self.optional_tools.get(name)
        if found is None:
            raise ConfigError(
                f"{name} reads a kernel's variables: it is offered in a notebook (%load_ext slotmagic), "
                "or after session.allow_variables(namespace); nothing was sent"
            )
        return found

    def _request(self, view: View, model: str, options: TurnOptions, tools: ToolRegistry | None) -> ChatRequest:
        messages = view.messages
        if not takes_images(model) and any(m.images for m in messages):
            # Earlier images stay in the history; a model without eyes reads their labels only.
            messages = tuple(replace(m, images=()) if m.images else m for m in messages)
        return ChatRequest(
            model=parse_model(model)[1],
            messages=messages,
            tools=tuple(tools.specs()) if tools is not None else (),
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            params=dict(options.params),
            prompt_cache=self.prompt_cache,
        )

    def _check_budget(self, turn: PendingTurn) -> PendingTurn:
        """Within budget: as is. Past the threshold: plan a compaction (made when the turn
        streams, or first reviewed when ``auto_compact`` is "ask"), or refuse with the numbers
        when compaction is off or cannot help."""
        view = turn.view
        assert view is not None and view.report is not None and turn.history is not None
        report = view.report
        if not report.needs_compaction:
            return turn
        slot = turn.history.slot
        assert slot is not None
        numbers = f"slot {slot.id!r}: {report.over_words()}"
        new = sum(e.tokens for e in view.entries if e.kind == "new")
        if new > report.history_available:  # nothing to fold could make room for it
            raise OverBudget(
                f"the new message alone needs {new:,} tokens but slot {slot.id!r} has room for "
                f"{report.history_available:,} ({report.room_words()}); shorten it, or raise the budget "
                "or the model's window (%config SlotMagic.context_windows); nothing was sent"
            )
        if not slot.config.compact or self.auto_compact == "off":
            where = "for it: configure_slot(compact=True)" if not slot.config.compact else "(auto_compact is off)"
            raise OverBudget(
                f"{numbers}, and compaction is off {where}, %slot compact, raise its budget, "
                "or derive a focused slot; nothing was sent"
            )
        fold = self.plan_compaction(view, turn.history, turn.model, recall=self.recall_cost(turn))
        if fold is None:
            raise OverBudget(f"{numbers}, and its newest messages alone do not fit; nothing was sent")
        if self.auto_compact == "ask":
            raise CompactionNeeded(
                f"{numbers}: compacting would fold {fold.describe()}. Review it with %slot compact --preview "
                f"{slot.id}, then %slot compact --apply {slot.id} (or %slot compact {slot.id} at once), and run "
                "the cell again; nothing was sent"
            )
        return replace(turn, fold=fold)

    def compacted(self, turn: PendingTurn, compaction: Compaction) -> PendingTurn:
        """The turn with its request made again over the new compaction."""
        made = self._made(turn, compaction)
        assert made.view is not None and made.view.report is not None and turn.history is not None
        report = made.view.report
        if report.needs_compaction:
            raise OverBudget(f"slot {made.slot!r} was compacted but {report.over_words()}; nothing was sent")
        return replace(made, fold=None, compaction=compaction, notes=(*turn.notes, compaction.describe()))

    def compact_for(self, turn: PendingTurn, progress: Callable[[int, int], None] | None = None) -> PendingTurn:
        assert turn.fold is not None
        assert turn.view is not None
        summarizer = self.summarizer(turn.model, turn.view, recall=self.recall_cost(turn), progress=progress)
        return self.compacted(turn, summarizer.summarize(turn.fold))

    async def acompact_for(self, turn: PendingTurn, progress: Callable[[int, int], None] | None = None) -> PendingTurn:
        assert turn.fold is not None
        assert turn.view is not None
        summarizer = self.summarizer(turn.model, turn.view, recall=self.recall_cost(turn), progress=progress)
        return self.compacted(turn, await summarizer.asummarize(turn.fold))

    def commit(self, turn: PendingTurn, rounds: ToolRounds) -> Reply:
        """Store the turn — its user message, every tool round, the reply, and a compaction made
        for it — on the history it was made from, in one transaction."""
        assert rounds.last is not None
        usage, last = rounds.usage, rounds.last
        final = counted(rounds.final) if rounds.final is not None else None
        messages = [turn.user, *(counted(m) for m in rounds.added), *([final] if final is not None else [])]
        reply_message = final or next(m for m in reversed(messages) if m.role == "assistant")
        cost = cost_of(turn.model, usage, self.settings.prices)
        saved = cache_savings_of(turn.model, usage, self.settings.prices)
        info = turn.info.replace(usage=usage, finish_reason=last.finish_reason, cost=cost)
        store, session_id = self.store, self.session_id
        try:
            with store.atomic():  # a fork exists only with its turn, even after a crash
                self.namespace.keep_stored(rounds.shelved)  # gc elsewhere may have taken them meanwhile
                for attached in turn.options.attachments if turn.options is not None else ():
                    for tool, content in attached.kept:
                        self.namespace.keep(tool, content)
                slot = turn.slot
                if turn.fork_before is not None:
                    slot = self._fork(turn.slot, turn.fork_before.start)
                    info = info.replace(forked_from=ForkRef(turn.slot, turn.fork_before.number, "edit"))
                    record = self._store(slot, turn, messages, info, None)
                    if turn.follow:
                        store.set_current_slot(session_id, slot)
                elif turn.branch is not None:  # forked where the request was made: nothing can move it
                    slot = self._fork(turn.slot, turn.base.length, turn.branch, model=turn.model)
                    record = self._store(slot, turn, messages, info, None)
                else:
                    try:
                        record = self._store(slot, turn, messages, info, turn.base)
                    except SlotMoved:
                        if store.tip(session_id, slot).key != turn.base.key:
                            raise  # not the same slot any more: a new one took its name
                        slot = self._fork(turn.slot, turn.base.length)
                        info = info.replace(forked_from=ForkRef(turn.slot, None, "moved"))
                        record = self._store(slot, turn, messages, info, None)
        except SlotMoved:  # its name holds another history now: the turn undone, or the slot made anew
            raise TurnNotStored(turn.slot, reply_message.content, "was undone, or deleted and made again,") from None
        except SlotNotFound:
            raise TurnNotStored(turn.slot, reply_message.content) from None
        self.usage = self.usage + usage
        try:
            self.observe(turn.model, turn.request, last.usage)
        except StoreError as exc:  # the turn is stored: a lost calibration must not say otherwise
            logger.info("the token estimate's calibration was not updated: %s", exc)
        notes = (*turn.notes, rounds.note) if rounds.note else turn.notes
        return Reply(
            reply_message.content, reply_message, usage, turn.model, slot, record.number,
            last.finish_reason, cost, info, notes=notes, saved=saved, steps=tuple(rounds.steps),
        )  # fmt: skip

    def _store(
        self, slot: str, turn: PendingTurn, messages: list[Message], info: TurnInfo, base: Tip | None
    ) -> TurnRecord:
        if turn.compaction is not None:
            self.store.add_compaction(self.session_id, slot, turn.compaction, base=base)
        return self.store.append_turn(self.session_id, slot, messages, info, base=base, writable=base is not None)

    def _fork(self, parent_id: str, at: int, name: str | None = None, *, model: str | None = None) -> str:
        """Derive the sibling a turn runs on (``name``, or ``<name>.2`` … when it is taken);
        it behaves like the branch it forks, and with ``model`` (a fan-out's model branch)
        its later turns use that model."""
        parent = self.store.slot(self.session_id, parent_id)
        strategy = (
            DeriveStrategy.focused_on(parent.config.focused)
            if parent.mode is SlotMode.FOCUSED
            else DeriveStrategy.full()
        )
        taken = frozenset(s.id for s in self.store.slots(self.session_id))
        name = name if name is not None and name not in taken else fork_name(name or parent.id, taken)
        config = parent.config.replace(source=SlotSource.derived(parent.id, strategy))
        if model is not None:
            config = config.replace(model=model)
        self.store.derive_slot(self.session_id, name, parent.id, config, at)
        return name

    def stored_reply(self, slot: str, record: TurnRecord, source: History | None = None) -> Reply:
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed`` (read from
        ``source`` when the slot no longer holds it: a turn undone)."""
        history = source if source is not None else self.store.history(self.session_id, slot)
        produced = history.messages(record.start, record.end)
        message = next((m for m in reversed(produced) if m.role == "assistant"), None)
        steps = steps_of(self.namespace.expand(produced))  # a result kept aside shows whole, as it did live
        if message is None:
            raise ConfigError(f"turn {record.number} of slot {slot!r} has no reply to show")
        info = record.info
        return Reply(
            message.content, message, info.usage or Usage(), info.model or self.model, slot, record.number,
            info.finish_reason, info.cost, info, replayed=True, steps=steps,
            notes=() if source is None else (f"this turn was undone on slot {slot}: %slot redo brings it back",),
        )  # fmt: skip


class _Stream:
    """What the sync and async streams share: the turn, its plan, its tool rounds, and the
    reply once stored. ``on_step`` is called with each tool call's outcome as it comes."""

    def __init__(
        self, engine: TurnEngine, turn: PendingTurn | None, plan: CellPlan | None = None, replay: Reply | None = None
    ) -> None:
        self._engine = engine
        self._turn = turn
        self._completion: Completion | None = None
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

    def _receive(self, event: StreamEvent) -> str:
        """The text an event adds (none for the final one, which is kept for storing)."""
        if isinstance(event, TextDelta):
            return event.text
        self._completion = event
        return ""

    def _rounds(self, turn: PendingTurn) -> ToolRounds:
        engine = self._engine
        return ToolRounds(
            turn.tools, engine.namespace, engine.max_tool_rounds, turn.request, on_step=self.on_step,
            fit=turn.fit, room=turn.room, reader=turn.reader,
        )  # fmt: skip

    def _completed(self, turn: PendingTurn, rounds: ToolRounds) -> Completion:
        completion = turn.completion_or_raise(self._completion)
        self._completion = None
        return checked(completion, turn.model, rounds.call_ids())


class TurnStream(_Stream):
    """Iterate to receive the reply's text as it streams; ``reply`` is set once it is stored.

    Stopping early (``break``, an exception, an interrupt) stores nothing; ``close()``, or
    leaving a ``with`` block, closes the connection to the model at once. ``plan`` says what
    a turn from a notebook cell does (append, replay or fork); a replay yields the stored reply
    at once and calls no model. Tool calls the model makes are run between its replies (see
    :mod:`slotmagic.engine.loop`); the text of every reply is yielded as it comes.
    """

    _events: Iterator[StreamEvent] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._turn is None:
            assert self.reply is not None
            yield self.reply.text
            return
        if self._turn.fold is not None:
            self._turn = self._engine.compact_for(self._turn, self.on_progress)  # a model call: part of the turn
        turn = self._turn
        rounds = self._rounds(turn)
        request = turn.request
        while True:
            self._events = turn.provider.stream(request)
            said = False
            try:
                for event in self._events:
                    text = self._receive(event)
                    if text:
                        said = True
                        yield text
            finally:
                self.close()
            completion = self._completed(turn, rounds)
            calls = rounds.calls(completion)
            if calls is None:
                break
            if said:
                yield "\n\n"
            next_request = rounds.next_request(completion, rounds.run_sync(calls))
            if next_request is None:
                break
            request = next_request
        if self.hold:
            self.held = rounds
        else:
            self.reply = self._engine.commit(turn, rounds)

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
        if self._turn.fold is not None:
            self._turn = await self._engine.acompact_for(self._turn, self.on_progress)
        turn = self._turn
        rounds = self._rounds(turn)
        request = turn.request
        while True:
            self._events = turn.provider.astream(request)
            said = False
            try:
                async for event in self._events:
                    text = self._receive(event)
                    if text:
                        said = True
                        yield text
            finally:
                await self.aclose()
            completion = self._completed(turn, rounds)
            calls = rounds.calls(completion)
            if calls is None:
                break
            if said:
                yield "\n\n"
            next_request = rounds.next_request(completion, await rounds.run(calls))
            if next_request is None:
                break
            request = next_request
        if self.hold:
            self.held = rounds
        else:
            self.reply = self._engine.commit(turn, rounds)

    async def aclose(self) -> None:
        """Stop the reply (if it is still streaming) and close its connection; stores nothing."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncTurnStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
