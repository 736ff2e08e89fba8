"""Where a session's state lives by default, and what a new session is called."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .._store import check_target

DEFAULT_DB_PATH = Path(".slotmagic") / "state.sqlite3"


def default_db_path() -> str:
    """``$SLOTMAGIC_DB`` if set, else ``.slotmagic/state.sqlite3`` in the working directory."""
    return os.environ.get("SLOTMAGIC_DB") or str(DEFAULT_DB_PATH)


def new_session_id() -> str:
    # os.urandom is what secrets.token_hex reads; importing secrets costs random, hashlib and hmac
    return time.strftime("session-%Y%m%d-%H%M%S-") + os.urandom(3).hex()


def check_db_path(value: object) -> str:
    """A path to a state file, ``":memory:"`` or a ``postgresql://`` URL; anything else is one
    clear error (the store checks it again, for callers that open one directly)."""
    return check_target(value)
