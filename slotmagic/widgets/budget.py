"""``%slot budget``: the slot's token budget as a stacked bar within the model's window."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from traitlets import Dict

from ..engine.budgeting import budget_data, budget_html
from ..errors import SlotMagicError
from .base import SessionSource, SessionWidget, asset

if TYPE_CHECKING:
    from ..session import Session
    from .live import LiveWidgets

__all__ = ["SlotBudgetWidget", "view_key"]


class SlotGone(SlotMagicError):
    """The slot a widget shows was deleted or renamed after it was shown."""


def view_key(session: Session, slot: str | None, model: str | None) -> str:
    """What a slot's view depends on, read cheaply (the slot row and its compactions): when it
    is unchanged, the view and its budget are too, and are not computed again."""
    if slot is not None and not session.has_slot(slot):
        raise SlotGone(f"slot {slot} is gone (deleted or renamed): shown as it was last")
    found = session.slot(slot)
    meta = found.meta
    return json.dumps(
        [
            found.id,
            meta.created_at,
            meta.message_count,
            found.config.to_dict(),
            model or session.model,
            session.system,
            sorted(session.context_windows.items()),
            len(session.compactions(found.id)),
            sorted(session.marks(found.id).items()),  # pins and exclusions change the view
        ],
        default=str,
    )


class SlotBudgetWidget(SessionWidget):
    """The budget of ``slot`` (None: whichever slot is current), by category, against the
    model's window, with the compaction threshold marked. ``budget`` is
    :func:`slotmagic.engine.budgeting.budget_data` of :meth:`Session.budget`."""

    _esm = asset("budget.js")
    _css = asset("common.css", "budget.css")

    budget = Dict().tag(sync=True)

    def __init__(
        self,
        session: Session | SessionSource,
        slot: str | None = None,
        *,
        model: str | None = None,
        live: LiveWidgets | None = None,
        **kwargs: Any,
    ) -> None:
        self._slot, self._model, self._key = slot, model, ""
        super().__init__(session, live=live, **kwargs)

    def _update(self, session: Session) -> None:
        key = view_key(session, self._slot, self._model)
        if key == self._key:
            return
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
        self._key = key
