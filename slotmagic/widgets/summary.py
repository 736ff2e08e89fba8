"""``%slot compact --edit``: a previewed summary in a text box, applied when the user says so.

Plain ipywidgets (a text area, a button, a line of status): the edited text goes to
``session.compact(slot, apply=True, summary=text)``, which checks that the slot is still the
history the summary was made for. Its output carries the draft as text for front ends
without widgets (nbconvert, GitHub).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import ipywidgets  # type: ignore[import-untyped]

from ..errors import SlotMagicError

if TYPE_CHECKING:
    from ..core.compaction import Compaction
    from ..session import Session

__all__ = ["SummaryEditor"]


class SummaryEditor(ipywidgets.VBox):  # type: ignore[misc]
    """Edit the summary previewed for ``slot``, then apply it."""

    def __init__(self, session: Session, slot: str, draft: Compaction) -> None:
        self.session = session
        self.slot = slot
        self.draft = draft
        lo, hi = draft.upto - draft.replaced + 1, draft.upto
        self.head = ipywidgets.HTML(
            html.escape(f"The summary previewed for slot {slot}, to replace messages {lo}-{hi}: edit it, then apply")
        )
        self.text = ipywidgets.Textarea(
            value=draft.text, layout=ipywidgets.Layout(width="100%", height="10em"), description=""
        )
        self.apply = ipywidgets.Button(description="Apply summary", button_style="primary", icon="check")
        self.status = ipywidgets.HTML("")
        self.apply.on_click(self._apply)
        super().__init__([self.head, self.text, ipywidgets.HBox([self.apply, self.status])])

    def _apply(self, _button: Any = None) -> None:
        try:
            made = self.session.compact(self.slot, apply=True, summary=self.text.value)
        except SlotMagicError as exc:
            self.status.value = f'<span style="color:var(--jp-error-color1)">{html.escape(str(exc))}</span>'
            return
        self.apply.disabled = self.text.disabled = True
        self.status.value = html.escape(f"applied: {made.describe()}")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        found = super()._repr_mimebundle_(**kwargs)
        data, metadata = found if isinstance(found, tuple) else (found, {})
        if data is None:
            return None
        text = (
            f"summary previewed for slot {self.slot} (%slot compact --apply {self.slot} applies it):\n{self.draft.text}"
        )
        return {**data, "text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}, metadata
