"""A view: what the model is sent for a slot's next turn, entry by entry, with what was left
out and how it stands against the budget; the state the pipeline's steps build it in
(:class:`ViewBuild`); and its forms: text (``%slot preview``), the data a preview widget is
sent, and escaped HTML (where widgets are not available: GitHub, nbconvert).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from ..._core.budget import BudgetReport, ContextBudget
from ..._core.compaction import Compaction
from ..._core.messages import Message
from ..._core.request import ToolSpec
from ..._core.slots import SlotConfig
from ..._core.workflow import Workflow
from ..._render import BODY_LIMIT, NAMESPACE_REF, ROW_LIMIT, entry_label, plural
from ..._store.base import History
from ..._store.history import Mark
from ...tokens import ESTIMATE
from .inputs import Counting, Params, ViewInputs

EntryKind = Literal[
    "system", "history", "elided", "summary", "compaction", "context", "workflow", "new", "not_run", "opening", "told"
]
OmitReason = Literal["compacted", "filtered", "excluded", "beyond", "blank", "replaced"]


@dataclass(frozen=True, slots=True)
class ViewEntry:
    """One message of a view: ``history`` entries carry their position in the stored history
    (and so do ``elided`` ones: an older tool result shortened to its reference); the others
    were put there by a step (the ``system`` prompt, a focused slot's ``summary``, a
    ``compaction``'s summary) or are the turn's ``new`` message. A ``not_run`` entry answers a
    tool call no stored result answers (APIs refuse a call without its result): it carries the
    call's position, so it shows beside it; an ``opening`` entry is the user message an API that
    wants one first is sent before a view that starts with a reply; a ``told`` entry is a stored
    message the request's params make the API take only as text (a last tool round made without
    thinking, sent to a model thinking), at its position. ``tokens`` is the message's
    count as the model will count it (exact, or a calibrated estimate)."""

    message: Message
    kind: EntryKind
    position: int | None = None
    tokens: int = 0


def tokens_of(entries: Iterable[ViewEntry]) -> int:
    """The entries' tokens together (a loop, not ``sum`` over a generator: it runs for every
    entry of each view, several times a turn)."""
    total = 0
    for entry in entries:
        total += entry.tokens
    return total


@dataclass(frozen=True, slots=True)
class Omitted:
    """Stored positions ``lo`` to ``hi - 1`` the model does not see, and why."""

    lo: int
    hi: int
    reason: OmitReason

    @property
    def count(self) -> int:
        return self.hi - self.lo


@dataclass
class ViewBuild:
    """What the steps work on: the ``inputs`` (read-only, each step reads the fields it
    declares) and the view taking shape. ``system`` is the system side of the request (prompt,
    summaries, injected blocks), ``conversation`` the rest, in order; ``start`` the first stored
    position the conversation may draw from (after a compaction's folded part)."""

    inputs: ViewInputs
    system: list[ViewEntry] = field(default_factory=list)
    conversation: list[ViewEntry] = field(default_factory=list)
    omitted: list[Omitted] = field(default_factory=list)
    start: int = 0
    report: BudgetReport | None = None
    compaction: Compaction | None = None  # the one applied (set by the ``compacted`` step)
    pinned: frozenset[int] = frozenset()  # stored positions kept whatever the filter or a compaction
    problems: list[str] = field(default_factory=list)  # what a step left out because it could not be read
    beyond: int = 0  # tokens (estimated) of stored messages beyond the budget, left out unread
    counted_from: int | None = None  # history entries from this position on carry their tokens already
    bare_tools: tuple[ToolSpec, ...] = ()  # definitions the wire adds beside tool calls (steps/bare_tools.py)
    _marks: dict[int, Mark] | None = field(default=None, init=False, repr=False, compare=False)

    # The inputs by name, as the steps read them (each read goes through ``inputs``).
    @property
    def config(self) -> SlotConfig:
        return self.inputs.config

    @property
    def history(self) -> History:
        return self.inputs.source.history

    @property
    def prompt(self) -> str | None:
        return self.inputs.prompt

    @property
    def counting(self) -> Counting:
        return self.inputs.counting

    @property
    def budget(self) -> ContextBudget:
        return self.inputs.budget

    @property
    def reserve(self) -> int:
        return self.inputs.reserve

    @property
    def new(self) -> Message | None:
        return self.inputs.new

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self.inputs.tools

    @property
    def workflow(self) -> Workflow | None:
        return self.inputs.workflow

    @property
    def context_turns(self) -> int | None:
        return self.inputs.context_turns

    @property
    def wire(self) -> str | None:
        return self.inputs.wire

    @property
    def params(self) -> Params:
        return self.inputs.params

    def marks(self) -> dict[int, Mark]:
        """The history's pins and exclusions (``History.marks``), read once a build: the
        focused filter and the pins step both ask."""
        if self._marks is None:
            self._marks = self.history.marks()
        return self._marks

    def inject(self, message: Message, kind: EntryKind) -> ViewEntry:
        """An entry for a message a step made."""
        return ViewEntry(message, kind)


@dataclass(frozen=True)
class View:
    """What the model is sent for a slot's next turn, entry by entry, and how it stands
    against the slot's budget."""

    slot: str
    entries: tuple[ViewEntry, ...]
    omitted: tuple[Omitted, ...] = ()  # positions of the stored history left out, and why
    history_length: int = 0
    report: BudgetReport | None = None
    budget: ContextBudget | None = None
    encoding: str = ESTIMATE
    compaction: Compaction | None = None  # the one applied
    pinned: frozenset[int] = frozenset()  # stored positions pinned (kept whatever the filter)
    problems: tuple[str, ...] = ()  # what was left out because it could not be read (one line each)
    # Tool definitions the request carries though it offers no tools, beside the history's tool
    # calls (the wire writes them, the model may call none): counted in the tools share.
    bare_tools: tuple[ToolSpec, ...] = ()

    @property
    def messages(self) -> tuple[Message, ...]:
        """The entries' messages, kept once read (a turn reads them several times; kept by hand:
        ``functools.cached_property`` takes a lock on every first read before Python 3.12)."""
        kept: tuple[Message, ...] | None = self.__dict__.get("_messages")
        if kept is None:
            kept = tuple([e.message for e in self.entries])
            object.__setattr__(self, "_messages", kept)
        return kept

    @property
    def tokens(self) -> int:
        return tokens_of(self.entries)

    @property
    def exact(self) -> bool:
        return self.encoding != ESTIMATE

    def to_text(self, mode: str | None = None) -> str:
        """Each message with its role, tokens and text, in order, and what was left out where
        it was: the form ``%slot preview`` prints (``mode`` describes the slot's mode)."""
        what = f"slot {self.slot}" + (f" ({mode})" if mode else "")
        total = f"{self.tokens:,} tokens" if self.exact else f"~{self.tokens:,} tokens"
        lines = [f"{what} would send {plural(len(self.entries), 'message')}, {total}, then the new user message:"]
        shown: list[tuple[int, str]] = []  # (sort position, text): the system side first
        labels = {
            "compaction": " · summary of a compaction",
            "summary": " · summary",
            "workflow": " · workflow",
            "context": " · working context",
            "new": " · new",
            "elided": " · older tool result, shortened",
            "not_run": " · added: the call was not run",
            "opening": " · added: the API wants a user message first",
            "told": " · told as text: thinking is on",
        }
        for number, entry in enumerate(self.entries, 1):
            label = (
                " · pinned" if entry.kind == "history" and entry.position in self.pinned else labels.get(entry.kind, "")
            )
            head = f"[{number}] {entry.message.role} ({plural(entry.tokens, 'token')}{label})"
            body = [head, *("    " + line for line in (entry.message.content or "(no text)").splitlines() or [""])]
            body += [f"    -> tool call {c.name}({c.arguments})" for c in entry.message.tool_calls]
            at = entry.position if entry.position is not None else -1
            shown.append((at, "\n".join(body)))
        for gap in sorted(self.omitted, key=lambda o: o.lo):
            what = {
                "compacted": "folded into the summary",
                "filtered": "left out by the focused filter",
                "excluded": "excluded: the model never sees it",
                "beyond": "beyond what the budget can hold: the next turn folds them",
                "blank": "blank: nothing to send",
                "replaced": 'a "not run" answer, replaced by the result supplied after it',
            }[gap.reason]
            where = stored_range(gap.lo, gap.hi)
            shown.append((gap.lo, f"    … {plural(gap.count, 'stored message')} {what} ({where})"))
        lines += [text for _, text in sorted(shown, key=lambda item: item[0])]
        if self.bare_tools:
            names = ", ".join(t.name for t in self.bare_tools)
            lines.append(
                f"    with bare tool definitions ({names}): the history's tool calls need them, none is offered"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return view_html(self)


# -- the data a preview widget is sent, and HTML ------------------------------------------------


# What view_data() gives the preview's HTML, its widget and the sidebar: one row per entry sent,
# per stretch of stored messages left out, and for the earlier messages not shown.
class EntryRow(TypedDict):
    type: Literal["entry"]
    number: int
    kind: EntryKind
    label: str
    pinned: bool
    injected: bool
    role: str
    tokens: int
    position: int | None
    text: str
    cut: int  # characters of the body not shown
    calls: list[str]
    refs: list[str]  # namespace references in the body


class OmittedRow(TypedDict):
    type: Literal["omitted"]
    reason: str
    lo: int
    hi: int
    count: int
    text: str


class HiddenRow(TypedDict):
    type: Literal["hidden"]
    count: int
    text: str


Row = EntryRow | OmittedRow | HiddenRow


class BudgetData(TypedDict):
    total: int
    used: int
    history_used: int  # history and tool results
    history_available: int
    needs_compaction: bool
    over: list[str]


class _ViewData(TypedDict):
    slot: str
    mode: str
    count: int
    tokens: int
    exact: bool
    encoding: str
    history_length: int
    omitted: int
    hidden: int
    budget: BudgetData | None
    bare_tools: list[str]  # the tool definitions the wire adds beside the history's calls
    rows: list[Row]


class ViewData(_ViewData, total=False):
    summary: str  # view_summary()'s line, added by the preview widget


def _entry_row(number: int, entry: ViewEntry, pinned: bool = False) -> EntryRow:
    message = entry.message
    text = message.content or ""
    cut = max(0, len(text) - BODY_LIMIT)
    return {
        "type": "entry",
        "number": number,
        "kind": entry.kind,
        "label": "pinned" if pinned else entry_label(entry.kind),
        "pinned": pinned,
        "injected": entry.kind not in ("history", "elided", "new"),
        "role": message.role,
        "tokens": entry.tokens,
        "position": entry.position,
        "text": text[:BODY_LIMIT] if cut else text,
        "cut": cut,
        "calls": [f"{c.name}({c.arguments})" for c in message.tool_calls],
        "refs": sorted(set(NAMESPACE_REF.findall(text))),
    }


def stored_range(lo: int, hi: int) -> str:
    """Stored positions ``lo`` to ``hi - 1``, numbered from 1 as ``%slot show`` numbers them."""
    return f"stored message {lo + 1}" if hi - lo == 1 else f"stored messages {lo + 1}-{hi}"


def _gap_row(lo: int, hi: int, reason: str) -> OmittedRow:
    what = {
        "compacted": "folded into the compaction summary",
        "filtered": "left out by the focused filter",
        "excluded": "excluded: the model never sees it",
        "beyond": "beyond what the budget can hold: the next turn folds them",
        "blank": "blank: nothing to send",
        "replaced": 'a "not run" answer, replaced by the result supplied after it',
    }.get(reason, f"left out ({reason})")
    where = stored_range(lo, hi)
    return {
        "type": "omitted",
        "reason": reason,
        "lo": lo,
        "hi": hi,
        "count": hi - lo,
        "text": f"{plural(hi - lo, 'stored message')} {what} ({where})",
    }


def view_data(view: View, mode: str | None = None, *, row_limit: int = ROW_LIMIT) -> ViewData:
    """The view in order, as ``%slot preview`` prints it: each entry (role, tokens, label, its
    body) and, where they were, the stored positions left out. Entries on the system side
    come first; stored messages at their positions."""
    placed: list[tuple[int, Row]] = []
    for number, entry in enumerate(view.entries, 1):
        at = entry.position if entry.position is not None else -1
        pinned = entry.kind == "history" and entry.position in view.pinned
        placed.append((at, _entry_row(number, entry, pinned)))
    for gap in view.omitted:
        placed.append((gap.lo, _gap_row(gap.lo, gap.hi, gap.reason)))
    rows = [row for _, row in sorted(placed, key=lambda item: item[0])]
    hidden = 0
    stored = [
        i for i, row in enumerate(rows) if row["type"] == "entry" and row["kind"] in ("history", "elided", "told")
    ]
    if len(stored) > row_limit:
        drop = set(stored[: len(stored) - row_limit])
        hidden = len(drop)
        note: HiddenRow = {
            "type": "hidden",
            "count": hidden,
            "text": f"{plural(hidden, 'earlier message')} sent but not shown here (%slot preview prints them all)",
        }
        rows = [note if i == stored[0] else row for i, row in enumerate(rows) if i == stored[0] or i not in drop]
    report = view.report
    budget = view.budget
    return {
        "slot": view.slot,
        "mode": mode or "",
        "count": len(view.entries),
        "tokens": view.tokens,
        "exact": view.exact,
        "encoding": view.encoding,
        "history_length": view.history_length,
        "omitted": sum(o.count for o in view.omitted),
        "hidden": hidden,
        "budget": None
        if report is None or budget is None
        else {
            "total": budget.total,
            "used": report.used,
            "history_used": report.conversation_used,  # history and tool results
            "history_available": report.history_available,
            "needs_compaction": report.needs_compaction,
            "over": list(report.over),
        },
        "bare_tools": [t.name for t in view.bare_tools],
        "rows": rows,
    }


def view_summary(data: ViewData) -> str:
    """The line above a preview: how many messages, how many tokens, against the budget."""
    about = "" if data["exact"] else "~"
    line = f"slot {data['slot']}" + (f" ({data['mode']})" if data["mode"] else "")
    line += f" would send {plural(data['count'], 'message')}, {about}{data['tokens']:,} tokens"
    budget = data["budget"]
    if budget is not None:
        line += (
            f" · history and tool results {about}{budget['history_used']:,} of {budget['history_available']:,}"
            " before compaction"
            f" · budget {budget['total']:,}"
        )
        if budget["needs_compaction"]:
            line += " · past the threshold: the next turn compacts"
    if data["omitted"]:
        line += f" · {plural(data['omitted'], 'stored message')} left out"
    if data["bare_tools"]:  # counted in the tools share: the history's calls need them
        line += f" · with bare tool definitions ({', '.join(data['bare_tools'])})"
    return line


def view_html(view: View, mode: str | None = None) -> str:
    """The preview as HTML: one collapsed ``<details>`` per message, what was left out greyed
    where it was. Every text escaped."""
    import html  # here: the HTML preview is for a saved notebook's copy, not every kernel

    data = view_data(view, mode)
    e = html.escape
    out = [f'<div class="slotmagic-preview"><div>{e(view_summary(data))}</div>']
    for row in data["rows"]:
        if row["type"] != "entry":
            out.append(f'<div style="opacity:0.6"><i>… {e(row["text"])}</i></div>')
            continue
        label = f" · {e(row['label'])}" if row["label"] else ""
        head = f"[{row['number']}] <b>{e(row['role'])}</b> ({plural(row['tokens'], 'token')}{label})"
        body = e(row["text"]) + (f"\n… {row['cut']:,} more characters" if row["cut"] else "")
        calls = "".join(f"\n-> tool call {e(c)}" for c in row["calls"])
        refs = "".join(f"\nnamespace reference: {e(r)}" for r in row["refs"])
        out.append(
            f'<details><summary>{head}</summary><pre style="white-space:pre-wrap">{body}{calls}{refs}</pre></details>'
        )
    out.append("</div>")
    return "".join(out)
