"""``%slot compact --edit``: a previewed summary in a text box, applied when the user says so.

The edited text goes to ``session.compactions.compact(slot, apply=True, summary=text)``, which checks that
the slot is still the history the summary was made for; the answer (what was applied, or why
not, in one line) shows beside the button. Its static form is the draft as text, for front ends
without widgets (nbconvert, GitHub).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Unicode

from .._errors import SlotMagicError
from ._base import asset
from ._static import StaticForms

if TYPE_CHECKING:
    from .._core.compaction import Compaction
    from ..session import Session

__all__ = ["SummaryEditor"]


class SummaryEditor(StaticForms):
    """Edit the summary previewed for ``slot``, then apply it."""

    _esm = asset("static.js", "summary.js")
    _css = asset("common.css", "summary.css")

    heading = Unicode(help="what the summary is for").tag(sync=True)
    text = Unicode(help="the summary as previewed, then as edited").tag(sync=True)
    status = Unicode(help="one line: what was applied, or why not").tag(sync=True)
    failed = Bool(False, help="the last status is a refusal").tag(sync=True)
    applied = Bool(False, help="the summary was applied: nothing more to edit").tag(sync=True)

    def __init__(self, session: Session | Callable[[], Session], slot: str, draft: Compaction) -> None:
        """``session`` is the session, or a function returning the kernel's session at each
        click (the extension's, which ``%slot session`` may change)."""
        lo, hi = draft.upto - draft.replaced + 1, draft.upto
        heading = f"The summary previewed for slot {slot}, to replace messages {lo}-{hi}: edit it, then apply"
        super().__init__(heading=heading, text=draft.text)
        self._source: Callable[[], Session] = session if callable(session) else (lambda: session)
        self._session_id = self._source().session_id  # the session the summary was previewed in
        self.slot = slot
        self.draft = draft
        self.on_msg(self._on_front_message)

    def apply(self, text: str | None = None) -> None:
        """Apply ``text`` (the box's, by default) in place of the previewed summary."""
        try:
            session = self._source()
            if session.session_id != self._session_id:  # the kernel moved to another session since
                raise SlotMagicError(
                    f"Not done: this summary is for slot {self.slot} of session {self._session_id}; the notebook is "
                    f"on session {session.session_id} now (%slot session {self._session_id} goes back)"
                )
            made = session.compactions.compact(self.slot, apply=True, summary=self.text if text is None else text)
        except SlotMagicError as exc:
            self.status, self.failed = str(exc), True
            return
        self.status, self.failed, self.applied = f"applied: {made.describe()}", False, True

    def _on_front_message(self, widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "apply" and isinstance(content.get("text"), str):
            self.text = content["text"]
            self.apply()

    def to_text(self) -> str:
        return (
            f"summary previewed for slot {self.slot} (%slot compact --apply {self.slot} applies it):\n{self.draft.text}"
        )

    def to_html(self) -> str:
        return f"<pre>{html.escape(self.to_text())}</pre>"
