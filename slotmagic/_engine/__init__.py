"""The turn engine: plan a cell's turn, assemble the request, stream, commit."""

from .inputs import ViewInputs
from .pending import PendingTurn, TurnOptions
from .pipeline import STEPS, assemble, make_view
from .plan import CellPlan, fork_name, plan_cell_turn
from .reply import Reply
from .steps import Step, step
from .streams import AsyncTurnStream, TurnStream
from .turn import TurnEngine
from .view import View, ViewEntry

__all__ = [
    "STEPS",
    "AsyncTurnStream",
    "CellPlan",
    "PendingTurn",
    "Reply",
    "Step",
    "TurnEngine",
    "TurnOptions",
    "TurnStream",
    "View",
    "ViewEntry",
    "ViewInputs",
    "assemble",
    "fork_name",
    "make_view",
    "plan_cell_turn",
    "step",
]
