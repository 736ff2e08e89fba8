"""The IPython extension: ``%load_ext slotmagic`` registers ``%slot`` and ``%%turn``.

Imported only when the extension loads, so ``import slotmagic`` stays free of IPython.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from ..widgets.live import attach_live_widgets, detach_live_widgets
from .completion import make_matcher
from .errors import user_errors
from .magic import SlotMagic, empty_turn_as_line
from .options import check_environment
from .sidebar import attach_sidebar, detach_sidebar

__all__ = ["SlotMagic", "load_ipython_extension", "unload_ipython_extension"]


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
    shell.input_transformers_cleanup.append(empty_turn_as_line)
    live = attach_live_widgets(shell, loaded.session)  # %slot tree/preview/budget follow the session
    sidebar = attach_sidebar(shell, loaded.session, on_action=live.refresh)  # the "Slots" panel, in a kernel
    if sidebar is not None:
        live.listeners.append(sidebar.push)  # a click in a widget updates the panel at once, and back
    completer = getattr(shell, "Completer", None)
    if completer is not None:
        completer.custom_matchers.append(make_matcher(lambda: [s.id for s in loaded.session().list_slots()]))


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
    transformers[:] = [t for t in transformers if getattr(t, "__name__", "") != "empty_turn_as_line"]
    for kind, name in (("line", "slot"), ("line", "turn"), ("cell", "turn")):
        manager.magics[kind].pop(name, None)
    manager.registry.pop(type(magic).__name__, None)
    with suppress(ValueError):  # the hook was already gone
        shell.events.unregister("pre_run_cell", magic.remember_cell)
    completer = getattr(shell, "Completer", None)
    if completer is not None:
        completer.custom_matchers[:] = [m for m in completer.custom_matchers if not getattr(m, "slotmagic", False)]
    magic.close()
