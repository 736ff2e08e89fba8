"""The IPython extension: ``%load_ext slotmagic`` registers ``%slot``, ``%%turn``, ``%ctx`` and
``%%workflow``.

Imported only when the extension loads, so ``import slotmagic`` stays free of IPython.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from .._errors import ConfigError
from ..session import Session
from ..widgets._live import attach_live_widgets, detach_live_widgets
from .completion import make_matcher
from .ctx_commands import ctx_line_as_call
from .errors import user_errors
from .magic import SlotMagic, empty_turn_as_line
from .options import check_environment
from .sidebar import attach_sidebar, detach_sidebar
from .workflow_commands import empty_workflow_as_line

__all__ = ["SlotMagic", "current_session", "load_ipython_extension", "unload_ipython_extension"]


def _loaded(shell: InteractiveShell) -> SlotMagic | None:
    # By class name: %reload_ext re-imports the package, and the class with it.
    found: Any = next((c for c in shell.configurables if type(c).__name__ == "SlotMagic"), None)
    return found  # type: ignore[no-any-return]


def load_ipython_extension(shell: InteractiveShell) -> None:
    """Register the magics and open the notebook's session. Loading again replaces the
    earlier registration (its session is closed first), so it is harmless.

    A bad setting (a ``SLOTMAGIC_*`` variable, a store path, a model) stops the load with one
    line (a ``UsageError``) and leaves nothing behind: fix it and ``%load_ext`` again.
    """
    if _loaded(shell) is not None:
        unload_ipython_extension(shell)
    magic: SlotMagic | None = None
    try:
        with user_errors():
            check_environment()  # before anything exists that would need taking back
            magic = SlotMagic(shell)  # a refused %config value in shell.config: one warning line
            magic.check_settings()
        magic.session()  # open now: a bad store path or setting is reported at load time
    except BaseException:
        if magic is not None:
            magic.close()
        # Magics.__init__ joins shell.configurables first thing, even when it then fails.
        configurables: list[Any] = shell.configurables
        configurables[:] = [c for c in configurables if type(c).__name__ != "SlotMagic"]
        raise
    loaded: SlotMagic = magic
    shell.register_magics(loaded)  # %config SlotMagic finds it in shell.configurables
    shell.events.register("pre_run_cell", loaded.remember_cell)
    loaded.cells.attach()  # errors and images by cell, for Err[n], --error, explain and --attach Out[n]
    shell.input_transformers_cleanup.append(empty_turn_as_line)
    shell.input_transformers_cleanup.append(empty_workflow_as_line)
    shell.input_transformers_cleanup.append(ctx_line_as_call)
    live = attach_live_widgets(shell, loaded.session)  # %slot tree/preview/budget follow the session
    sidebar = attach_sidebar(shell, loaded.session, on_action=live.refresh)  # the "Slots" panel, in a kernel
    if sidebar is not None:
        live.listeners.append(sidebar.push)  # a click in a widget updates the panel at once, and back
    loaded.workspace.on_change = live.from_elsewhere  # another kernel's change (seen by the store's subscribe)
    completer = getattr(shell, "Completer", None)
    if completer is not None:
        completer.custom_matchers.append(
            make_matcher(lambda: [s.id for s in loaded.session().list_slots()], lambda: _workflow_names(loaded))
        )


def _workflow_names(magic: SlotMagic) -> tuple[dict[str, list[str]], str | None]:
    """For completion: each workflow's steps, and the active workflow's name."""
    workflows = magic.session().workflows()
    active = next((w.name for w in workflows if w.active), None)
    return {w.name: [n.id for n in w.nodes] for w in workflows}, active


def current_session() -> Session:
    """The session ``%slot`` and ``%%turn`` work on in this kernel (after ``%load_ext slotmagic``)."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    magic = _loaded(shell) if shell is not None else None
    if magic is None:
        raise ConfigError("slotmagic is not loaded in this kernel: run %load_ext slotmagic first")
    return magic.session()


def unload_ipython_extension(shell: InteractiveShell) -> None:
    """Close the session and take back everything the extension registered."""
    detach_sidebar(shell)
    detach_live_widgets(shell)
    magic = _loaded(shell)
    if magic is None:
        return
    configurables: list[Any] = shell.configurables
    configurables[:] = [c for c in configurables if c is not magic]
    manager: Any = shell.magics_manager
    transformers: list[Any] = shell.input_transformers_cleanup
    ours = ("empty_turn_as_line", "empty_workflow_as_line", "ctx_line_as_call")
    transformers[:] = [t for t in transformers if getattr(t, "__name__", "") not in ours]
    for kind, name in (
        ("line", "slot"),
        ("line", "turn"),
        ("cell", "turn"),
        ("line", "ctx"),
        ("line", "workflow"),
        ("cell", "workflow"),
    ):
        manager.magics[kind].pop(name, None)
    manager.registry.pop(type(magic).__name__, None)
    with suppress(ValueError):  # the hook was already gone
        shell.events.unregister("pre_run_cell", magic.remember_cell)
    completer = getattr(shell, "Completer", None)
    if completer is not None:
        completer.custom_matchers[:] = [m for m in completer.custom_matchers if not getattr(m, "slotmagic", False)]
    magic.close()
