"""The working context (seed T5): what the model must not forget about the work at hand.

A slot's working context holds its **goals** (active, completed, cancelled), its
**decisions** (a question, what was decided, and why), its **questions** (open, or resolved
with an answer) and its **current step** (pending, in progress, done or blocked, with a note).
Every item records the turn in which it last changed, and so does every kind.

It is kept as append-only events, one per change (:class:`ContextEvent`), folded here into a
:class:`WorkingContext`. The store stamps each event with the turn it counts for (a change
made between turns counts as made at the next turn: the turn whose request first carries it)
and with the history's length then, which decides which derived slots see it, as for
compactions.

What the model is sent (:meth:`WorkingContext.injection`), in one block on the system side of
every request:

- the current step, always;
- goals, decisions and questions only when that kind changed within the last ``recent``
  turns (a change at turn ``t`` rides along in the requests of turns ``t`` to
  ``t + recent - 1``);
- everything, once, in the first request after a compaction (the conversation it came from
  is folded away).

When none of that applies nothing is sent, and the request is exactly what it would be
without the feature. Changes are made by pure functions here (:func:`add_goal`,
:func:`record_decision`, ...) that check them against the context and return the event, or
None when the change is already there (a notebook cell run again changes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, get_args

from .._errors import ConfigError
from .checks import check_text

GoalStatus = Literal["active", "completed", "cancelled"]
QuestionStatus = Literal["open", "resolved"]
StepStatus = Literal["pending", "in_progress", "done", "blocked"]
Author = Literal["user", "model"]
Kind = Literal["step", "goals", "decisions", "questions"]
Op = Literal["goal", "goal_status", "decision", "question", "resolved", "step", "cleared"]

GOAL_STATUSES: tuple[GoalStatus, ...] = get_args(GoalStatus)
STEP_STATUSES: tuple[StepStatus, ...] = get_args(StepStatus)
KINDS: tuple[Kind, ...] = get_args(Kind)
OPS: tuple[Op, ...] = get_args(Op)
DEFAULT_RECENT_TURNS = 3
MAX_TEXT = 1000  # characters of one field: the block rides along in requests
_OP_KINDS: dict[Op, tuple[Kind, ...]] = {
    "goal": ("goals",),
    "goal_status": ("goals",),
    "decision": ("decisions",),
    "question": ("questions",),
    "resolved": ("questions",),
    "step": ("step",),
    "cleared": KINDS,
}
_PREFIX = {"goals": "g", "decisions": "d", "questions": "q"}


@dataclass(frozen=True, slots=True)
class GoalItem:
    id: str
    text: str
    status: GoalStatus = "active"
    changed_at: int = 0  # the turn it last changed in
    by: Author = "user"


@dataclass(frozen=True, slots=True)
class DecisionItem:
    id: str
    question: str
    decision: str
    reason: str = ""
    changed_at: int = 0
    by: Author = "user"


@dataclass(frozen=True, slots=True)
class QuestionItem:
    id: str
    text: str
    status: QuestionStatus = "open"
    answer: str = ""
    changed_at: int = 0
    by: Author = "user"


@dataclass(frozen=True, slots=True)
class StepInfo:
    name: str
    status: StepStatus = "in_progress"
    note: str = ""
    changed_at: int = 0
    by: Author = "user"


@dataclass(frozen=True, slots=True)
class ContextEvent:
    """One change of a slot's working context. ``turn`` is the turn it counts for and ``at``
    the history's length when it was made (both stamped by the store); ``by`` says whether the
    user or the model (through a tool) made it."""

    op: Op
    data: Mapping[str, str]
    by: Author = "user"
    turn: int = 0
    at: int = 0
    created_at: float = 0.0
    origin: tuple[int, int] = (0, 0)  # where the store keeps it

    def stamped(self, turn: int, at: int, created_at: float, origin: tuple[int, int]) -> ContextEvent:
        return replace(self, turn=turn, at=at, created_at=created_at, origin=origin)

    @property
    def item_id(self) -> str:
        """The id of the goal, decision or question the change made or changed ("" for a
        change of the current step or a clear)."""
        return self.data.get("id", "")

    def to_dict(self) -> dict[str, Any]:
        return {"v": 1, "op": self.op, "data": dict(self.data), "by": self.by}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], turn: int, at: int, created_at: float = 0.0, origin: tuple[int, int] = (0, 0)
    ) -> ContextEvent:
        op = data.get("op")
        if op not in OPS:
            raise ConfigError(f"unknown working-context change {op!r}; this slotmagic knows {', '.join(OPS)}")
        by: Author = "model" if data.get("by") == "model" else "user"
        fields = {str(k): str(v) for k, v in (data.get("data") or {}).items()}
        return cls(op, fields, by, turn, at, created_at, origin)

    def describe(self) -> str:
        """What changed, in one line (``%ctx history``)."""
        d, op = self.data, self.op
        if op == "goal":
            text = f"goal {d['id']} added: {_line(d['text'])}"
        elif op == "goal_status":
            text = f"goal {d['id']} {d['status']}"
        elif op == "decision":
            text = f"decision {d['id']}: {_decision_line(d['question'], d['decision'], d.get('reason', ''))}"
        elif op == "question":
            text = f"question {d['id']} asked: {_line(d['text'])}"
        elif op == "resolved":
            text = f"question {d['id']} resolved: {_line(d['answer'])}"
        elif op == "step":
            text = f"step: {_step_line(d['name'], d['status'], d.get('note', ''))}"
        else:
            text = "cleared: every goal, decision, question and the step"
        return text + (" (by the model)" if self.by == "model" else "")


@dataclass(frozen=True)
class WorkingContext:
    """A slot's working context at one point of its history (fold of its events)."""

    goals: tuple[GoalItem, ...] = ()
    decisions: tuple[DecisionItem, ...] = ()
    questions: tuple[QuestionItem, ...] = ()
    step: StepInfo | None = None
    changed: Mapping[Kind, int] = field(default_factory=dict)  # the turn each kind last changed in

    @classmethod
    def from_events(cls, events: Iterable[ContextEvent]) -> WorkingContext:
        context = cls()
        for event in events:
            context = context.apply(event)
        return context

    @property
    def empty(self) -> bool:
        return not (self.goals or self.decisions or self.questions or self.step)

    def goal(self, goal_id: str) -> GoalItem:
        return _find(self.goals, goal_id, "goal")

    def question(self, question_id: str) -> QuestionItem:
        return _find(self.questions, question_id, "question")

    def decision(self, decision_id: str) -> DecisionItem:
        return _find(self.decisions, decision_id, "decision")

    def goal_with_text(self, text: str) -> GoalItem | None:
        return next((g for g in self.goals if _same(g.text, text)), None)

    def question_with_text(self, text: str) -> QuestionItem | None:
        return next((q for q in self.questions if _same(q.text, text)), None)

    def decision_on(self, question: str) -> DecisionItem | None:
        return next((d for d in self.decisions if _same(d.question, question)), None)

    def next_id(self, kind: Kind) -> str:
        items: Sequence[GoalItem | DecisionItem | QuestionItem] = getattr(self, kind)
        prefix = _PREFIX[kind]
        used = [int(i.id[1:]) for i in items if i.id[1:].isdigit()]
        return f"{prefix}{max(used, default=0) + 1}"

    # -- folding events ------------------------------------------------------------------------

    def apply(self, event: ContextEvent) -> WorkingContext:
        """This context with ``event`` applied (events already stored are applied as they are)."""
        d, t, by = event.data, event.turn, event.by
        changed = {**self.changed, **dict.fromkeys(_OP_KINDS[event.op], t)}
        if event.op == "goal":
            return replace(self, goals=(*self.goals, GoalItem(d["id"], d["text"], "active", t, by)), changed=changed)
        if event.op == "goal_status":
            status = d["status"] if d["status"] in GOAL_STATUSES else "active"
            goals = tuple(replace(g, status=status, changed_at=t, by=by) if g.id == d["id"] else g for g in self.goals)
            return replace(self, goals=goals, changed=changed)
        if event.op == "decision":
            item = DecisionItem(d["id"], d["question"], d["decision"], d.get("reason", ""), t, by)
            kept = tuple(x for x in self.decisions if x.id != item.id)
            at = next((i for i, x in enumerate(self.decisions) if x.id == item.id), len(kept))
            return replace(self, decisions=(*kept[:at], item, *kept[at:]), changed=changed)
        if event.op == "question":
            item_q = QuestionItem(d["id"], d["text"], "open", "", t, by)
            return replace(self, questions=(*self.questions, item_q), changed=changed)
        if event.op == "resolved":
            questions = tuple(
                replace(q, status="resolved", answer=d["answer"], changed_at=t, by=by) if q.id == d["id"] else q
                for q in self.questions
            )
            return replace(self, questions=questions, changed=changed)
        if event.op == "step":
            step_status = d["status"] if d["status"] in STEP_STATUSES else "in_progress"
            step = StepInfo(d["name"], step_status, d.get("note", ""), t, by)
            return replace(self, step=step, changed=changed)
        return WorkingContext(changed=changed)  # cleared

    # -- what the model is sent ----------------------------------------------------------------

    def injection(self, turn: int, recent: int = DEFAULT_RECENT_TURNS, *, everything: bool = False) -> str | None:
        """The block for the request of ``turn``: the current step always, each other kind
        when it changed within the last ``recent`` turns, everything when ``everything`` (the
        first request after a compaction). None when there is nothing to send."""

        def fresh(kind: Kind) -> bool:
            return everything or self.changed.get(kind, -1) > turn - recent

        def recent_item(changed_at: int) -> bool:
            return everything or changed_at > turn - recent

        parts: list[str] = []
        if self.step is not None:
            parts.append(f"Current step: {_step_line(self.step.name, self.step.status, self.step.note)}")
        if fresh("goals"):
            shown = [g for g in self.goals if g.status == "active" or recent_item(g.changed_at)]
            if shown:
                parts.append("Goals:")
                parts += [
                    f"- {g.id} {_line(g.text)}" + ("" if g.status == "active" else f" ({g.status})") for g in shown
                ]
        if fresh("decisions") and self.decisions:
            parts.append("Decisions:")
            parts += [f"- {d.id} {_decision_line(d.question, d.decision, d.reason)}" for d in self.decisions]
        if fresh("questions"):
            shown_q = [q for q in self.questions if q.status == "open" or recent_item(q.changed_at)]
            if shown_q:
                parts.append("Questions:")
                parts += [f"- {q.id} {_question_line(q)}" for q in shown_q]
        if not parts:
            return None
        return "\n".join(["Working context (goals, decisions and open questions kept for this conversation):", *parts])

    # -- as text -------------------------------------------------------------------------------

    def to_text(self) -> str:
        """The whole context, every item with its status, the turn it last changed in and who
        changed it (what ``%ctx show`` prints and the ``read_context`` tool returns)."""
        if self.empty:
            return "The working context is empty: no goals, decisions, questions or current step."
        lines: list[str] = []
        if self.step is not None:
            s = self.step
            lines.append(f"Current step: {_step_line(s.name, s.status, s.note)} {_when(s.changed_at, s.by)}")
        if self.goals:
            active = sum(1 for g in self.goals if g.status == "active")
            lines.append(f"Goals ({active} active of {len(self.goals)}):")
            lines += [f"  {g.id}  [{g.status}] {_line(g.text)} {_when(g.changed_at, g.by)}" for g in self.goals]
        if self.decisions:
            lines.append(f"Decisions ({len(self.decisions)}):")
            lines += [
                f"  {d.id}  {_decision_line(d.question, d.decision, d.reason)} {_when(d.changed_at, d.by)}"
                for d in self.decisions
            ]
        if self.questions:
            open_ = sum(1 for q in self.questions if q.status == "open")
            lines.append(f"Questions ({open_} open of {len(self.questions)}):")
            lines += [f"  {q.id}  [{q.status}] {_question_line(q)} {_when(q.changed_at, q.by)}" for q in self.questions]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "step": None if self.step is None else _fields(self.step),
            "goals": [_fields(g) for g in self.goals],
            "decisions": [_fields(d) for d in self.decisions],
            "questions": [_fields(q) for q in self.questions],
            "changed": dict(self.changed),
        }


def _fields(item: Any) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__slots__}


_Item = TypeVar("_Item", GoalItem, DecisionItem, QuestionItem)


def _find(items: Sequence[_Item], item_id: object, what: str) -> _Item:
    found = next((i for i in items if i.id == item_id), None)
    if found is None:
        known = ", ".join(i.id for i in items)
        hint = f"the {what}s are {known}" if known else f"there are no {what}s yet"
        raise ConfigError(f"no {what} {item_id!r} in the working context; {hint} (%ctx show lists them)")
    return found


def _line(text: str) -> str:
    return " ".join(text.split())


def _when(turn: int, by: Author) -> str:
    return f"(turn {turn}{', by the model' if by == 'model' else ''})"


def _decision_line(question: str, decision: str, reason: str) -> str:
    text = f"{_line(question)} -> {_line(decision)}"
    return text + (f" (because {_line(reason)})" if reason.strip() else "")


def _question_line(q: QuestionItem) -> str:
    return _line(q.text) + (f" -> {_line(q.answer)}" if q.status == "resolved" else "")


def _step_line(name: str, status: str, note: str) -> str:
    text = f"{_line(name)} ({status.replace('_', ' ')})"
    return text + (f"; note: {_line(note)}" if note.strip() else "")


# -- changes: checked against the context, None when already there ----------------------------


def _text(value: object, what: str, *, empty_ok: bool = False) -> str:
    text = check_text(value, what)
    if not empty_ok and not text.strip():
        raise ConfigError(f"{what} is empty: write it out")
    if len(text) > MAX_TEXT:
        raise ConfigError(
            f"{what} has {len(text):,} characters; keep it under {MAX_TEXT:,} (it rides along in requests)"
        )
    return text.strip()


def _same(a: str, b: str) -> bool:
    return _line(a).casefold() == _line(b).casefold()


def _author(by: object) -> Author:
    if by not in ("user", "model"):
        raise ConfigError(f"by must be 'user' or 'model', not {by!r}")
    return "model" if by == "model" else "user"


def add_goal(context: WorkingContext, text: object, by: Author = "user") -> ContextEvent | None:
    """A new active goal; None if a goal with this text is already there (any status)."""
    checked = _text(text, "the goal")
    if context.goal_with_text(checked) is not None:
        return None
    return ContextEvent("goal", {"id": context.next_id("goals"), "text": checked}, _author(by))


def set_goal_status(
    context: WorkingContext, goal_id: object, status: GoalStatus, by: Author = "user"
) -> ContextEvent | None:
    """Mark a goal completed, cancelled or active again; None if it already is."""
    if status not in GOAL_STATUSES:
        raise ConfigError(f"a goal's status is one of {', '.join(GOAL_STATUSES)}, not {status!r}")
    goal = context.goal(str(goal_id).strip())
    if goal.status == status:
        return None
    return ContextEvent("goal_status", {"id": goal.id, "status": status}, _author(by))


def record_decision(
    context: WorkingContext, question: object, decision: object, reason: object = "", by: Author = "user"
) -> ContextEvent | None:
    """A decision; recording one for a question already decided replaces it (same id), and
    None when it is the same decision and reason."""
    q = _text(question, "the decision's question")
    d = _text(decision, "the decision")
    r = _text(reason if reason is not None else "", "the decision's reason", empty_ok=True)
    existing = context.decision_on(q)
    if existing is not None and existing.decision == d and existing.reason == r:
        return None
    decision_id = existing.id if existing is not None else context.next_id("decisions")
    return ContextEvent("decision", {"id": decision_id, "question": q, "decision": d, "reason": r}, _author(by))


def ask_question(context: WorkingContext, text: object, by: Author = "user") -> ContextEvent | None:
    """An open question; None if one with this text is already there (open or resolved)."""
    checked = _text(text, "the question")
    if context.question_with_text(checked) is not None:
        return None
    return ContextEvent("question", {"id": context.next_id("questions"), "text": checked}, _author(by))


def resolve_question(
    context: WorkingContext, question_id: object, answer: object, by: Author = "user"
) -> ContextEvent | None:
    """Resolve a question with its answer; None if it already has this answer."""
    question = context.question(str(question_id).strip())
    checked = _text(answer, "the answer")
    if question.status == "resolved" and question.answer == checked:
        return None
    return ContextEvent("resolved", {"id": question.id, "answer": checked}, _author(by))


def set_step(
    context: WorkingContext,
    name: object = None,
    status: object = None,
    note: object = None,
    by: Author = "user",
) -> ContextEvent | None:
    """The current step. A new name starts a step (in progress unless ``status`` says else);
    no name, or the current step's name, changes its status or note. None if nothing changes."""
    if status is not None and status not in STEP_STATUSES:
        raise ConfigError(f"a step's status is one of {', '.join(STEP_STATUSES)}, not {status!r}")
    current = context.step
    if name is None:
        if current is None:
            raise ConfigError("there is no current step yet: name one (%ctx step NAME)")
        checked = current.name
    else:
        checked = _text(name, "the step's name")
    same = current is not None and _same(current.name, checked)
    new_note = _text(note, "the step's note", empty_ok=True) if note is not None else None
    if same:
        assert current is not None
        new_status = str(status) if status is not None else current.status
        kept_note = current.note if new_note is None else new_note
        if new_status == current.status and kept_note == current.note:
            return None
        return ContextEvent("step", {"name": current.name, "status": new_status, "note": kept_note}, _author(by))
    data = {"name": checked, "status": str(status or "in_progress"), "note": new_note or ""}
    return ContextEvent("step", data, _author(by))


def clear(context: WorkingContext, by: Author = "user") -> ContextEvent | None:
    """Empty the context; None if it is empty already."""
    return None if context.empty else ContextEvent("cleared", {}, _author(by))
