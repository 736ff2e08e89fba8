"""Where sessions live: the store interface, its SQLite implementation, and (with the
``postgres`` extra, imported only when a ``postgresql://`` URL is opened) PostgreSQL."""

from .base import Store, TurnRecord
from .sqlite import SQLiteStore
from .target import check_target, open_store
from .urls import shown_target

__all__ = ["SQLiteStore", "Store", "TurnRecord", "check_target", "open_store", "shown_target"]
