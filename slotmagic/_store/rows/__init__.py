"""The store logic both stores share, over slot rows and segments, one module per concern.

``SQLiteStore`` and ``PostgresStore`` keep the same tables (see ``migrations.py`` and
``postgres_schema.py``) and differ only in how they connect, open a write transaction and
learn that another connection wrote. Everything else is here, written once, in SQL both
dialects accept (``?`` placeholders, which the PostgreSQL connection translates); where the
dialects differ, the part that needs it holds both forms side by side.

The parts, each a class over ``common.RowsBase`` (the connection, the caches, slot rows):

- ``segments.py``: what a ``History`` reads, served from the segment cache;
- ``turns.py``: turns and histories, and the concurrency rule (``append_turn(base=...)``);
- ``slots.py``: sessions, slots and the slot tree;
- ``tree.py``: the slots as the tree shows them, and the last message of a role in many slots;
- ``annotations.py``: compactions, working context, pins and exclusions, workflows;
- ``undo.py``: undo and redo;
- ``search.py``: search and gc;
- ``dump.py``: copying whole sessions between stores;
- ``kept.py``: large tool results, meta, cell records, the state marker.
"""

from __future__ import annotations

from .annotations import AnnotationRows
from .common import MESSAGE_COLUMNS, Connection, Cursor, Dialect, RowsBase
from .dump import COPIED_SESSION_TABLES, COPIED_SLOT_TABLES, DumpRows, SessionDump
from .kept import KeptRows
from .search import MAX_SEARCH_WORDS, SearchRows, search_words
from .segments import SegmentRows
from .slots import SLOT_TABLES, SlotRows
from .tree import TreeRows
from .turns import TurnRows
from .undo import UndoRows

__all__ = [
    "COPIED_SESSION_TABLES",
    "COPIED_SLOT_TABLES",
    "MAX_SEARCH_WORDS",
    "MESSAGE_COLUMNS",
    "SLOT_TABLES",
    "AnnotationRows",
    "Connection",
    "Cursor",
    "Dialect",
    "DumpRows",
    "KeptRows",
    "RowStore",
    "RowsBase",
    "SearchRows",
    "SegmentRows",
    "SessionDump",
    "SlotRows",
    "TreeRows",
    "TurnRows",
    "UndoRows",
    "search_words",
]


class RowStore(UndoRows, SlotRows, TreeRows, TurnRows, AnnotationRows, SearchRows, DumpRows, KeptRows):
    """The store logic over slot rows and segments, every part of it, for a subclass that
    connects (see ``RowsBase``). Safe to share between threads: every call holds
    ``self._lock``."""
