"""Tools that give a model a slot's working context (seed T5).

``read_context`` returns the whole context as text, for when the block in the system prompt
(which carries only what changed lately) is not enough. The update tools let the model propose
changes (``add_goal``, ``complete_goal``, ``record_decision``, ``ask_question``,
``resolve_question``, ``set_step``); they are off unless asked for, and what they change is
marked as made by the model (``%ctx history`` says so). A change that cannot be made (an
unknown id, an empty text) is an error result the model reads, like any tool's exception.

    tools = context_tools(store, session_id, "default", updates=True)
    registry = ToolRegistry(tools)

A tool bound to ``slot=None`` works on whatever slot is current when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .._contextbook import ContextBook
from ._tool import Tool

if TYPE_CHECKING:
    from .._store import Store


def context_tools(
    store: Store, session_id: str, slot: str | None = None, *, updates: bool = False
) -> list[Tool[..., str]]:
    """``read_context`` for ``slot`` of the session ``session_id`` in ``store``, and with
    ``updates`` the tools that change its working context."""
    book = ContextBook(store, session_id)

    def read_context() -> str:
        """Read the whole working context of this conversation: the goals (active, completed,
        cancelled), the decisions with their reasons, the open and resolved questions, and the
        current step, each with the turn it last changed in."""
        return book.read(slot).to_text()

    def add_goal(text: str) -> str:
        """Add a goal the user is working towards, once it is clear (not for every wish).

        Args:
            text: The goal, in one short sentence.
        """
        goal = book.add_goal(text, slot=slot, by="model")
        return f"goal {goal.id}: {goal.text} ({goal.status})"

    def complete_goal(goal_id: str) -> str:
        """Mark a goal as completed, once it has been reached.

        Args:
            goal_id: The goal's id, such as g1 (read_context lists them).
        """
        goal = book.complete_goal(goal_id, slot=slot, by="model")
        return f"goal {goal.id}: {goal.text} ({goal.status})"

    def record_decision(question: str, decision: str, reason: str = "") -> str:
        """Record a decision the user has made, so it is not reopened later. Recording one on a
        question already decided replaces the earlier decision.

        Args:
            question: What was to be decided.
            decision: What was decided.
            reason: Why, in a few words.
        """
        made = book.decide(question, decision, reason, slot=slot, by="model")
        return f"decision {made.id}: {made.question} -> {made.decision}"

    def ask_question(question: str) -> str:
        """Note a question that is still open and must be answered before the work is done.

        Args:
            question: The open question.
        """
        asked = book.ask(question, slot=slot, by="model")
        return f"question {asked.id}: {asked.text} ({asked.status})"

    def resolve_question(question_id: str, answer: str) -> str:
        """Resolve an open question with its answer.

        Args:
            question_id: The question's id, such as q1 (read_context lists them).
            answer: The answer, in one or two sentences.
        """
        resolved = book.resolve(question_id, answer, slot=slot, by="model")
        return f"question {resolved.id} resolved: {resolved.answer}"

    def set_step(
        name: str, status: Literal["pending", "in_progress", "done", "blocked"] = "in_progress", note: str = ""
    ) -> str:
        """Set the current step of the work: a new name starts a step, the current step's name
        changes its status or note.

        Args:
            name: The step, in a few words.
            status: Where it stands.
            note: Anything worth remembering about it.
        """
        step = book.set_step(name, status=status, note=note or None, slot=slot, by="model")
        return f"current step: {step.name} ({step.status})" + (f"; note: {step.note}" if step.note else "")

    functions: list[Any] = [read_context]
    if updates:
        functions += [add_goal, complete_goal, record_decision, ask_question, resolve_question, set_step]
    return [_template(f)._calling(f) for f in functions]


# Each tool's definition, worked out from its function's hints and docstring (and checked)
# once per process: the functions above are closures made anew for every turn, their
# signatures and docstrings the same each time.
_TEMPLATES: dict[str, Tool[..., Any]] = {}


def _template(function: Callable[..., str]) -> Tool[..., Any]:
    found = _TEMPLATES.get(function.__name__)
    if found is None:
        found = _TEMPLATES[function.__name__] = Tool.from_function(function)
    return found
