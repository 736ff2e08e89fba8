"""A widget as of its cell: what a replayed cell shows in place of its live widget.

A cell that reads the session (``%slot tree``, ``%slot budget``, ``%workflow show``...) shows,
while a Run All retraces the notebook's recorded run, what it showed then (_engine/cells.py).
Its widget is rebuilt from the cell record: the same view (the widget's own ES module and
style sheet) over the state it had, with a line saying it is as of that cell. When the
session has changed since, the line offers *follow live*: the command runs again, quietly,
and the snapshot follows that live widget from then on (its state, and the actions sent
from the view). When nothing changed, it follows at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

import traitlets
from IPython.display import display
from traitlets import Bool, Unicode, dlink

from ._static import StaticForms, _in_kernel

__all__ = ["SnapshotWidget", "widget_state"]

# Traits every widget has that are not its own state.
_SKIPPED = {"layout", "tabbable", "tooltip", "comm", "keys", "log"}

Follow = Callable[[], Any]  # runs the command again; returns the live widget it made, or None


def widget_state(widget: Any) -> dict[str, Any] | None:
    """A slotmagic widget's class and own synced state (JSON), to rebuild it from; None for
    any other widget."""
    cls = type(widget)
    if not cls.__module__.startswith("slotmagic.widgets."):
        return None
    state = {
        k: v for k, v in widget.get_state().items() if not k.startswith("_") and k not in _SKIPPED and k != "static_id"
    }
    return {"module": cls.__module__, "class": cls.__qualname__, "state": state, "static_id": widget.static_id}


def widget_class(saved: Mapping[str, Any]) -> Any:
    """The widget class a record names: one of this package's, never another module. Records
    written before the widgets' modules were private (``slotmagic.widgets.tree``, slotmagic
    0.1) name them without the leading underscore."""
    package, _, module = str(saved["module"]).rpartition(".")
    if package != __name__.rpartition(".")[0]:
        raise ValueError(f"not a slotmagic widget's module: {saved['module']!r:.80}")
    if not module.startswith("_"):
        module = "_" + module
    return getattr(import_module(f"{package}.{module}"), str(saved["class"]))


class SnapshotWidget(StaticForms):
    """The recorded state of a slotmagic widget, drawn by that widget's own view."""

    as_of = Unicode(help="says the widget is as of its cell; empty once it follows the session").tag(sync=True)
    can_follow = Bool(help="whether the view offers to follow the session live").tag(sync=True)

    def __init__(self, saved: Mapping[str, Any], as_of: str, follow: Follow | None) -> None:
        kind = widget_class(saved)
        self._esm = kind._esm
        self._css = kind._css
        state = dict(saved.get("state") or {})
        self._text, self._html = "", ""
        self._follow = follow
        self._live: Any = None
        # the state's traits, before the comm opens, so the view's first render has them
        self.add_traits(**{name: traitlets.Any().tag(sync=True) for name in state})
        # anywidget's front end keeps one ES module per id: the widget's own, as its view is
        super().__init__(
            static_id=str(saved.get("static_id") or ""),
            as_of=as_of,
            can_follow=follow is not None,
            _anywidget_id=f"{kind.__module__}.{kind.__name__}",
            **state,
        )
        self.on_msg(self._on_front_message)
        if not as_of:
            self.follow()

    def to_text(self) -> str:
        return self._text

    def to_html(self) -> str:
        return self._html

    def _ipython_display_(self, **kwargs: Any) -> None:
        """The view alone: the static form follows, replayed as recorded (a terminal shows
        only that)."""
        if _in_kernel():
            display(self.view_bundle(), raw=True)  # type: ignore[no-untyped-call]

    def follow(self) -> bool:
        """Follow the session from now on (False when the command cannot run again)."""
        if self._live is not None:
            return True
        live = self._follow() if self._follow is not None else None
        if live is None:
            return False
        self._live = live
        with self.hold_sync():
            for name in live.keys:
                if self.has_trait(name) and not name.startswith("_") and name not in ("static_id", "layout"):
                    dlink((live, name), (self, name))
            self.as_of = ""
        return True

    def _on_front_message(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        if content.get("type") == "follow":
            self.follow()
            return
        if self._live is not None:  # the view acts on the live widget it follows
            self._live._on_front_message(self._live, content, buffers)
