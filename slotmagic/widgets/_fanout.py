"""A fan-out's replies side by side: one column per slot or model, streaming as they come.

Unlike the session widgets it does not follow the session: it shows one fan-out, whose
columns the magic updates while the replies stream. Its output carries the text and HTML forms
of the same columns (:mod:`slotmagic._columns`), for GitHub, nbconvert and kernels without a
widget front end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from traitlets import Dict, List, Unicode

from .._columns import columns_html, columns_text
from .._markdown import reply_html
from ._base import asset
from ._static import StaticForms

__all__ = ["FanOutWidget"]


class FanOutWidget(StaticForms):
    """``columns`` as :func:`slotmagic._columns.column_data` makes them, and the summary line."""

    _esm = asset("static.js", "fanout.js")
    _css = asset("common.css", "fanout.css")

    columns = List(
        Dict(), help="one dict per column: key, slot, model, status, text, html, stored, tokens, latency, cost, error"
    ).tag(sync=True)
    summary = Unicode(help="one line under the columns: replies, total cost, slowest, fastest").tag(sync=True)

    def show(self, columns: Sequence[Mapping[str, Any]], summary: str) -> None:
        """Set both at once (one message to the front end)."""
        with self.hold_sync():
            self.columns = [dict(c) for c in columns]
            self.summary = summary

    @staticmethod
    def rebuilt(state: Mapping[str, Any]) -> dict[str, Any]:
        """A stored state with each column's HTML made again from its text, as the live column
        made it (the view inserts that HTML: a record's own is never taken)."""
        out = dict(state)
        columns = out.get("columns")
        if isinstance(columns, list):
            out["columns"] = [
                {**c, "html": reply_html(c["text"]) if isinstance(c.get("text"), str) else ""}
                for c in columns
                if isinstance(c, Mapping)
            ]
        return out

    def to_text(self) -> str:
        return columns_text(self.columns, self.summary)

    def to_html(self) -> str:
        return columns_html(self.columns, self.summary)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        found = super()._repr_mimebundle_(**kwargs)
        data, metadata = found if isinstance(found, tuple) else (found, {})
        if data is None:
            return None
        data = {**data, "text/plain": self.to_text(), "text/html": self.to_html()}
        return data, metadata
