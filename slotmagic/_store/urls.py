"""PostgreSQL URLs: parsing ``schema=`` off them, and showing them without credentials.

Plain string work (no driver): the SQLite-only paths import it too. Every message,
``repr()`` and listing that names a store goes through ``shown_target``
(``postgresql://***@host/db``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from .._core.secrets import masked_url
from .._errors import ConfigError

__all__ = ["DEFAULT_SCHEMA", "PostgresTarget", "is_postgres_url", "parse_postgres_url", "shown_target"]

_SCHEMES = ("postgresql", "postgres")
_PREFIXES = tuple(s + "://" for s in _SCHEMES)
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
DEFAULT_SCHEMA = "slotmagic"
DEFAULT_APPLICATION = "slotmagic"
DEFAULT_IDLE_TIMEOUT = 60.0
_APPLICATION = re.compile(r"[\x21-\x7e]{1,63}")  # printable ASCII: the server truncates at 63 bytes


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(_PREFIXES)


@dataclass(frozen=True)
class PostgresTarget:
    """A parsed ``postgresql://`` URL: what libpq is given (``conninfo``, without our own
    ``schema`` parameter), the schema, and the URL as it may be shown (no credentials)."""

    conninfo: str = field(repr=False)
    schema: str
    shown: str
    password: str | None = field(default=None, repr=False)
    options: str = ""  # the URL's own ``options=`` (e.g. ``-c role=team_a``), kept before slotmagic's
    application_name: str = DEFAULT_APPLICATION  # how the server lists its connections (pg_stat_activity)
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # seconds unused before the store closes its connection


def parse_postgres_url(url: str) -> PostgresTarget:
    """Split off ``schema=`` (default ``slotmagic``) and ``application_name=`` (default
    ``slotmagic``: how the server's ``pg_stat_activity`` names the connections); anything wrong is one ConfigError line
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
    if len(schemas) > 1:
        raise ConfigError(f"db_path {shown} names schema= {len(schemas)} times; name the one schema to use")
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA.fullmatch(schema):
        raise ConfigError(
            f"schema={schema!r:.70} in db_path {shown} is not a schema name slotmagic uses: "
            "1-63 lowercase letters, digits and _, not starting with a digit (e.g. schema=team_a)"
        )
    applications = [v for k, v in query if k == "application_name"]
    application = applications[-1] if applications else DEFAULT_APPLICATION
    if not _APPLICATION.fullmatch(application):
        raise ConfigError(
            f"application_name={application!r:.70} in db_path {shown} is not one: "
            "1-63 printable ASCII characters without spaces (e.g. application_name=slotmagic_alice)"
        )
    idle = [v for k, v in query if k == "idle_timeout"]
    try:
        idle_timeout = float(idle[-1]) if idle else DEFAULT_IDLE_TIMEOUT
    except ValueError:
        idle_timeout = -1.0
    if not 1.0 <= idle_timeout <= 86400.0:
        raise ConfigError(
            f"idle_timeout={idle[-1]!r:.30} in db_path {shown} is not a number of seconds from 1 to 86400 "
            f"(default {DEFAULT_IDLE_TIMEOUT:g})"
        )
    options = " ".join(v for k, v in query if k == "options")
    rest = [(k, v) for k, v in query if k not in ("schema", "options", "application_name", "idle_timeout")]
    conninfo = parts._replace(query=urlencode(rest)).geturl()
    password = parts.password or next((v for k, v in rest if k == "password"), None)
    return PostgresTarget(conninfo, schema, shown, password, options, application, idle_timeout)


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
