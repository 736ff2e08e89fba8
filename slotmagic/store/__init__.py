"""Where sessions live: the store interface and its SQLite implementation."""

from .base import Store, TurnRecord
from .sqlite import SQLiteStore

__all__ = ["SQLiteStore", "Store", "TurnRecord"]
