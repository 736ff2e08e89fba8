"""``%slot preview``: what the model will be sent next, entry by entry, and what was left out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traitlets import Dict

from .._engine.view.view import View, view_data, view_html, view_summary
from .._render import describe_mode
from ._base import asset
from ._slotview import SlotViewWidget

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["SlotPreviewWidget"]


class SlotPreviewWidget(SlotViewWidget):
    """The view of ``slot`` (None: whichever slot is current) as :meth:`Session.preview` gives
    it. ``view`` is :func:`slotmagic._engine.view.view.view_data` plus a ``summary`` line."""

    _esm = asset("static.js", "preview.js")
    _css = asset("common.css", "preview.css")

    view = Dict().tag(sync=True)

    def _show(self, session: Session, view: View) -> None:
        mode = describe_mode(session.slot(view.slot).config)
        data = view_data(view, mode)
        data["summary"] = view_summary(data)
        self.view = dict(data)
        self._text = view.to_text(mode)
        self._html = view_html(view, mode)
