"""The turn engine: plan a cell's turn, assemble the request, stream, commit."""

from .pipeline import STEPS, assemble
from .plan import CellPlan, fork_name, plan_cell_turn
from .reply import Reply
from .turn import AsyncTurnStream, PendingTurn, TurnEngine, TurnOptions, TurnStream
from .view import View, ViewEntry

__all__ = [
    "STEPS",
    "AsyncTurnStream",
    "CellPlan",
    "PendingTurn",
    "Reply",
    "TurnEngine",
    "TurnOptions",
    "TurnStream",
    "View",
    "ViewEntry",
    "assemble",
    "fork_name",
    "plan_cell_turn",
]
