"""The turn engine: plan a cell's turn, assemble the request, stream, commit."""

from .pending import PendingTurn, TurnOptions
from .pipeline import STEPS, assemble
from .plan import CellPlan, fork_name, plan_cell_turn
from .reply import Reply
from .streams import AsyncTurnStream, TurnStream
from .turn import TurnEngine
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
