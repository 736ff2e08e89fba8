"""A session's working contexts over a store: each change checked and stored in one transaction.

    book = ContextBook(store, session_id)
    book.add_goal("Get the deposit back", slot="default")

What ``session.context`` is made of, and what the working-context tools (``tools/_context.py``)
change: both work from the store and the session id, neither through the Session.
"""

from __future__ import annotations

from collections.abc import Callable

from ._core import context as wc
from ._core.context import (
    Author,
    ContextEvent,
    DecisionItem,
    GoalItem,
    QuestionItem,
    StepInfo,
    WorkingContext,
)
from ._core.slots import validate_slot_id
from ._store import Store

__all__ = ["ContextBook"]


class ContextBook:
    """The working contexts of one session's slots (``slot`` None: the current slot)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def read(self, slot: str | None = None) -> WorkingContext:
        """The slot's working context: goals, decisions, questions and the current step,
        each with the turn it last changed in (``print()`` it for the whole of it)."""
        return self.store.history(self.session_id, _slot(slot)).context()

    def history(self, slot: str | None = None) -> list[ContextEvent]:
        """Every change the slot's working context has seen, oldest first (``.describe()``
        says what changed, ``.turn`` in which turn, ``.by`` whether the model made it)."""
        return self.store.history(self.session_id, _slot(slot)).context_events()

    def change(
        self, change: Callable[[WorkingContext], ContextEvent | None], *, slot: str | None = None
    ) -> tuple[WorkingContext, ContextEvent | None]:
        """Apply one change made by a function of ``slotmagic._core.context`` (checked against
        the context and stored in one transaction); the context after it, and the change as
        stored (None when it was already there)."""
        return self.store.change_context(self.session_id, _slot(slot), change)

    def add_goal(self, text: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        """A new active goal (``g1``, ``g2`` …); a goal with the same text is returned as it is."""
        context, event = self.change(lambda c: wc.add_goal(c, text, by), slot=slot)
        found = context.goal(event.item_id) if event else context.goal_with_text(text.strip())
        assert found is not None
        return found

    def complete_goal(self, goal_id: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        """Mark a goal (``g1`` …) completed."""
        context, _ = self.change(lambda c: wc.set_goal_status(c, goal_id, "completed", by), slot=slot)
        return context.goal(goal_id.strip())

    def cancel_goal(self, goal_id: str, *, slot: str | None = None, by: Author = "user") -> GoalItem:
        """Mark a goal cancelled (it stays listed, as cancelled)."""
        context, _ = self.change(lambda c: wc.set_goal_status(c, goal_id, "cancelled", by), slot=slot)
        return context.goal(goal_id.strip())

    def decide(
        self, question: str, decision: str, reason: str = "", *, slot: str | None = None, by: Author = "user"
    ) -> DecisionItem:
        """Record a decision (``d1`` …) on a question; deciding a question again replaces it."""
        context, event = self.change(lambda c: wc.record_decision(c, question, decision, reason, by), slot=slot)
        found = context.decision(event.item_id) if event else context.decision_on(question.strip())
        assert found is not None
        return found

    def ask(self, question: str, *, slot: str | None = None, by: Author = "user") -> QuestionItem:
        """An open question (``q1`` …); a question with the same text is returned as it is."""
        context, event = self.change(lambda c: wc.ask_question(c, question, by), slot=slot)
        found = context.question(event.item_id) if event else context.question_with_text(question.strip())
        assert found is not None
        return found

    def resolve(self, question_id: str, answer: str, *, slot: str | None = None, by: Author = "user") -> QuestionItem:
        """Resolve an open question (``q1`` …) with its answer."""
        context, _ = self.change(lambda c: wc.resolve_question(c, question_id, answer, by), slot=slot)
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
        context, _ = self.change(lambda c: wc.set_step(c, name, status, note, by), slot=slot)
        assert context.step is not None
        return context.step

    def clear(self, slot: str | None = None) -> WorkingContext:
        """Empty the slot's working context (its history of changes stays)."""
        return self.change(lambda c: wc.clear(c), slot=slot)[0]


def _slot(slot: object) -> str | None:
    return None if slot is None else validate_slot_id(slot)
