"""Jupyter widgets over a session: the slot tree, the preview, the budget bar, the workflow DAG.

    from slotmagic.widgets import SlotTreeWidget
    SlotTreeWidget(session)  # the last expression of a cell: the live tree

Built on ipywidgets and anywidget (each view is one ES module shipped beside its Python module).
Importing this package imports neither until a widget class is asked for, so the extension can
load the live registry (:mod:`slotmagic.widgets._live`) without them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._budget import SlotBudgetWidget
    from ._fanout import FanOutWidget
    from ._live import LiveWidgets, live_widgets
    from ._preview import SlotPreviewWidget
    from ._summary import SummaryEditor
    from ._tree import SlotTreeWidget
    from ._workflow import WorkflowWidget, workflow_widget

__all__ = [
    "FanOutWidget",
    "LiveWidgets",
    "SlotBudgetWidget",
    "SlotPreviewWidget",
    "SlotTreeWidget",
    "SummaryEditor",
    "WorkflowWidget",
    "live_widgets",
    "workflow_widget",
]

_WHERE = {
    "FanOutWidget": "_fanout",
    "LiveWidgets": "_live",
    "live_widgets": "_live",
    "SlotBudgetWidget": "_budget",
    "SlotPreviewWidget": "_preview",
    "SlotTreeWidget": "_tree",
    "SummaryEditor": "_summary",
    "WorkflowWidget": "_workflow",
    "workflow_widget": "_workflow",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
