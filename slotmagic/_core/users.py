"""Who makes a turn: the user name recorded with each one, for a team sharing a store.

``SLOTMAGIC_USER`` when set (or ``%config SlotMagic.user``, ``Session.open(user=...)``), else
JupyterHub's ``JUPYTERHUB_USER`` (a hub's single-user server sets it to the person logged in,
whatever the OS account is: hub spawners often run everyone as ``jovyan``), else the OS user.
"""

from __future__ import annotations

import functools
import os

from .._errors import ConfigError
from .checks import check_text

__all__ = ["check_user", "current_user"]

MAX_USER = 100
_BREAKS = frozenset("\r\n\x00")  # a user name is one line


def current_user() -> str | None:
    """The user name turns are recorded with, or None when nothing names one. A
    ``SLOTMAGIC_USER`` that is no user name is refused in one line, as ``user=`` is (turns
    attributed to someone else would be silently wrong); JupyterHub's variable, which the
    user did not set, is skipped when it cannot be recorded."""
    value = os.environ.get("SLOTMAGIC_USER", "").strip()
    if value:
        return check_user(value, "SLOTMAGIC_USER")
    value = os.environ.get("JUPYTERHUB_USER", "").strip()
    if value:
        try:
            return check_user(value)
        except ConfigError:
            pass
    try:
        return check_user(_login_name())
    except (OSError, KeyError, ImportError, ConfigError):  # no login name (a container without one)
        return None


def _login_name() -> str:
    """``getpass.getuser()``, with the account database read once per process (every store
    opened asks, and the lookup reads the system's user database)."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if value := os.environ.get(variable):
            return value
    return _account_name()


@functools.cache
def _account_name() -> str:
    import pwd  # not on Windows: ImportError, as getpass.getuser() raises there

    return pwd.getpwuid(os.getuid())[0]


def check_user(value: object, where: str = "") -> str:
    """A user name to record: one line of text, at most 100 characters. ``where`` names the
    variable it came from, for the line that refuses it."""
    fix = f"; fix or unset {where}" if where else ""
    what = f"{where} (a user name)" if where else "a user name"
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be text, not {type(value).__name__}")
    text = check_text(value, where or "the user name").strip()
    if not text or len(text) > MAX_USER or not _BREAKS.isdisjoint(text):
        shown = f"{len(text):,} characters" if len(text) > MAX_USER else f"{value!r:.60}"
        raise ConfigError(f"{what} must be one line of 1-{MAX_USER} characters, not {shown}{fix}")
    return text
