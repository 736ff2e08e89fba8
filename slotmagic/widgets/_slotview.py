"""What the preview and budget widgets share: one slot's next request, drawn again only when
it changed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import SlotMagicError
from ._base import SessionSource, SessionWidget

if TYPE_CHECKING:
    from .._engine.view.view import View
    from ..session import Session
    from ._live import LiveWidgets

__all__ = ["SlotGone", "SlotViewWidget"]


class SlotGone(SlotMagicError):
    """The slot a widget shows was deleted or renamed after it was shown."""


class SlotViewWidget(SessionWidget):
    """A widget of ``slot``'s view (None: whichever slot is current) as ``model`` would be sent
    it (None: the slot's model, else the session's). ``Session.preview`` gives the same view
    object while nothing it was made from changed (see ``TurnEngine.view``), so a refresh after
    a cell that changed nothing of it draws nothing."""

    def __init__(
        self,
        session: Session | SessionSource,
        slot: str | None = None,
        *,
        model: str | None = None,
        live: LiveWidgets | None = None,
        **kwargs: Any,
    ) -> None:
        self._slot, self._model = slot, model
        self._shown: View | None = None
        super().__init__(session, live=live, **kwargs)

    def _update(self, session: Session) -> None:
        if self._slot is not None and not session.has_slot(self._slot):
            raise SlotGone(f"slot {self._slot} is gone (deleted or renamed): shown as it was last")
        view = session.preview(self._slot, model=self._model)
        if view is self._shown:
            return
        self._show(session, view)
        self._shown = view

    def _show(self, session: Session, view: View) -> None:
        """Set the synced traits, ``_text`` and ``_html`` for ``view``."""
        raise NotImplementedError
