"""The view of a slot's next request as a turn would send it: with the tools it would offer.

A turn's tool definitions count in its request (on the system side, ``tools`` in the budget),
and which tools it offers depends on the view (a reference in it offers ``read_namespace``, a
compaction ``recall``), so a preview, a budget and the sidebar made without them would show a
request lighter than the one sent, and a threshold the turn does not have. This makes the view
as :meth:`TurnEngine._made` does, without a new message: tools chosen from the view, the view
made again with them, until the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._core.slots import Slot
from ..._store.base import History
from .view import View

if TYPE_CHECKING:
    from ..run.turn import TurnEngine

__all__ = ["next_view"]


def next_view(
    engine: TurnEngine,
    slot: Slot,
    history: History,
    *,
    model: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> View:
    """The slot's next request (before its new message), counted with the tools a turn offers."""
    view = engine.view(slot, history, model=model, params=params)
    tools = engine.turn_tools(slot, None, view)
    for _ in range(3):
        if tools is None:
            return view
        view = engine.view(slot, history, model=model, params=params, tools=tools)
        again = engine.turn_tools(slot, None, view)
        if again is None or again.names() == tools.names():
            return view
        tools = again
    return view
