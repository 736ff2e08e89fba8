"""The kernel-wide registry of live widgets: every widget that follows the session is refreshed
after each cell (IPython's ``post_execute``) and right after an action made through any of
them, so a tree, a budget bar or a preview shown in an earlier cell follows what a later cell,
the Python API or the sidebar did, without running its own cell again.

No widget library is imported here: the extension attaches the registry at ``%load_ext``
whether or not a widget is ever shown. The registry lives on the shell (not in this module),
so ``%reload_ext`` keeps following the widgets already shown, and a test's shell is its own.

A widget made by a cell replaces the widgets that cell made before (its old output is gone
when a cell runs again), so re-running ``%slot tree`` does not pile up widgets to refresh.

Changes made by another kernel (a store that tells of them: PostgreSQL's LISTEN/NOTIFY) reach
``from_elsewhere``, called on the store's listener thread: in a kernel it hands ``changed`` to
the kernel's event loop (tornado's ``add_callback``, safe from any thread), so widgets and
the sidebar are refreshed on the main thread, between cells, as for an action in a widget.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import SlotMagicError

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["LiveWidgets", "Refreshable", "attach_live_widgets", "detach_live_widgets", "live_widgets"]

_ATTRIBUTE = "_slotmagic_live_widgets"


class NotLoaded(SlotMagicError):
    """A widget shown by the extension, after the extension was unloaded."""


class Refreshable(Protocol):
    """What the registry needs of a widget."""

    def refresh(self) -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


class LiveWidgets:
    """The live widgets of one kernel, and where the extension's session comes from."""

    def __init__(self) -> None:
        self._widgets: list[tuple[weakref.ref[Any], str | None]] = []
        self._source: Callable[[], Session] | None = None
        self._cell: str | None = None  # the id of the cell running now, when the front end sends one
        self.listeners: list[Callable[[], None]] = []  # told after an action made through a widget
        self.kernel_loop: Any = None  # the kernel's event loop (tornado), when there is a kernel
        self._lock = threading.RLock()  # one refresh at a time, whichever thread asks

    # -- the extension's session -------------------------------------------------------------

    def use(self, source: Callable[[], Session] | None) -> None:
        """The session widgets made by the magics follow (None: the extension is unloaded)."""
        self._source = source

    def session(self) -> Session:
        """The extension's session now (it may be reopened by ``%config``, ``%reload_ext``)."""
        if self._source is None:
            raise NotLoaded("slotmagic is not loaded in this kernel: run %load_ext slotmagic")
        return self._source()

    # -- widgets -----------------------------------------------------------------------------

    def add(self, widget: Refreshable) -> None:
        """Follow ``widget``; widgets made earlier by the cell running now are closed."""
        if self._cell is not None:
            for earlier in self.widgets(cell=self._cell):
                earlier.close()
        self._widgets = [(ref, cell) for ref, cell in self._widgets if _alive(ref)]
        self._widgets.append((weakref.ref(widget), self._cell))

    def widgets(self, *, cell: str | None = None) -> list[Any]:
        """The live widgets (made by ``cell`` only, if given), oldest first."""
        found = []
        for ref, made_in in self._widgets:
            widget = ref()
            if widget is not None and not widget.closed and (cell is None or made_in == cell):
                found.append(widget)
        return found

    def refresh(self) -> None:
        """Every live widget reads the session again (each sends only what changed)."""
        with self._lock:
            widgets = self.widgets()
            if not widgets:
                return
            with self._looking_once():
                for widget in widgets:
                    widget.refresh()

    def changed(self) -> None:
        """After an action made through a widget (or by another kernel): refresh them all,
        and tell the listeners (the sidebar), since no cell ran to do it."""
        with self._lock, self._looking_once():
            self.refresh()
            for listener in list(self.listeners):
                with suppress(Exception):  # a listener's failure is its own business
                    listener()

    def _looking_once(self) -> AbstractContextManager[None]:
        """The session's store looks for other kernels' writes once for the whole refresh
        (``Store.consistent``), not once per widget and read: a PostgreSQL store's look is a
        round trip, and another kernel's turn refreshes every widget of every kernel following."""
        try:
            return self.session().store.consistent()
        except SlotMagicError:  # not loaded (each widget says so), or the session cannot be opened now
            return nullcontext()

    def from_elsewhere(self) -> None:
        """Another kernel changed the store: ``changed()`` on the kernel's main thread (at
        once, outside a kernel)."""
        loop = self.kernel_loop
        if loop is not None:
            loop.add_callback(self._changed_quietly)
        else:
            self._changed_quietly()

    def _changed_quietly(self) -> None:
        with suppress(SlotMagicError):  # e.g. unloaded meanwhile: nothing to follow
            self.changed()

    # -- IPython's hooks ---------------------------------------------------------------------

    def pre_run_cell(self, info: Any = None) -> None:
        cell = getattr(info, "cell_id", None)
        self._cell = cell if isinstance(cell, str) and cell else None

    def post_execute(self) -> None:
        self.refresh()
        self._cell = None


def _alive(ref: weakref.ref[Any]) -> bool:
    widget = ref()
    return widget is not None and not widget.closed


def live_widgets(shell: Any = None) -> LiveWidgets | None:
    """The registry of ``shell`` (the running IPython by default), hooked to its events; None
    outside IPython (plain Python: widgets then refresh when asked)."""
    if shell is None:
        try:
            from IPython.core.interactiveshell import InteractiveShell
        except ImportError:
            return None
        if not InteractiveShell.initialized():
            return None
        shell = InteractiveShell.instance()
    found: LiveWidgets | None = getattr(shell, _ATTRIBUTE, None)
    if found is None:
        found = LiveWidgets()
        setattr(shell, _ATTRIBUTE, found)
    callbacks = shell.events.callbacks
    if found.post_execute not in callbacks.get("post_execute", []):
        shell.events.register("post_execute", found.post_execute)
    if found.pre_run_cell not in callbacks.get("pre_run_cell", []):
        shell.events.register("pre_run_cell", found.pre_run_cell)
    return found


def attach_live_widgets(shell: Any, source: Callable[[], Session]) -> LiveWidgets:
    """On ``%load_ext``: widgets made by the magics follow ``source``'s session."""
    found = live_widgets(shell)
    assert found is not None
    found.use(source)
    found.kernel_loop = getattr(getattr(shell, "kernel", None), "io_loop", None)
    return found


def detach_live_widgets(shell: Any) -> None:
    """On unload: stop following (widgets already shown keep their last state)."""
    found: LiveWidgets | None = getattr(shell, _ATTRIBUTE, None)
    if found is None:
        return
    found.use(None)
    found.listeners.clear()
    for event, hook in (("post_execute", found.post_execute), ("pre_run_cell", found.pre_run_cell)):
        with suppress(ValueError):
            shell.events.unregister(event, hook)
