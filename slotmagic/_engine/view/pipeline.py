"""The view pipeline: from a slot's stored history to what the model is sent.

An ordered list of small steps, each one concern, works on a ``ViewBuild`` made from one
``ViewInputs`` (``inputs.py``; each step declares the fields it reads, see ``steps/``): the
system prompt, the latest compaction (its summary in place of the messages it folded), the
slot's mode, the workflow and working-context blocks (``steps/workflow.py``, ``blocks.py``),
blank messages left out (``steps/blank.py``), then token counts, images left out for a model
that takes none (``steps/images.py``), tool calls and results paired as the APIs require
(``steps/tool_pairs.py``), what a request's params make Anthropic's API take only as text (a
server tool's blocks, ``steps/blocks_as_text.py``; with thinking on, a last tool round made
without it, ``steps/round_as_text.py``), a user message first for an API that wants one
(``steps/user_first.py``), the bare tool definitions a request without tools carries beside a
history's tool calls (``steps/bare_tools.py``), older tool results shortened when space is
short (``tool_results.py``) and the budget. ``Session.view()``, ``%slot preview``, ``%slot budget``
and the real request all go through it, so what is previewed, counted and sent are the same
messages. Every entry says where it came from (a stored message and its position, or something
a step injected), and what the steps left out is kept as ranges of positions with the reason,
so a preview can show it greyed where it was. A later feature that changes what the model sees
adds a step.

Steps read the history lazily: a focused or compacted view of a long history reads its tail,
and token counts come from the store (each message is counted once per encoding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Any

from ..._core.budget import ContextBudget
from ..._core.compaction import Compaction
from ..._core.context import DEFAULT_RECENT_TURNS
from ..._core.messages import Message
from ..._core.request import ToolSpec
from ..._core.slots import SlotConfig, SlotMode
from ..._core.workflow import Workflow
from ..._store.base import History
from ..._store.history import Mark
from ..steps import Step, step
from ..steps.bare_tools import bare_tools
from ..steps.blank import blank_messages
from ..steps.blocks_as_text import blocks_as_text
from ..steps.image_limits import images_within_limits
from ..steps.images import images_for_model
from ..steps.round_as_text import round_as_text
from ..steps.tool_pairs import tool_pairs
from ..steps.user_first import user_first
from ..steps.workflow import workflow_block
from .blocks import context_block
from .inputs import Counting, Params, Source, ViewInputs
from .tool_results import aged_tool_results, system_side
from .view import EntryKind, Omitted, View, ViewBuild, ViewEntry

SUMMARY_PREFIX = "Summary of the earlier conversation: "


@step("prompt")
def system_prompt(build: ViewBuild) -> None:
    """The system prompt in effect (the turn's, else the slot's, else the session's)."""
    if build.prompt:
        build.system.append(build.inject(Message.system(build.prompt), "system"))


@step("compaction", "source")
def compacted(build: ViewBuild) -> None:
    """The latest compaction this history sees: its summary goes on the system side, and the
    conversation starts after the messages it folded. A compaction made for this turn that
    left messages for the next one (``later``) starts the conversation after them too: they
    are beyond this request's budget, and the next turn folds them."""
    pending = build.inputs.compaction
    compaction = pending if pending is not None else build.history.compaction()
    build.compaction = compaction
    if compaction is None:
        return
    build.system.append(build.inject(compaction.message(), "compaction"))
    build.start = compaction.upto
    build.omitted.append(Omitted(0, compaction.upto, "compacted"))
    if pending is not None and pending.later:
        build.start = min(len(build.history), compaction.upto + pending.later)
        build.omitted.append(Omitted(compaction.upto, build.start, "beyond"))


@step("config", "source", "counting", "budget")
def mode_filter(build: ViewBuild) -> None:
    """Full and readonly slots see every stored message (after a compaction's folded part). A
    focused slot sees the first system message (if ``keep_system``), the summary override, then
    the last ``recent_messages`` non-system messages, widened so that a tool result never loses
    the call it answers."""
    history = build.history
    if build.config.mode is not SlotMode.FOCUSED:
        lo, counts = _in_reach(build)
        messages = history.messages(lo)
        if counts is None:
            build.conversation.extend(ViewEntry(m, "history", i) for i, m in enumerate(messages, lo))
            return
        # Counted on the way (each message once): the entries carry their tokens already,
        # and ``counted`` leaves the history entries from ``lo`` on as they are.
        assert len(counts) == len(messages)  # both from ``lo`` to the end
        kind: EntryKind = "history"
        build.conversation.extend(map(ViewEntry, messages, repeat(kind), range(lo, lo + len(counts)), counts))
        build.counted_from = lo
        return
    focus = build.config.focused
    kept_system = _first_system(build) if focus.keep_system else None
    build.system[:] = [e for e in build.system if e.kind == "compaction" or e is kept_system]
    if kept_system is not None and kept_system.kind == "history":
        build.system.insert(0, kept_system)
    if focus.summary_override:
        build.system.append(build.inject(Message.system(SUMMARY_PREFIX + focus.summary_override), "summary"))
    start, tail = _tail_without_exclusions(history, build.marks(), focus.recent_messages)
    if start < build.start:  # never reach back into what a compaction folded
        tail, start = tail[build.start - start :], build.start
    # Counted on the way, as ``counted`` would (it keeps history entries that carry tokens)
    counting = build.counting
    if counting.counter.exact:
        counts = history.token_counts(start, start + len(tail), counting.counts_key, counting.count)
    else:
        counts = counting.count_all(tail)
    build.conversation.extend(
        [
            ViewEntry(m, "history", p, c)
            for p, m, c in zip(range(start, start + len(tail)), tail, counts, strict=True)
            if m.role != "system"
        ]
    )
    kept = sorted(
        [e.position for e in (*build.system, *build.conversation) if e.kind == "history" and e.position is not None]
    )
    build.omitted.extend(Omitted(lo, hi, "filtered") for lo, hi in _gaps(kept, build.start, len(history)))


_READ_BLOCK = 1_024  # positions a full view reads at a time, newest first, on a very long history


def _in_reach(build: ViewBuild) -> tuple[int, list[int] | None]:
    """The first position a full view reads: where the conversation starts, or later when what
    follows holds more than the whole budget — what lies before that could never be sent, only
    folded, so it is not read (a first turn on a huge slot stays quick). It is left out of the
    view as "beyond the budget", its tokens estimated from what was read. With it, the token
    counts of the positions from there on (None: not counted here)."""
    history, start, n = build.history, build.start, len(build.history)
    counting, total, hi, limit = build.counting, 0, n, build.budget.total
    count, exact = counting.count, counting.counter.exact
    if n - start <= _READ_BLOCK:  # all of it, counted on the way too (``counted`` then makes no entry again)
        if exact:
            return start, history.token_counts(start, n, counting.counts_key, count)
        return start, [count(m) for m in history.messages(start)]
    blocks: list[list[int]] = []  # newest first
    while hi > start:
        lo = max(start, hi - _READ_BLOCK)
        if exact:
            counts = history.token_counts(lo, hi, counting.counts_key, count)
        else:
            counts = [count(m) for m in history.messages(lo, hi)]
        blocks.append(counts)
        for position in range(hi - 1, lo - 1, -1):
            total += counts[position - lo]
            if total > limit:
                seen = n - position
                build.beyond = round((position - start) * total / seen)
                build.omitted.append(Omitted(start, position + 1, "beyond"))
                blocks[-1] = counts[position + 1 - lo :]
                return position + 1, [c for block in reversed(blocks) for c in block]
        hi = lo
    return start, [c for block in reversed(blocks) for c in block]


def _tail_without_exclusions(history: History, marks: dict[int, Mark], count: int) -> tuple[int, list[Message]]:
    """The tail holding ``count`` non-system messages, excluded ones not counted: excluding
    a message never shrinks what a focused slot sends."""
    excluded = {p for p, mark in marks.items() if mark == "exclude"}
    if not excluded:
        return history.tail(count)
    extra = 0
    while True:
        start, tail = history.tail(count + extra)
        hidden = sum(1 for p, m in enumerate(tail, start) if p in excluded and m.role != "system")
        if hidden <= extra or start == 0:
            return start, tail
        extra = hidden


def _first_system(build: ViewBuild) -> ViewEntry | None:
    prompt = next((e for e in build.system if e.kind == "system"), None)
    if prompt is not None:
        return prompt
    found = build.history.first_system()
    return None if found is None or found[0] < build.start else ViewEntry(found[1], "history", found[0])


def _gaps(kept: Sequence[int], start: int, length: int) -> list[tuple[int, int]]:
    """The ranges of positions from ``start`` on between the kept ones (without visiting
    every position of a long history)."""
    out, previous = [], start
    for p in kept:
        if p > previous:
            out.append((previous, p))
        previous = max(previous, p + 1)
    if previous < length:
        out.append((previous, length))
    return out


@step("source")
def pins_and_exclusions(build: ViewBuild) -> None:
    """An excluded message is never sent; a pinned one is sent even when the focused filter
    or a compaction left it out, at its place in the conversation."""
    marks = build.marks()
    if not marks:
        return
    excluded = {p for p, m in marks.items() if m == "exclude"}
    build.pinned = frozenset(p for p, m in marks.items() if m == "pin")
    shown = {e.position for e in (*build.system, *build.conversation) if e.kind == "history"}

    def kept(entry: ViewEntry) -> bool:
        return not (entry.kind == "history" and entry.position in excluded)

    build.system[:] = [e for e in build.system if kept(e)]
    build.conversation[:] = [e for e in build.conversation if kept(e)]
    back = sorted(build.pinned - shown)
    if back:
        entries = [ViewEntry(build.history.messages(p, p + 1)[0], "history", p) for p in back]
        build.conversation[:] = sorted((*build.conversation, *entries), key=lambda e: e.position or 0)
    omitted = [o for o in build.omitted for o in _without(o, build.pinned)]
    omitted += [Omitted(p, p + 1, "excluded") for p in sorted(excluded & shown)]
    build.omitted[:] = omitted


def _without(gap: Omitted, positions: frozenset[int]) -> list[Omitted]:
    """A range of left-out positions less the ``positions`` put back."""
    inside = sorted(p for p in positions if gap.lo <= p < gap.hi)
    out, lo = [], gap.lo
    for p in inside:
        if p > lo:
            out.append(Omitted(lo, p, gap.reason))
        lo = p + 1
    if lo < gap.hi:
        out.append(Omitted(lo, gap.hi, gap.reason))
    return out


@step("new")
def new_message(build: ViewBuild) -> None:
    """The turn's new message, last and never filtered out: it counts against the budget."""
    if build.new is not None:
        build.conversation.append(ViewEntry(build.new, "new"))


@step("counting", "source")
def counted(build: ViewBuild) -> None:
    """Each entry's tokens as the model counts them. Stored messages are read from the store's
    counts (counted once per encoding, then kept); injected ones are counted now."""
    counting, history, done = build.counting, build.history, build.counted_from
    # Entries ``mode_filter`` counted already (history from ``done`` on, or any history entry
    # that carries its tokens) are kept as they are; the test is written out in each
    # comprehension below: this runs for every message of a view.
    cut = -1 if done is None else done

    counts: dict[int, int] = {}
    if counting.counter.exact:
        stored = sorted(
            p
            for e in (*build.system, *build.conversation)
            if (p := e.position) is not None and not (e.kind == "history" and (p >= cut >= 0 or e.tokens))
        )
        for lo, hi in _runs(stored):
            counts.update(
                zip(range(lo, hi), history.token_counts(lo, hi, counting.counts_key, counting.count), strict=True)
            )

    def tokens(entry: ViewEntry) -> int:
        if entry.position is not None and entry.position in counts:
            return counts[entry.position]
        return counting.count(entry.message)

    # New entries rather than dataclasses.replace: this runs for every message of a view.
    for entries in (build.system, build.conversation):
        entries[:] = [
            e
            if e.kind == "history" and (p := e.position) is not None and (p >= cut >= 0 or e.tokens)
            else ViewEntry(e.message, e.kind, e.position, tokens(e))
            for e in entries
        ]


def _runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted positions as contiguous ranges: (2, 3, 4, 9) -> [(2, 5), (9, 10)]."""
    out: list[tuple[int, int]] = []
    for p in positions:
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return out


@step("counting", "budget", "reserve", "tools")
def budgeted(build: ViewBuild) -> None:
    """The request against the slot's budget by category; past the threshold (the history and
    tool-result budgets less everything on the system side) it needs compaction."""
    system, tools = system_side(build)
    tool_results = conversation = 0
    for entry in build.conversation:  # a loop: this runs for every message of a view
        conversation += entry.tokens
        if entry.message.role == "tool":
            tool_results += entry.tokens
    history = conversation - tool_results + build.counting.counter.priming
    history += build.beyond  # what is beyond the budget counts, though it was not read
    build.report = build.budget.report(
        system=system, history=history, tools=tools, tool_results=tool_results, reserve=build.reserve
    )


STEPS: tuple[Step, ...] = (
    system_prompt,
    compacted,
    mode_filter,
    pins_and_exclusions,
    workflow_block,
    context_block,
    blank_messages,
    new_message,
    counted,
    images_for_model,
    images_within_limits,
    tool_pairs,
    blocks_as_text,
    round_as_text,
    user_first,
    bare_tools,
    aged_tool_results,
    budgeted,
)


@dataclass
class Prefix:
    """Where a view's build stood before its first step that reads one of ``varies``: the next
    view made with it, from inputs equal in everything those earlier steps read, starts there.
    A turn makes its view twice, without its tools and then with them (the tools depend on the
    view, and count in it): only the steps that read the tools run again."""

    varies: frozenset[str]
    _kept: tuple[ViewInputs, int, ViewBuild] | None = None

    def resume(self, inputs: ViewInputs, steps: Sequence[Step]) -> tuple[int, ViewBuild | None]:
        """The first step to run for ``inputs`` and the build to run it on (None: a new one)."""
        at = next((i for i, one in enumerate(steps) if one.reads & self.varies), len(steps))
        kept = self._kept
        if kept is None or kept[1] != at:
            return at, None
        before, _, build = kept
        read = frozenset().union(*(one.reads for one in steps[:at]))
        if any(getattr(before, name) != getattr(inputs, name) for name in read):
            return at, None
        return at, _copied(build, inputs)

    def keep(self, inputs: ViewInputs, at: int, build: ViewBuild) -> None:
        self._kept = (inputs, at, _copied(build, inputs))


def _copied(build: ViewBuild, inputs: ViewInputs) -> ViewBuild:
    """``build`` for ``inputs``, its lists its own (the steps change them in place)."""
    return replace(
        build,
        inputs=inputs,
        system=list(build.system),
        conversation=list(build.conversation),
        omitted=list(build.omitted),
        problems=list(build.problems),
    )


def make_view(inputs: ViewInputs, steps: Sequence[Step] = STEPS, prefix: Prefix | None = None) -> View:
    """Run the steps over ``inputs``: what the model is sent, entry by entry (from where
    ``prefix`` stood, when the steps before it read nothing that differs)."""
    if prefix is None:  # a warm turn's, a preview's: every step, nothing kept
        build = ViewBuild(inputs)
        for one in steps:
            one.run(build)
    else:
        first, resumed = prefix.resume(inputs, steps)
        start = first if resumed is not None else 0
        build = resumed if resumed is not None else ViewBuild(inputs)
        for index in range(start, len(steps)):
            if index == first and start == 0:
                prefix.keep(inputs, first, build)
            steps[index].run(build)
        if first == len(steps) and start == 0:
            prefix.keep(inputs, first, build)
    return View(
        inputs.slot,
        (*build.system, *build.conversation),
        tuple(build.omitted),
        len(build.history),
        build.report,
        inputs.budget,
        inputs.counting.encoding,
        build.compaction,
        build.pinned,
        tuple(build.problems),
        build.bare_tools,
    )


def assemble(
    slot: str,
    config: SlotConfig,
    history: History,
    prompt: str | None,
    counting: Counting,
    budget: ContextBudget,
    *,
    reserve: int = 0,
    compaction: Compaction | None = None,
    new: Message | None = None,
    tools: Sequence[ToolSpec] = (),
    steps: Sequence[Step] = STEPS,
    workflow: Workflow | None = None,
    context_turns: int | None = DEFAULT_RECENT_TURNS,
    wire: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> View:
    """:func:`make_view` with its inputs given one by one (``history`` taken as it is, never
    as a key: see :class:`~slotmagic._engine.view.inputs.Source`). ``compaction`` is one not stored
    yet, to apply instead of the history's; ``new`` is the turn's new message (a preview has
    none); ``workflow`` the session's active workflow and ``context_turns`` how long a
    working-context change is sent (see ``blocks``); ``wire`` the request format the model's
    provider speaks (``ProviderSpec.wire``); ``params`` the turn's provider parameters."""
    inputs = ViewInputs(
        slot, config, Source(history), prompt, counting, budget, reserve, compaction, new, tuple(tools), workflow,
        context_turns, wire, Params.of(params),
    )  # fmt: skip
    return make_view(inputs, steps)
