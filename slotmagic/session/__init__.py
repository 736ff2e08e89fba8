"""The Session and its groups: ``from slotmagic.session import Session``.

_facade.py holds the Session (turns and slots); _context.py, _workflows.py, _history.py,
_compactions.py and _options.py the groups reached from it.
"""

from __future__ import annotations

from ._compactions import Compactions
from ._context import SessionContext
from ._facade import Session
from ._history import SessionHistory
from ._names import DEFAULT_DB_PATH, check_db_path, default_db_path, new_session_id
from ._options import Options
from ._turn_args import FanOutArgs, TurnArgs
from ._workflows import Workflows

__all__ = [
    "DEFAULT_DB_PATH",
    "Compactions",
    "FanOutArgs",
    "Options",
    "Session",
    "SessionContext",
    "SessionHistory",
    "TurnArgs",
    "Workflows",
    "check_db_path",
    "default_db_path",
    "new_session_id",
]
