"""The Session and its groups: ``from slotmagic.session import Session``.

facade.py holds the Session (turns and slots); context.py, workflows.py, history.py,
compactions.py and options.py the groups reached from it; moved.py the old spellings.
"""

from __future__ import annotations

from .compactions import Compactions
from .context import SessionContext
from .facade import Session
from .history import SessionHistory
from .moved import MOVED
from .names import DEFAULT_DB_PATH, check_db_path, default_db_path, new_session_id
from .options import Options
from .workflows import Workflows

__all__ = [
    "DEFAULT_DB_PATH",
    "MOVED",
    "Compactions",
    "Options",
    "Session",
    "SessionContext",
    "SessionHistory",
    "Workflows",
    "check_db_path",
    "default_db_path",
    "new_session_id",
]
