"""``%slot preview``: what the model will be sent next, entry by entry, and what was left out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traitlets import Dict

from ..engine.view import view_data, view_html, view_summary
from ..render import describe_mode
from .base import SessionSource, SessionWidget, asset
from .budget import view_key

if TYPE_CHECKING:
    from ..session import Session
    from .live import LiveWidgets

__all__ = ["SlotPreviewWidget"]


class SlotPreviewWidget(SessionWidget):
    """The view of ``slot`` (None: whichever slot is current) as :meth:`Session.preview` gives
    it. ``view`` is :func:`slotmagic.engine.view.view_data` plus a ``summary`` line."""

    _esm = asset("preview.js")
    _css = asset("common.css", "preview.css")

    view = Dict().tag(sync=True)

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
        view = session.preview(self._slot, model=self._model)
        mode = describe_mode(session.slot(view.slot).config)
        data = view_data(view, mode)
        data["summary"] = view_summary(data)
        self.view = data
        self._text = view.to_text(mode)
        self._html = view_html(view, mode)
        self._key = key
