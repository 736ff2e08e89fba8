"""What every slotmagic widget shares: where its session comes from, refreshing, actions sent
by the front end, and the text fallback of its output.

A widget is a traitlets model (its synced traits are the whole state) plus one ES module that
draws it (``*.js`` beside this file, shipped in the package and sent inline: nothing is
fetched at run time). Text that came from a model or a user travels as plain strings and the
views insert it with ``textContent``, never as HTML. The one exception is a fan-out column's
reply, shown as Markdown as a ``%%turn`` reply is: the kernel renders it with raw HTML escaped
and unsafe links refused (``slotmagic/_markdown.py``), and the view inserts that.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Dict, Unicode

from .._errors import SlotMagicError
from ._live import LiveWidgets, live_widgets
from ._messages import ActionStatus
from ._static import StaticForms

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["SessionSource", "SessionWidget", "asset"]

SessionSource = Callable[[], "Session"]
_HERE = Path(__file__).resolve().parent


@cache
def asset(*names: str) -> str:
    """The text of files shipped beside this module, joined (ES modules, style sheets)."""
    return "\n".join((_HERE / name).read_text(encoding="utf-8") for name in names)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, SlotMagicError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SessionWidget(StaticForms):
    """A widget that shows part of a session and follows it.

    ``session`` is a :class:`~slotmagic.Session` or a function returning the session to read
    at each refresh (the extension's, which ``%config`` may reopen). ``live`` is the kernel's
    registry (by default the running IPython's, if any), which refreshes the widget after
    every cell; outside IPython call :meth:`refresh` yourself.

    A widget a magic's cell displays is *pinned* to that cell (:meth:`pin`): it keeps showing
    the session as of its cell, says so once the session has changed since (``as_of``), and
    follows the session only when asked (:meth:`follow`, the view's "follow live"). An action
    from a pinned view acts on the session now only while that is what the view shows;
    otherwise it says so, in place, and offers to follow live.
    """

    error = Unicode("", help="one line: why the session could not be read at the last refresh").tag(sync=True)
    status = Dict(
        help="the answer to the last action: kind (ok, error), text, error, action, seq, and the current slot "
        "it left (current)"
    ).tag(sync=True)

    as_of = Unicode("", help="says the widget is as of its cell and the session has changed since").tag(sync=True)
    can_follow = Bool(False, help="whether the view offers to follow the session live").tag(sync=True)

    def __init__(self, session: Session | SessionSource, *, live: LiveWidgets | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._source: SessionSource = session if callable(session) else (lambda: session)
        self._live = live if live is not None else live_widgets()
        self._seq = itertools.count(1)
        self._text = ""
        self._html = ""
        self._pinned: tuple[str, str] | None = None  # (session id, state marker) of its cell, while pinned
        self._where = "its cell"
        self.on_msg(self._on_front_message)
        self._update(self._source())  # a first read that fails raises: there is nothing to show
        if self._live is not None:
            self._live.add(self)

    # -- state -------------------------------------------------------------------------------

    def _update(self, session: Session) -> None:
        """Read the session and set the synced traits, ``_text`` and ``_html``."""
        raise NotImplementedError

    # -- as of its cell ----------------------------------------------------------------------

    def pin(self, count: int | None) -> None:
        """Keep showing the session as it is now, the moment of the cell ``In [count]``, until
        :meth:`follow` is called."""
        try:
            session = self._source()
            self._pinned = (session.session_id, session.store.state_marker(session.session_id))
        except Exception:  # nothing to compare with later: the widget stays live
            return
        self._where = f"cell [{count}]" if count is not None else "its cell"

    @property
    def pinned(self) -> bool:
        return self._pinned is not None

    def follow(self) -> None:
        """Follow the session from now on (the view's "follow live")."""
        self._pinned = None
        with self.hold_sync():
            self.as_of, self.can_follow = "", False
            self.refresh()

    def _changed_since(self) -> bool:
        """Whether the session now differs from the one its cell showed (once it has, it stays
        so: the check is not made again at every later cell)."""
        if self.as_of:
            return True
        assert self._pinned is not None
        try:
            session = self._source()
            now = (session.session_id, session.store.state_marker(session.session_id))
        except Exception:  # the session cannot be read now: it is not the one shown
            now = None
        if now == self._pinned:
            return False
        with self.hold_sync():
            self.as_of = f"as of {self._where} · the session has changed since"
            self.can_follow = True
        return True

    def refresh(self) -> None:
        """Read the session again; traits that did not change send nothing. A failure (a slot
        deleted, the extension unloaded) is shown in the widget, never raised. A pinned widget
        only notes whether the session has changed since its cell."""
        if self._pinned is not None:
            self._changed_since()
            return
        try:
            with self.hold_sync():
                self._update(self._source())
                self.error = ""
        except Exception as exc:  # a refresh runs in IPython's hooks: it must not fail the cell
            self.error = one_line(exc)

    @property
    def closed(self) -> bool:
        return self.comm is None

    def to_text(self) -> str:
        """The text form (``text/plain`` of the output): what ``%slot`` prints without widgets."""
        return self._text

    def to_html(self) -> str:
        """The HTML form (``text/html`` of the output's static part)."""
        return self._html

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        found = super()._repr_mimebundle_(**kwargs)
        data, metadata = found if isinstance(found, tuple) else (found, {})
        if data is None:
            return None
        data = {**data, "text/plain": self.to_text()}
        if html := self.to_html():
            data["text/html"] = html
        return data, metadata

    # -- actions from the front end ---------------------------------------------------------

    def _act(self, session: Session, content: Mapping[str, Any]) -> str:
        """Carry out one front-end action; returns a line saying what was done."""
        raise ValueError(f"this widget takes no action {content.get('type')!r}")

    def _on_front_message(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        action = content.get("type")
        if action == "refresh":
            self.refresh()
            return
        if action == "follow":
            self.follow()
            return
        said: ActionStatus = {"kind": "error", "text": "", "seq": next(self._seq), "action": action}
        if isinstance(content.get("slot"), str):
            said["slot"] = content["slot"]
        if self._pinned is not None:
            if self._changed_since():  # what the view shows is not the session now: nothing to act on
                said["text"] = (
                    f"Not done: this view is as of {self._where} and the session has changed since. "
                    "Follow live to act on the session now."
                )
                said["error"] = "AsOfCell"
                self._say(said)
                return
            self.follow()  # the session now is what it shows: act, and follow from now on
        try:
            text = self._act(self._source(), content)
        except Exception as exc:  # one line in the widget, never a traceback in the log
            said["text"] = getattr(exc, "widget_text", None) or one_line(exc)  # a widget may say it better
            said["error"] = type(exc).__name__
            self._say(said)
            return
        said["kind"], said["text"] = "ok", text
        # the current slot the action left: once another changes it, the line is stale
        said["current"] = getattr(self._source(), "current_slot", None)
        self._say(said)
        if self._live is not None:
            self._live.changed()
        else:
            self.refresh()

    def _say(self, said: ActionStatus) -> None:
        # set_trait: the Dict trait is typed dict[str, Any], which a TypedDict is not to mypy
        self.set_trait("status", said)


def text_of(content: Mapping[str, Any], key: str) -> str:
    value = content.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"the widget's {content.get('type')!r} message has no {key!r}")
    return value
