"""A widget's output as two parts: the live view, and its static form right after it.

A notebook is often read where no widget manager runs: ``jupyter nbconvert --to html``,
GitHub, nbviewer. nbconvert prefers a widget view to every other form of the same output as
soon as the notebook holds the widget's state, which ``--execute`` always saves; offline (or
wherever the widget script from a CDN is blocked) it then shows nothing. So a widget is shown
as two outputs:

1. the widget view, with an empty ``text/plain`` beside it (the text is in the second part);
2. its static form: ``text/html`` (class ``slotmagic-static``) and ``text/plain``.

Where the view renders, it hides the static form that follows it: a style rule in
``common.css`` for JupyterLab and Notebook 7 (the rule lives with the widget's own styles, so it
applies only where a widget ran), and ``static.js`` for other front ends. Everywhere else the
static form is what shows. Both parts are written when the cell runs, so the static form is the
widget as of its cell.
"""

from __future__ import annotations

import uuid
from typing import Any

import anywidget
from IPython.display import DisplayHandle, display
from traitlets import Unicode

__all__ = ["STATIC_CLASS", "StaticForms", "static_html"]

STATIC_CLASS = "slotmagic-static"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _in_kernel() -> bool:
    from IPython.core.getipython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def static_html(html: str, static_id: str) -> str:
    """``html`` wrapped so that the live view can find and hide it."""
    return f'<div class="{STATIC_CLASS} {STATIC_CLASS}-{static_id}">{html}</div>'


class StaticForms(anywidget.AnyWidget):
    """An anywidget widget with a text and an HTML form (``to_text()``, ``to_html()``): IPython's
    ``display(widget)`` (and a cell ending in the widget) shows the two parts."""

    static_id = Unicode(help="names the static form this view hides where it renders").tag(sync=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("static_id", uuid.uuid4().hex)
        super().__init__(*args, **kwargs)

    def to_text(self) -> str:
        raise NotImplementedError

    def to_html(self) -> str:
        raise NotImplementedError

    def view_bundle(self) -> dict[str, Any]:
        """The first part: the widget view alone (``text/plain`` empty, never shown twice)."""
        found = anywidget.AnyWidget._repr_mimebundle_(self)
        data = found[0] if isinstance(found, tuple) else found
        assert data is not None  # a widget with a view always has one
        return {WIDGET_VIEW: data[WIDGET_VIEW], "text/plain": ""}

    def static_bundle(self) -> dict[str, str]:
        """The second part: the static form, as the widget shows now."""
        bundle = {"text/plain": self.to_text()}
        html = self.to_html()
        if html:
            bundle["text/html"] = static_html(html, self.static_id)
        return bundle

    def _ipython_display_(self, **kwargs: Any) -> None:
        self.display_parts()

    def display_parts(self, metadata: dict[str, Any] | None = None) -> DisplayHandle:
        """Display both parts; returns the static part's handle, for a caller that updates it
        (fan-out columns). Outside a kernel (a terminal) no front end can draw the view: only
        the static form is shown."""
        if _in_kernel():
            display(self.view_bundle(), raw=True, metadata=metadata)
        static = display(self.static_bundle(), raw=True, metadata=metadata, display_id=True)
        assert isinstance(static, DisplayHandle)
        return static

    def update_static(self, handle: DisplayHandle, metadata: dict[str, Any] | None = None) -> None:
        handle.update(self.static_bundle(), raw=True, metadata=metadata)
