"""A turn's life, in one place: plan (append / replay / fork) → assemble the request through
the view pipeline → stream the reply → commit it in one transaction.

Nothing is stored until the reply is complete, and a turn is stored only on the history its
request was made from: when the slot moved on meanwhile (another thread, process or kernel
stored a turn on it), the turn goes to a new sibling branch forked at the point it was made
from, and its footer says so. Nothing is lost and no reply sits after messages it never saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from ..._core.attachments import message_parts
from ..._core.budget import ContextBudget
from ..._core.checks import check_text
from ..._core.compaction import Compaction
from ..._core.context import DEFAULT_RECENT_TURNS
from ..._core.messages import Message
from ..._core.records import CellRef, TurnInfo, TurnRecord
from ..._core.request import ChatRequest
from ..._core.schema import ResponseSchema
from ..._core.slots import Slot, SlotMode
from ..._core.usage import Usage
from ..._core.vision import no_images_reason
from ..._core.workflow import Workflow
from ..._errors import (
    CompactionNeeded,
    ConfigError,
    DamagedRecord,
    OverBudget,
    SlotReadonly,
    StoreError,
)
from ..._namespace import Namespace
from ..._store.base import History, Store
from ...providers import REGISTRY, ProviderSettings
from ...providers._base import Provider
from ...providers._limits import ModelLimits, model_limits
from ...providers._prices import priced
from ...providers._windows import model_window
from ...tokens import Calibration
from ...tools import Tool, ToolRegistry, default_registry
from ..commit.calibration import Calibrator
from ..commit.storing import TurnWriter
from ..compaction.compactor import Fold, Summarizer, plan_fold, summary_limit
from ..plan.cell_turn import CellPlan, plan_cell_turn, refuse_far_fork
from ..plan.limits import fit_reply, lower_reply
from ..plan.offering import turn_tools
from ..plan.pending import PendingTurn, TurnOptions, counted, counted_own, request_for
from ..view.cache import ViewCache
from ..view.inputs import Counting, Params, Source, ViewInputs
from ..view.pipeline import Prefix, make_view
from ..view.tool_results import to_shelve
from ..view.view import View
from .effects import Steps
from .fit import RequestFit
from .loop import ToolRounds
from .pool import ProviderPool
from .reading import READ_NAMESPACE, PageRoom, read_namespace_tool
from .reply import Reply
from .streams import AsyncTurnStream, TurnStream
from .structured import read_reply

if TYPE_CHECKING:
    from ...tools._mcp import McpServers

# The streams and a turn's options have modules of their own; importers know them by this one too.
__all__ = ["AUTO_COMPACT", "AsyncTurnStream", "TurnEngine", "TurnOptions", "TurnStream", "counted"]
logger = logging.getLogger("slotmagic")
AutoCompact = Literal["on", "ask", "off"]
AUTO_COMPACT: tuple[AutoCompact, ...] = ("on", "ask", "off")
SUMMARY_REQUESTS = 16  # about the most requests one compaction's summary takes (a longer fold waits)


@cache
def _auto_budget(window: int) -> ContextBudget:
    return ContextBudget.auto(window)


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
        self.context_windows: dict[str, int] = {}  # win over the model data (providers/_windows.py)
        # smaller windows learnt from overflow errors (compaction/overflow.py)
        self.learned_windows: dict[str, int] = {}
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
        self.mcp: McpServers | None = None  # MCP servers whose tools turns offer (tools/_mcp.py)
        self.pool = ProviderPool()  # one provider per name, kept for its open connections
        self.calibrator = Calibrator(store)
        self.writer = TurnWriter(store, session_id, self.namespace)
        self._windows_noted: set[str] = set()
        self._views = ViewCache()  # previews kept while their inputs stand (see view())
        self._offered: dict[str, ToolRegistry | None] = {}  # slot -> the tools its last turn offered (_made)
        self._warned: set[str] = set()  # warnings given (see warn_once)
        self._looked_up: dict[str, ModelLimits] | None = None  # each model's limits, while a turn is made

    # -- providers -------------------------------------------------------------------------

    def provider(self, model: str) -> Provider:
        """The provider for ``model``, one per provider name (see :class:`ProviderPool`)."""
        return self.pool.get(model, self.settings)

    def close_providers(self) -> None:
        self.pool.close()

    # -- counting and budgets --------------------------------------------------------------

    @property
    def calibration(self) -> Calibration:
        """Per-model factors for token estimates, kept in the store across restarts."""
        return self.calibrator.calibration

    def counting(self, model: str) -> Counting:
        return self.calibrator.counting(model)

    def window(self, model: str) -> tuple[int, bool]:
        """The model's context window and whether it is known (else a stated default)."""
        found = model_window(model, self.context_windows, self.settings)
        return found.tokens, found.known

    def limits(self, model: str) -> ModelLimits:
        """The model's window, input and output limits (:mod:`...providers._limits`), and a window
        learnt; looked up once while a turn is made (:meth:`start`: its settings stand that long)."""
        looked = self._looked_up
        if looked is not None and model in looked:
            return looked[model]
        found = model_limits(model, self.context_windows, self.settings, learned=self.learned_windows.get(model))
        if looked is not None:
            looked[model] = found
        return found

    def budget(self, slot: Slot, model: str) -> ContextBudget:
        """The slot's own budget, else the model's window split (:attr:`ModelLimits.budget_window`)."""
        return slot.config.budget or _auto_budget(self.limits(model).budget_window)

    def window_note(self, model: str) -> str | None:
        """A one-line note, once per model, when its window is a guess."""
        found = self.limits(model).window
        if found.known or model in self._windows_noted:
            return None
        self._windows_noted.add(model)
        return found.note(model)

    def observe(self, model: str, request: ChatRequest, usage: Usage) -> None:
        """Calibrate the estimate of a model counted by estimate, from what it reported."""
        self.calibrator.observe(model, request, usage)

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
        params: Mapping[str, Any] | None = None,
        prefix: Prefix | None = None,
    ) -> View:
        """What the model would be sent for the slot's next turn (``new`` last, if given;
        ``tools`` counted in the budget's tools share; ``params`` the turn's provider parameters,
        which decide some of what a provider sends). A preview is kept until anything it was
        made from changes (its inputs are the key): widgets and %slot preview ask again and again."""
        model = model or slot.config.model or self.model
        if new is None:  # a preview is kept while its history stands: nothing written since it was
            # read (here or, once noticed, by another connection): what steps read lazily is as it was
            generation = self.store.generation()
            stands = history.generation == generation
        else:  # a turn's view, made once, as of the look its history was read at (see start)
            read_at = history.generation
            generation, stands = (read_at if read_at is not None else self.store.generation()), False
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
            wire=REGISTRY.wire(model),
            params=Params.of(params),
        )
        view = self._views.get(inputs)
        if view is None:
            view = make_view(inputs, prefix=prefix)
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
        # The summary reads every folded message, in parts; a fold longer than this many parts
        # folds its oldest messages now and the rest at the next turns (a first turn on a huge
        # slot stays quick, and nothing is folded that no summary read).
        summarizer = self.summarizer(model, view, recall=recall)
        read = (SUMMARY_REQUESTS - 1) * summarizer.part_budget()  # a scrap over makes one more
        if keep is not None:
            return plan_fold(history, counting, keep_messages=keep, read_most=read)
        most = max(0, room - summary_limit(view, recall) - new)
        return plan_fold(history, counting, keep_tokens=min(max(0, room // 2 - new), most), most=most, read_most=read)

    def summarizer(
        self, model: str, view: View, *, recall: int = 0, progress: Callable[[int, int], None] | None = None
    ) -> Summarizer:
        """Who writes the summary, and the most it may cost (see :func:`..compaction.compactor.summary_limit`)."""
        chosen = self.compaction_model or model
        limit = summary_limit(view, recall)
        # Each summary request fits the summarizing model's window, its reply (the summary and
        # its markup) left room for.
        request_room = _auto_budget(self.limits(chosen).budget_window).request_limit((limit * 4) // 3 + 64)
        return Summarizer(
            self.provider(chosen), chosen, self.counting(model), limit,
            room=request_room, request_counting=self.counting(chosen), progress=progress,
        )  # fmt: skip

    # -- a turn's life ---------------------------------------------------------------------

    def start(self, text: object, options: TurnOptions) -> tuple[PendingTurn | None, CellPlan | None, Reply | None]:
        """A turn about to stream, its cell plan, and the stored reply when it is a replay.
        What it reads (the current slot, the history, the generation, the workflow) is read as
        of one look at what other connections wrote: one round trip, not one per read."""
        self._looked_up = {}
        try:
            with self.store.consistent():
                return self._start(text, options)
        finally:
            self._looked_up = None

    def _start(self, text: object, options: TurnOptions) -> tuple[PendingTurn | None, CellPlan | None, Reply | None]:
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
            return None, plan, self.stored_reply(plan.slot, plan.turn, plan.source, options.schema)
        fork_before = plan.turn if plan.action == "fork" else None
        if fork_before is not None and not options.rerun and options.cell_id.startswith("position:"):
            refuse_far_fork(len(self.store.history(self.session_id, slot)), slot, fork_before)
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
        if self.store.refusal is not None:  # a turn that could not be stored is not worth paying for
            raise StoreError(self.store.refusal)
        history = self.store.history(self.session_id, slot_id)
        slot = history.slot
        assert slot is not None
        if slot.mode is SlotMode.READONLY:
            raise SlotReadonly(slot.id)
        model = options.model or slot.config.model or self.model
        provider = self.provider(model)
        if self.mcp is not None:
            self.mcp.new_turn()
        options, lowered = fit_reply(model, options, self.limits(model), self.budget(slot, model))
        if fork_before is not None:
            history = history.prefix(fork_before.start)  # what the sibling will share
        user = counted_own(Message.from_parts("user", message_parts(text, options.attachments)))
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
        info = TurnInfo("turn", model, options.system, cell, extra=options.info, user=self.store.user)  # no copy later
        notes = tuple(line for line in (self.window_note(model), lowered) if line)
        turn = PendingTurn(
            slot.id, history.tip, user, model, provider, ChatRequest(model=model, messages=()), info,
            fork_before, follow, None, history, options, notes=notes,
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
        reserve = options.max_tokens or 0
        # Tool definitions count too, which may change the view: made with those the slot's last
        # turn offered, again only when it calls for others (a warm turn: once). A first turn's
        # views differ in their tools alone: the second starts where the first's build stood.
        offered, known = self._offered.get(slot.id), slot.id in self._offered
        prefix = None if known else Prefix(frozenset({"tools"}))

        def view_with(tools: ToolRegistry | None) -> View:
            return self.view(
                slot, history, options.system, model=model, reserve=reserve, compaction=compaction, new=turn.user,
                tools=tools, params=options.params, prefix=prefix,
            )  # fmt: skip

        also = ("read_variable",) if options.read_variables else ()
        view = view_with(offered)
        for _ in range(4):
            tools = self.turn_tools(slot, options.tools, view, room, None, also)
            if (None if tools is None else tools.specs()) == (None if offered is None else offered.specs()):
                break
            offered = tools
            view = view_with(tools)
        self._offered[slot.id] = tools
        reader = None  # read_namespace, which the tool loop offers once a result is kept aside: with tools only
        if tools is not None:
            reader = tools.get(READ_NAMESPACE) if READ_NAMESPACE in tools else read_namespace_tool(self.namespace, room)
        for tool, content in to_shelve(view.entries, history):
            self.namespace.keep(tool, content)  # an older result shortened in this request reads whole
        assert view.report is not None
        fit = RequestFit(counting, view.report.limit, self.namespace)
        request = request_for(view, model, options, tools, prompt_cache=self.prompt_cache)
        notes = (*turn.notes, *self.mcp.take_notes()) if self.mcp is not None else turn.notes
        return turn.made(view=view, tools=tools, request=request, room=room, reader=reader, fit=fit, notes=notes)

    def turn_tools(
        self, slot: Slot, names: tuple[str, ...] | None, view: View, room: PageRoom | None = None,
        reader: Tool[..., str] | None = None, also: tuple[str, ...] = (),
    ) -> ToolRegistry | None:  # fmt: skip
        """The tools a turn on ``slot`` offers (see :func:`..plan.offering.turn_tools`)."""
        return turn_tools(self, slot, names, view, room, reader, also)

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
                f"{report.history_available:,} ({report.room_words()}); shorten it, {lower_reply(report)}or raise "
                "the budget or the model's window (%config SlotMagic.context_windows); nothing was sent"
            )
        if not slot.config.compact or self.auto_compact == "off":
            where = "for it: configure_slot(compact=True)" if not slot.config.compact else "(auto_compact is off)"
            raise OverBudget(
                f"{numbers}, and compaction is off {where}, %slot compact, raise its budget, "
                "or derive a focused slot; nothing was sent"
            )
        fold = self.plan_compaction(view, turn.history, turn.model, recall=turn.recall_cost(self.counting(turn.model)))
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

    def compact_steps(
        self, turn: PendingTurn, progress: Callable[[int, int], None] | None = None
    ) -> Steps[PendingTurn]:
        """The turn over the compaction its fold asks for (made by the turn's loop, see
        :mod:`.streams`: a model call, part of the turn)."""
        assert turn.fold is not None and turn.view is not None
        recall = turn.recall_cost(self.counting(turn.model))
        summarizer = self.summarizer(turn.model, turn.view, recall=recall, progress=progress)
        return self.compacted(turn, (yield from summarizer.steps(turn.fold)))

    def remade(self, turn: PendingTurn) -> PendingTurn:
        """The turn's view and request made again (the budget changed: see :mod:`..compaction.overflow`)."""
        return self._check_budget(self._made(turn))

    def commit(self, turn: PendingTurn, rounds: ToolRounds) -> Reply:
        """Store the turn — its user message, every tool round, the reply, and a compaction made
        for it — on the history it was made from, in one transaction."""
        assert rounds.last is not None
        usage, last = rounds.usage, rounds.last
        final = counted_own(rounds.final) if rounds.final is not None else None
        messages = [turn.user, *(counted_own(m) for m in rounds.added), *([final] if final is not None else [])]
        reply_message = final or next(m for m in reversed(messages) if m.role == "assistant")
        cost, saved = priced(turn.model, usage, self.settings)  # a host the database knows priced as that host
        info = turn.info.replace(usage=usage, finish_reason=last.finish_reason, cost=cost)
        slot, record, info = self.writer.write(turn, messages, info, rounds.shelved, reply_message.content)
        self.usage = self.usage + usage
        try:
            self.observe(turn.model, rounds.sent or turn.request, last.usage)  # what the usage answers
        except StoreError as exc:  # the turn is stored: a lost calibration must not say otherwise
            logger.info("the token estimate's calibration was not updated: %s", exc)
        notes = (*turn.notes, rounds.note) if rounds.note else turn.notes
        parsed, problem = read_reply(reply_message.content, turn.request.schema)
        notes = (*notes, problem) if problem else notes
        if self.mcp is not None:  # a server restarted during the tool rounds
            notes = (*notes, *self.mcp.take_notes())
        return Reply(
            reply_message.content, reply_message, usage, turn.model, slot, record.number,
            last.finish_reason, cost, info, notes=notes, saved=saved, steps=tuple(rounds.steps), parsed=parsed,
        )  # fmt: skip

    def stored_reply(
        self, slot: str, record: TurnRecord, source: History | None = None, schema: ResponseSchema | None = None
    ) -> Reply:
        """The reply a stored turn ended with, marked ``replayed`` and read against ``schema``
        (see :meth:`TurnWriter.stored_reply`)."""
        return self.writer.stored_reply(slot, record, self.model, source, schema)
