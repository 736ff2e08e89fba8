"""The kernel side of the JupyterLab "Slots" sidebar: one Jupyter comm target.

**Target** ``slotmagic.sidebar`` (``TARGET``), on both sides.

- ``%load_ext slotmagic`` registers the target with the kernel's comm manager
  (``comm.get_comm_manager()``). The kernel never opens a comm itself: where no front end
  listens (``jupyter nbconvert --execute``, papermill) that would only log "No handler found
  for comm target".
- The front end opens a comm to the kernel's target when it starts following a notebook,
  after its kernel restarts, and, while slotmagic is not loaded, after each cell the kernel
  ran (so a panel already showing learns at once that ``%load_ext slotmagic`` ran). The kernel
  answers with a ``state``. Where slotmagic is not loaded, ipykernel closes the comm at once
  (no such target): the panel then shows the ``%load_ext slotmagic`` hint.
- Unloading the extension unregisters the target and closes every comm: the panel shows the
  hint again.

**The messages** are typed in :mod:`slotmagic._core.sidebar_protocol`, whose front-end copy
is ``labextension/src/protocol.ts``: the kernel sends a ``StateMessage`` (the whole state:
the session, its slots in creation order, so a parent comes before its children, the current
slot's budget and the active workflow) or an ``ErrorMessage``; the front end sends an
``Action``: ``refresh``, ``switch``, ``derive`` (and switch to it, as ``%slot derive`` does),
``rename`` or ``delete``. A slot's ``last_user`` is the first words (at most 80 characters,
one line) of its last user message; no other message text is sent.

Each action may carry ``"request": int``, echoed in its answer so the front end can tell the
answer from a push. Each is answered with a ``state`` (sent to every open comm) or with an
``error`` (to the asking comm only): slotmagic's one-line ``SlotMagicError`` messages, with
the error's class name as ``kind`` — e.g. ``SlotNotEmpty`` for ``delete`` with
``force: false`` of a slot holding turns no other slot shares, which the panel then offers
to delete anyway. What the kernel is sent is checked before it is acted on (``_action``):
the front end is another program.

**When the kernel pushes**: after each cell execution (IPython's ``post_execute``) when the
state differs from the last one sent, and right after answering an action. Every send goes
through :meth:`Sidebar.push`, so a later source of changes (session events) only has to call
it. The comparison is against the last state sent; building it costs one slot-list query,
and a slot's messages are read (for ``last_user``) only when its history changed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from IPython.core.error import UsageError

from .._core.sidebar_protocol import TARGET, Action, ErrorMessage, KernelMessage
from .._errors import SlotMagicError
from .._snapshot import LastUserCache, session_snapshot
from ..session import Session

__all__ = ["Sidebar", "attach_sidebar", "detach_sidebar"]


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


class Sidebar:
    """The comms of one kernel's sidebar, and the last state they were sent."""

    def __init__(
        self,
        session: Callable[[], Session],
        manager: Any,
        on_action: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._on_action = on_action  # told after each action carried out (the live widgets)
        self._manager = manager
        self._comms: list[Any] = []
        self._cache = LastUserCache()
        self._last: KernelMessage | None = None  # the last message sent to every comm

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Register the kernel's target: a panel opens a comm to it after this cell."""
        self._manager.register_target(TARGET, self._on_open)

    def close(self) -> None:
        with suppress(KeyError, ValueError):
            self._manager.unregister_target(TARGET, self._on_open)
        comms, self._comms = self._comms, []
        for comm in comms:
            with suppress(Exception):  # a comm whose front end is gone
                comm.close()

    @property
    def comms(self) -> list[Any]:
        return list(self._comms)

    # -- pushing ---------------------------------------------------------------------------

    def push(self, *, force: bool = False, request: int | None = None) -> None:
        """Send the state to every open comm if it changed since the last send (or ``force``)."""
        message = self._message()
        if not force and message == self._last:
            return
        self._last = message
        if request is not None:
            message = message.copy()
            message["request"] = request
        for comm in list(self._comms):
            comm.send(message)

    def post_execute(self) -> None:
        """IPython's post_execute hook: push what the cell changed."""
        if self._comms:
            self.push()

    def _message(self) -> KernelMessage:
        try:
            return session_snapshot(self._session(), self._cache)
        except (SlotMagicError, UsageError) as exc:  # e.g. a store that cannot be opened
            return {"type": "error", "message": _one_line(str(exc))}

    # -- comms -----------------------------------------------------------------------------

    def _watch(self, comm: Any) -> None:
        self._comms.append(comm)
        comm.on_msg(lambda msg: self._on_msg(comm, msg))
        comm.on_close(lambda msg: self._forget(comm))

    def _forget(self, comm: Any) -> None:
        self._comms = [c for c in self._comms if c is not comm]

    def _on_open(self, comm: Any, msg: Mapping[str, Any]) -> None:
        """A front end opened a comm: answer with the state, to it alone."""
        self._watch(comm)
        message = self._message()
        comm.send(message)
        if not self._last:
            self._last = message

    def _on_msg(self, comm: Any, msg: Mapping[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        request = data.get("request") if isinstance(data, Mapping) else None
        request = request if isinstance(request, int) and not isinstance(request, bool) else None
        try:
            self._act(_action(data))
        except (SlotMagicError, UsageError, ValueError) as exc:
            error: ErrorMessage = {"type": "error", "message": _one_line(str(exc))}
            if isinstance(exc, SlotMagicError):
                error["kind"] = type(exc).__name__
            if request is not None:
                error["request"] = request
            comm.send(error)
            return
        self.push(force=True, request=request)
        if self._on_action is not None:
            with suppress(Exception):  # the panel's answer is sent; the rest is best effort
                self._on_action()

    def _act(self, action: Action) -> None:
        """Carry out one front-end action through the public Session API."""
        if action["type"] == "refresh":
            return
        session = self._session()
        if action["type"] == "switch":
            session.switch_slot(action["slot"])
        elif action["type"] == "derive":
            session.derive_slot(action["new"], parent=action["slot"])
            session.switch_slot(action["new"])  # as %slot derive does
        elif action["type"] == "rename":
            session.rename_slot(action["slot"], action["new"])
        elif action["type"] == "delete":
            session.delete_slot(action["slot"], force=action["force"])


def _action(data: object) -> Action:
    """What the front end sent, as the action it names, its fields checked (ValueError: not one)."""
    if not isinstance(data, Mapping):
        raise ValueError("the sidebar sent a message that is not an object")
    kind = data.get("type")
    if kind == "refresh":
        return {"type": "refresh"}
    if kind == "switch":
        return {"type": "switch", "slot": _text(data, "slot")}
    if kind == "derive":
        return {"type": "derive", "slot": _text(data, "slot"), "new": _text(data, "new")}
    if kind == "rename":
        return {"type": "rename", "slot": _text(data, "slot"), "new": _text(data, "new")}
    if kind == "delete":
        return {"type": "delete", "slot": _text(data, "slot"), "force": data.get("force") is True}
    raise ValueError(f"the sidebar sent an unknown action {kind!r}")


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"the sidebar's {data.get('type')!r} message has no {key!r}")
    return value


# -- the extension's registration ----------------------------------------------------------------


def _attached(shell: Any) -> list[Sidebar]:
    # By class name, as for the magics: %reload_ext re-imports this module.
    callbacks = shell.events.callbacks.get("post_execute", [])
    return [cb.__self__ for cb in callbacks if type(getattr(cb, "__self__", None)).__name__ == "Sidebar"]


def attach_sidebar(
    shell: Any, session: Callable[[], Session], on_action: Callable[[], None] | None = None
) -> Sidebar | None:
    """On ``%load_ext``: serve the sidebar when the shell runs in a kernel with comms;
    ``on_action`` is called after each action the panel asked for."""
    if getattr(shell, "kernel", None) is None:
        return None  # a terminal IPython: no front end to talk to
    try:
        import comm
    except ImportError:
        return None
    sidebar = Sidebar(session, comm.get_comm_manager(), on_action)
    try:
        sidebar.start()
    except Exception as exc:  # the panel is a convenience: it never stops %load_ext
        sidebar.close()
        warnings.warn(f"slotmagic: the JupyterLab sidebar is off in this kernel ({exc})", stacklevel=2)
        return None
    shell.events.register("post_execute", sidebar.post_execute)
    return sidebar


def detach_sidebar(shell: Any) -> None:
    """On unload: unregister the target and close the comms (the panel shows its hint)."""
    for sidebar in _attached(shell):
        with suppress(ValueError):
            shell.events.unregister("post_execute", sidebar.post_execute)
        sidebar.close()
