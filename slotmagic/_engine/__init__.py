"""The turn engine: plan a cell's turn, assemble the request, stream, commit."""

from .plan.cell_turn import CellPlan, fork_name, plan_cell_turn
from .plan.pending import PendingTurn, TurnOptions
from .run.reply import Reply
from .run.streams import AsyncTurnStream, TurnStream
from .run.turn import TurnEngine
from .steps import Step, step
from .view.inputs import ViewInputs
from .view.pipeline import STEPS, assemble, make_view
from .view.view import View, ViewEntry

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
