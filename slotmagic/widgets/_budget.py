"""``%slot budget``: the slot's token budget as a stacked bar within the model's window."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traitlets import Dict

from .._engine.view.budgeting import budget_data, budget_html
from ._base import asset
from ._slotview import SlotViewWidget

if TYPE_CHECKING:
    from .._engine.view.view import View
    from ..session import Session

__all__ = ["SlotBudgetWidget"]


class SlotBudgetWidget(SlotViewWidget):
    """The budget of ``slot`` (None: whichever slot is current), by category, against the
    model's window, with the compaction threshold marked. ``budget`` is
    :func:`slotmagic._engine.view.budgeting.budget_data` of :meth:`Session.budget`."""

    _esm = asset("static.js", "budget.js")
    _css = asset("common.css", "budget.css")

    budget = Dict().tag(sync=True)

    def _show(self, session: Session, view: View) -> None:
        found = session.budget(self._slot, model=self._model)
        data = budget_data(found)
        for category in data["categories"]:
            share = category["used"] / category["allowed"] if category["allowed"] else 0.0
            about = "" if found.exact else "~"
            category["tip"] = (
                f"{category['label']}: {about}{category['used']:,} of {category['allowed']:,} tokens ({share:.0%})"
            )
        self.budget = data
        self._text = found.to_text()
        self._html = budget_html(found)
