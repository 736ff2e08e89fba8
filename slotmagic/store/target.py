"""Where a store lives: a SQLite file (or ``":memory:"``), or a ``postgresql://`` URL.

``SLOTMAGIC_DB``, ``%config SlotMagic.db_path`` and ``Session.open(db_path=...)`` all go
through ``check_target`` and ``open_store``. A URL's credentials are never shown: every
message, ``repr()`` and listing uses ``shown_target`` (``postgresql://***@host/db``). The
PostgreSQL driver (the ``postgres`` extra) is imported only when a URL is opened.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..core.checks import check_text
from ..errors import ConfigError, StoreError
from ..providers.endpoint import masked_url
from .files import check_path

if TYPE_CHECKING:
    from .base import Store

__all__ = ["PostgresTarget", "check_target", "is_postgres_url", "open_store", "parse_postgres_url", "shown_target"]

_SCHEMES = ("postgresql", "postgres")
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
DEFAULT_SCHEMA = "slotmagic"


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(tuple(s + "://" for s in _SCHEMES))


@dataclass(frozen=True)
class PostgresTarget:
    """A parsed ``postgresql://`` URL: what libpq is given (``conninfo``, without our own
    ``schema`` parameter), the schema, and the URL as it may be shown (no credentials)."""

    conninfo: str = field(repr=False)
    schema: str
    shown: str
    password: str | None = field(default=None, repr=False)
    options: str = ""  # the URL's own ``options=`` (e.g. ``-c role=team_a``), kept before slotmagic's


def parse_postgres_url(url: str) -> PostgresTarget:
    """Split off ``schema=`` (default ``slotmagic``); anything wrong is one ConfigError line
    that does not show the URL's credentials."""
    text = url.strip()
    shown = shown_target(text)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise ConfigError(f"db_path {shown} is not a valid PostgreSQL URL ({exc})") from None
    if not parts.hostname and not parts.path.strip("/") and "host=" not in parts.query:
        raise ConfigError(
            f"db_path {shown} names no server or database; write postgresql://USER@HOST:5432/DATABASE?schema=NAME"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA.fullmatch(schema):
        raise ConfigError(
            f"schema={schema!r:.70} in db_path {shown} is not a schema name slotmagic uses: "
            "1-63 lowercase letters, digits and _, not starting with a digit (e.g. schema=team_a)"
        )
    options = " ".join(v for k, v in query if k == "options")
    rest = [(k, v) for k, v in query if k not in ("schema", "options")]
    conninfo = parts._replace(query=urlencode(rest)).geturl()
    password = parts.password or next((v for k, v in rest if k == "password"), None)
    return PostgresTarget(conninfo, schema, shown, password, options)


def shown_target(target: str) -> str:
    """``target`` as it may be printed: a URL without its credentials (user, password, and a
    ``password=`` parameter)."""
    if not is_postgres_url(target):
        return target
    text = masked_url(target.strip())
    base, sep, query = text.partition("?")
    if not sep:
        return text
    kept = [(k, "***" if k in ("password", "passfile", "sslpassword") else v) for k, v in parse_qsl(query, True)]
    return base + "?" + urlencode(kept, safe="*")


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


def open_store(target: str | os.PathLike[str], *, durability: Literal["normal", "full"] = "normal") -> Store:
    """The store at ``target``: a ``PostgresStore`` for a URL, else a ``SQLiteStore``."""
    if is_postgres_url(target):
        assert isinstance(target, str)
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise StoreError(
                f"db_path {shown_target(target)} is a PostgreSQL URL, and the PostgreSQL driver is not "
                "installed: pip install 'slotmagic[postgres]'"
            ) from None
        return PostgresStore(target, durability=durability)
    from .sqlite import SQLiteStore

    return SQLiteStore(target, durability=durability)
