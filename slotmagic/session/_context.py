"""``session.context``: the working context of a session's slots (goals, decisions, open
questions, the current step), and the tools that give it to the model.

    session.context()                       # the current slot's, as a WorkingContext
    session.context.add_goal("Get the deposit back")
    session.context.decide("Small claims?", "Yes", "under the limit")
"""

from __future__ import annotations

from typing import Any

from .._contextbook import ContextBook
from .._core.checks import check_flag, check_whole
from .._core.context import WorkingContext
from .._core.slots import Slot
from .._engine.run.turn import TurnEngine
from .._engine.view.view import View
from ..tools import Tool
from ..tools._context import context_tools


class SessionContext(ContextBook):
    """The working contexts of a session's slots; calling it reads one (the current slot's by
    default). Every method takes ``slot=`` (None: the current slot)."""

    def __init__(self, engine: TurnEngine) -> None:
        super().__init__(engine.store, engine.session_id)
        self._engine = engine
        self._updates = False

    def __call__(self, slot: str | None = None) -> WorkingContext:
        """The slot's working context (``print()`` it for the whole of it)."""
        return self.read(slot)

    def __repr__(self) -> str:
        return f"<SessionContext of {self.session_id!r}: call it for a slot's working context>"

    @property
    def turns(self) -> int | None:
        """For how many turns a change to a slot's goals, decisions or questions is sent with
        its requests (the current step always is; everything once after a compaction). None
        sends no working context at all; ``configure_slot(working_context=False)`` (``%ctx
        off``) does so for one slot."""
        return self._engine.working_context_turns

    @turns.setter
    def turns(self, value: int | None) -> None:
        self._engine.working_context_turns = None if value is None else check_whole(value, "working_context_turns")

    @property
    def updates(self) -> bool:
        """Offer the model the tools that change a working context (off by default;
        ``read_context`` is offered whenever a request carries the context)."""
        return self._updates

    @updates.setter
    def updates(self, value: bool) -> None:
        self._updates = check_flag(value, "context_updates")

    def tools(self, slot: str | None = None, *, updates: bool = False) -> list[Tool[..., str]]:
        """Tools that give the model the slot's working context: ``read_context``, and with
        ``updates`` the tools to change it (marked as made by the model). ``slot`` None: the
        current slot when a tool runs."""
        return context_tools(self.store, self.session_id, slot, updates=updates)

    def offered(self, slot: Slot, view: View) -> list[Tool[..., Any]]:
        """What a turn on ``slot`` offers besides the session's tools (the engine asks): ``read_context``
        when its request carries the working-context block (the rest of the context is a call
        away; a request without the block stays byte for byte as without the feature), and the
        update tools when ``updates`` is on; none when the working context is off."""
        if self.turns is None or not slot.config.working_context:
            return []
        if not self.updates:
            for entry in view.entries:  # the system side comes first, the block in it; every turn asks
                if entry.kind == "context":
                    break
                if entry.message.role != "system":
                    return []
            else:
                return []
        return list(self.tools(slot.id, updates=self.updates))
