"""Jupyter widgets over a session: the slot tree, the preview, the budget bar, the workflow DAG.

    from slotmagic.widgets import SlotTreeWidget
    SlotTreeWidget(session)  # the last expression of a cell: the live tree

Built on ipywidgets and anywidget (each view is one ES module shipped beside its Python module).
Importing this package imports neither until a widget class is asked for, so the extension can
load the live registry (:mod:`slotmagic.widgets.live`) without them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .budget import SlotBudgetWidget
    from .fanout import FanOutWidget
    from .live import LiveWidgets, live_widgets
    from .preview import SlotPreviewWidget
    from .summary import SummaryEditor
    from .tree import SlotTreeWidget
    from .workflow import WorkflowWidget, workflow_widget

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
    "FanOutWidget": "fanout",
    "LiveWidgets": "live",
    "live_widgets": "live",
    "SlotBudgetWidget": "budget",
    "SlotPreviewWidget": "preview",
    "SlotTreeWidget": "tree",
    "SummaryEditor": "summary",
    "WorkflowWidget": "workflow",
    "workflow_widget": "workflow",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
