"""Where a store lives: a SQLite file (or ``":memory:"``), or a ``postgresql://`` URL.

``SLOTMAGIC_DB``, ``%config SlotMagic.db_path`` and ``Session.open(db_path=...)`` all go
through ``check_target`` and ``open_store``. A URL's credentials are never shown: every
message, ``repr()`` and listing uses ``shown_target`` (``postgresql://***@host/db``). The
PostgreSQL driver (the ``postgres`` extra) is imported only when a URL is opened.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from .._core.checks import check_text
from .._errors import ConfigError, StoreError
from .opening import check_path
from .urls import is_postgres_url, parse_postgres_url, shown_target

if TYPE_CHECKING:
    from .base import Store

__all__ = ["check_target", "open_store"]


def check_target(value: object) -> str:
    """A path to a state file, ``":memory:"``, or a ``postgresql://`` URL; anything else is
    one clear error, and nothing is created."""
    if is_postgres_url(value):
        assert isinstance(value, str)
        check_text(value, "db_path")
        if "\x00" in value:
            raise ConfigError(f"db_path {shown_target(value)} holds a NUL character")
        parse_postgres_url(value)
        return value.strip()
    return check_path(value)


def open_store(
    target: str | os.PathLike[str], *, durability: Literal["normal", "full"] = "normal", create: bool = True
) -> Store:
    """The store at ``target``: a ``PostgresStore`` for a URL, else a ``SQLiteStore``. With
    ``create=False`` a store that is not there yet is a ``StoreError``, and nothing is made."""
    if is_postgres_url(target):
        assert isinstance(target, str)
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            if exc.name != "psycopg":
                raise
            raise StoreError(
                f"db_path {shown_target(target)} is a PostgreSQL URL, and the PostgreSQL driver is not "
                "installed: pip install 'slotmagic[postgres]'"
            ) from None
        return PostgresStore(target, durability=durability, create=create)
    if not create and (target == ":memory:" or not os.path.isfile(target)):
        raise StoreError(f"there is no state file {target}")
    from .sqlite import SQLiteStore

    return SQLiteStore(target, durability=durability)
