"""A widget as of its cell: what a replayed cell shows in place of its live widget.

A cell that reads the session (``%slot tree``, ``%slot budget``, ``%workflow show``...) shows,
while a Run All retraces the notebook's recorded run, what it showed then (_engine/plan/cells.py).
Its widget is rebuilt from the cell record: the same view (the widget's own ES module and
style sheet) over the state it had, with a line saying it is as of that cell. When the
session has changed since, the line offers *follow live*: the command runs again, quietly,
and the snapshot follows that live widget from then on (its state, and the actions sent
from the view). When nothing changed, it follows at once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

import traitlets
from IPython.display import display
from traitlets import Bool, HasTraits, TraitError, Unicode, dlink

from .._errors import DamagedRecord, SlotMagicError
from ._messages import ActionStatus
from ._static import StaticForms, _in_kernel

__all__ = ["SnapshotWidget", "checked_widget", "widget_state"]

# Traits every widget has that are not its own state, and those a snapshot sets itself.
_SKIPPED = {"layout", "tabbable", "tooltip", "comm", "keys", "log", "static_id", "as_of", "can_follow"}
_STATIC_ID = re.compile(r"[0-9a-f]{32}")
_PROBE = HasTraits()  # what a trait validates a stored value against (its own checks only)

Follow = Callable[[], Any]  # runs the command again; returns the live widget it made, or None


def widget_state(widget: Any) -> dict[str, Any] | None:
    """A slotmagic widget's class and own synced state (JSON), to rebuild it from; None for
    any other widget."""
    cls = type(widget)
    if not cls.__module__.startswith("slotmagic.widgets."):
        return None
    state = {k: v for k, v in widget.get_state().items() if not k.startswith("_") and k not in _SKIPPED}
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


def checked_widget(saved: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The widget class a stored widget names and the state to rebuild it with, checked as data:
    only the class's own synced data traits (never ``_esm``, ``_css`` or another of
    anywidget's or ipywidgets' keys), each value one that trait accepts. Anything else raises
    :class:`DamagedRecord` (its cell then acts anew)."""
    try:
        kind = widget_class(saved)
    except (ValueError, KeyError, TypeError, AttributeError, ImportError) as exc:
        raise DamagedRecord(f"a stored widget slotmagic cannot rebuild: {exc}", "cell") from None
    static_id, state = saved.get("static_id"), saved.get("state")
    if not isinstance(static_id, str) or not _STATIC_ID.fullmatch(static_id):
        raise DamagedRecord(f"a stored {kind.__name__} has no valid static_id", "cell")
    if not isinstance(state, Mapping):
        raise DamagedRecord(f"a stored {kind.__name__} has no state", "cell")
    traits = kind.class_traits(sync=True)
    for name, value in state.items():
        if not isinstance(name, str) or name.startswith("_") or name in _SKIPPED or name not in traits:
            raise DamagedRecord(f"a stored {kind.__name__} holds {str(name)[:40]!r}, not state of its own", "cell")
        try:
            traits[name].validate(_PROBE, value)
        except (TraitError, TypeError, ValueError, AttributeError) as exc:
            raise DamagedRecord(f"a stored {kind.__name__}'s {name} is not valid: {str(exc)[:80]}", "cell") from None
    rebuilt = getattr(kind, "rebuilt", None)  # what the class makes from its data (a graph's placement)
    if callable(rebuilt):
        try:
            return kind, rebuilt(state)
        except (ValueError, TypeError, KeyError, SlotMagicError) as exc:
            raise DamagedRecord(f"a stored {kind.__name__} cannot be drawn: {str(exc)[:80]}", "cell") from None
    return kind, dict(state)


class SnapshotWidget(StaticForms):
    """The recorded state of a slotmagic widget, drawn by that widget's own view."""

    as_of = Unicode(help="says the widget is as of its cell; empty once it follows the session").tag(sync=True)
    can_follow = Bool(help="whether the view offers to follow the session live").tag(sync=True)

    def __init__(self, saved: Mapping[str, Any], as_of: str, follow: Follow | None, count: int | None = None) -> None:
        kind, state = checked_widget(saved)
        self._count = count  # the cell showing it: ``In [count]``
        self._refusals = itertools.count(1)
        self._esm = kind._esm
        self._css = kind._css
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
        if not as_of:  # the session is as its cell left it: the live widget, pinned to this cell
            self.follow(pinned=True)

    def to_text(self) -> str:
        return self._text

    def to_html(self) -> str:
        return self._html

    def _ipython_display_(self, **kwargs: Any) -> None:
        """The view alone: the static form follows, replayed as recorded (a terminal shows
        only that)."""
        if _in_kernel():
            display(self.view_bundle(), raw=True)  # type: ignore[no-untyped-call]

    def follow(self, *, pinned: bool = False) -> bool:
        """Follow the session from now on (False when the command cannot run again); with
        ``pinned``, through the live widget pinned to this cell (it says when the session has
        changed since, and follows when asked)."""
        if self._live is not None:
            if not pinned and getattr(self._live, "pinned", False):
                self._live.follow()
            return True
        live = self._follow() if self._follow is not None else None
        if live is None:
            return False
        if pinned and hasattr(live, "pin"):
            live.pin(self._count)
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
            return
        if content.get("type") != "refresh":
            self._refuse()

    def _refuse(self) -> None:
        """An action from a view that cannot act (a change's widget shown again, or a read's
        not following the session): said in place, where the view shows its status."""
        where = f"cell [{self._count}]" if self._count is not None else "its cell"
        if self._follow is None:
            text = f"Not done: this view is as of {where}, shown again from the store. Edit the cell to run it again."
        else:
            text = f"Not done: this view is as of {where} and the session has changed since. Follow live to act on it."
        if not self.has_trait("status"):
            return
        refused: ActionStatus = {"kind": "error", "text": text, "error": "AsOfCell", "seq": -next(self._refusals)}
        one_line = isinstance(getattr(self, "status", None), str)  # the summary editor's status is its line
        with self.hold_sync():
            self.set_trait("status", text if one_line else refused)
            if self.has_trait("failed"):
                self.set_trait("failed", True)
