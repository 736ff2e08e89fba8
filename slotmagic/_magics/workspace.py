"""Where the notebook's session lives: the store beside the notebook, the session named after it.

Where the session lives follows the settings lazily: each command asks for the session, and a
changed ``db_path``, ``session_id`` or ``readonly`` reopens it at the next command. How its
turns run is observed instead: a ``%config SlotMagic.max_tool_rounds = 3`` reaches the open
session when it is made, and a command leaves the session's settings as they are (a script
may change ``session.options`` between cells).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from traitlets import Bunch

from .._core.users import check_user, current_user
from .._errors import StoreError
from .._store import Store, open_store
from .._store.base import SupportsChanges
from ..session import DEFAULT_DB_PATH, Session, new_session_id
from ..tools import McpServers
from .options import PROVIDER_FIELDS, SlotMagicOptions

# Where frontends tell the kernel which notebook it runs: jupyter_server sets
# JPY_SESSION_NAME and ipykernel copies it to ``__session__``; VS Code sets its own name.
# Headless runners tell nothing: see runner_notebook.
_NOTEBOOK_VARIABLES = ("__session__", "__vsc_ipynb_file__")
_KERNEL_SESSION = "_slotmagic_session_id"
_KERNEL_MCP = "_slotmagic_mcp"  # the kernel's MCP servers: %reload_ext keeps them running

# The settings the session follows: trait -> (the session's part, its attribute). The provider
# settings (PROVIDER_FIELDS) go as one ProviderSettings; "user" goes to the store.
_FOLLOWED: dict[str, tuple[str, str]] = {
    "model": ("", "model"),
    "system": ("", "system"),
    "context_windows": ("options", "context_windows"),
    "compaction_model": ("options", "compaction_model"),
    "max_tool_rounds": ("options", "max_tool_rounds"),
    "namespace_threshold": ("options", "namespace_threshold"),
    "prompt_cache": ("options", "prompt_cache"),
    "auto_compact": ("options", "auto_compact"),
    "max_concurrency": ("options", "max_concurrency"),
    "working_context_turns": ("context", "turns"),
    "context_updates": ("context", "updates"),
}


def notebook_path(user_ns: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str | None:
    for name in _NOTEBOOK_VARIABLES:
        value = user_ns.get(name)
        if isinstance(value, str) and value:
            return value
    return environ.get("JPY_SESSION_NAME") or None


def runner_notebook(environ: Mapping[str, str] = os.environ, cwd: str | None = None) -> str | None:
    """The notebook a headless runner executes, for runners that tell the kernel nothing of it
    (``jupyter nbconvert --execute``, ``pytest --nbval``): jupyter_client names the process that
    started the kernel in ``JPY_PARENT_PID``; where its command line (Linux's ``/proc``) names
    exactly one notebook file in the kernel's folder, that is the one. Else None (an output
    named by ``--output`` is not the notebook run)."""
    pid = environ.get("JPY_PARENT_PID", "")
    if not pid.isdigit():
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        parent_cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:  # not Linux, or the process is gone
        return None
    here = Path(cwd or os.getcwd()).resolve()
    found: list[Path] = []
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg in ("--output", "--output-dir"):
            skip = True
            continue
        if arg.startswith("--output") or not arg.endswith(".ipynb"):
            continue
        path = (parent_cwd / arg.split("=", 1)[-1]).resolve()
        if path.parent == here and path.is_file() and path not in found:
            found.append(path)
    return found[0].name if len(found) == 1 else None


def session_id_for(path: str, cwd: str | None = None) -> str:
    """The notebook's path relative to the kernel's folder when it is inside it (so a moved
    project keeps its sessions), else the absolute path."""
    cwd = os.path.abspath(cwd or os.getcwd())
    absolute = os.path.abspath(os.path.join(cwd, path))
    try:
        relative = os.path.relpath(absolute, cwd)
    except ValueError:  # another drive on Windows
        return absolute
    return absolute if relative.startswith(os.pardir) else Path(relative).as_posix()


class Workspace:
    """The open store and session of one kernel."""

    def __init__(self, shell: Any) -> None:
        path = notebook_path(shell.user_ns) or runner_notebook()
        if path:
            self.auto_session_id = session_id_for(path)
        else:
            # Without a notebook path, a new id per kernel; kept on the shell so that
            # %reload_ext in the same kernel finds the same session.
            self.auto_session_id = getattr(shell, _KERNEL_SESSION, None) or new_session_id()
            setattr(shell, _KERNEL_SESSION, self.auto_session_id)
        self._store: Store | None = None
        self._target: str | None = None  # where the open store lives, as the settings name it
        self._view: str | None = None  # the session the store is a read-only view of, if it is one
        self._session: Session | None = None
        # Where each session's cell book was when it was closed in this kernel (by store and id):
        # a session reopened goes on from there (_engine/plan/cells.py).
        self._positions: dict[tuple[str | None, str], tuple[str, bool]] = {}
        self.on_change: Callable[[], None] | None = None  # another kernel changed the store
        self._observing = False  # whether the settings' changes come to _setting_changed
        self.mcp: McpServers = getattr(shell, _KERNEL_MCP, None) or McpServers()  # stopped when the kernel exits
        setattr(shell, _KERNEL_MCP, self.mcp)

    def db_path(self, options: SlotMagicOptions) -> str:
        return options.db_path or str(DEFAULT_DB_PATH)

    def session(self, options: SlotMagicOptions) -> Session:
        """The session the settings name, opened (or reopened) as needed; a new one takes
        the current settings, and follows their changes from then on."""
        db_path = self.db_path(options)
        session_id = options.session_id or self.auto_session_id
        view = session_id if options.readonly else None
        if self._store is None or self._target != db_path or self._view != view:
            self.close()
            # A view has a store of its own that refuses writes; it is opened before the
            # old one is forgotten, so a view of a session that is not there changes nothing.
            self._store = open_store(db_path, create=view is None)
            self._target, self._view = db_path, view
            if view is not None:
                if view not in self._store.sessions():
                    self.close()
                    options.readonly = False
                    raise StoreError(f"there is no session {view!r} in this store to view")
                self._store.view_only(view)
            if isinstance(self._store, SupportsChanges):  # follow other kernels (NOTIFY, or data_version)
                self._store.subscribe(self._changed)
        if self._session is None or self._session.session_id != session_id:
            self._close_session()
            self._store.user = _user(options)
            self.mcp.configure(options.mcp_servers)
            made = Session.open(session_id, store=self._store, mcp=self.mcp)
            if (db_path, session_id) in self._positions:
                made.cells.resume(self._positions[(db_path, session_id)])
            try:
                for name in _FOLLOWED:
                    _apply(made, name, getattr(options, name))  # a malformed model string is refused here
                made.settings = options.provider_settings()
            except BaseException:
                made.close()
                raise
            self._session = made
            if isinstance(self._store, SupportsChanges):
                self._store.follow(session_id)  # other sessions' writes do not wake this kernel
            if not self._observing:
                options.observe(self._setting_changed, names=[*_FOLLOWED, *PROVIDER_FIELDS, "user", "mcp_servers"])
                self._observing = True
        return self._session

    def _setting_changed(self, change: Bunch) -> None:
        """A ``%config SlotMagic.x = ...`` accepted (the traitlet checked it): the open session
        takes it now."""
        if self._session is None or self._store is None:
            return  # the next session opened takes every setting
        name, options = change["name"], change["owner"]
        if name in _FOLLOWED:
            _apply(self._session, name, change["new"])
        elif name == "user":
            self._store.user = _user(options)
        elif name == "mcp_servers":
            self.mcp.configure(change["new"])
        else:
            settings = options.provider_settings()
            if settings != self._session.settings:  # a change closes connections: only when needed
                self._session.settings = settings

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _close_session(self) -> None:
        if self._session is not None:
            self._positions[(self._target, self._session.session_id)] = self._session.cells.position
            self._session.close()
            self._session = None

    def close(self) -> None:
        self._close_session()
        if self._store is not None:
            self._store.close()
            self._store = None
            self._target = self._view = None


def _user(options: SlotMagicOptions) -> str | None:
    return check_user(options.user) if options.user else current_user()


def _apply(session: Session, name: str, value: Any) -> None:
    part, attribute = _FOLLOWED[name]
    if name == "system":
        value = value or None  # an empty setting: no system prompt
    setattr(getattr(session, part) if part else session, attribute, value)
