"""Where one request goes: a base URL without credentials, the credentials it carried, a key.

Credentials written into a base URL (``http://user:password@host/v1``) are taken out of it
when an :class:`Endpoint` is made, whatever made it: requests go to the bare URL and the
credentials travel as an HTTP Basic ``Authorization`` header that slotmagic sets itself. So
httpx never sees them, and its log line (``HTTP Request: POST http://host/v1/...``) cannot
show them. Any text that quotes a URL a user gave goes through :func:`masked_url`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote, unquote, urlsplit

from .._core.secrets import masked_url
from .._errors import ConfigError

DEFAULT_OLLAMA_PORT = 11434

# (value, where it came from) for a setting, or None when neither the setting nor its
# environment variable is set.
Lookup = Callable[[str], tuple[str, str] | None]


class Setting(Protocol):
    @property
    def env(self) -> str: ...  # the environment variable that holds it


class Registration(Protocol):
    """What an endpoint rule reads of its provider's registration (a
    :class:`~slotmagic.providers.ProviderSpec`): its name, and its settings' variables for messages."""

    @property
    def name(self) -> str: ...

    def setting(self, name: str) -> Setting: ...


@dataclass(frozen=True)
class Endpoint:
    """Where one request goes, resolved from settings and the environment at request time.

    A ``base_url`` given with credentials is stored without them, in ``username`` and
    ``password``; ``repr`` shows neither those nor the key.
    """

    provider: str  # the registered provider name: "openai", "ollama", "anthropic" ...
    base_url: str  # without credentials or a trailing slash
    api_key: str | None = field(default=None, repr=False)
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        url, username, password = split_credentials(self.base_url)
        object.__setattr__(self, "base_url", url.rstrip("/"))
        if username is not None or password is not None:
            object.__setattr__(self, "username", username)
            object.__setattr__(self, "password", password)

    @property
    def host(self) -> str:
        """``host[:port]``."""
        return urlsplit(self.base_url).netloc

    @property
    def display_url(self) -> str:
        """The base URL as it may be shown (it holds no credentials)."""
        return self.base_url

    @property
    def basic_auth(self) -> str | None:
        """The ``Authorization`` header value for the URL's credentials, if it had any."""
        if self.username is None and self.password is None:
            return None
        return "Basic " + _basic_token(self.username or "", self.password or "")

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never appear in a message or log line: the key, the URL's password (as
        written and decoded), ``user:password`` and its Basic token. A URL with a user name
        only (``https://TOKEN@host``) uses that name as the secret."""
        found: list[str] = []
        if self.api_key:
            found.append(self.api_key)
        user, password = self.username or "", self.password or ""
        if password or user:
            secret = password or user
            found += [secret, quote(secret, safe="")]
            if password and user:
                found.append(f"{user}:{password}")
            found.append(_basic_token(user, password))
        return tuple(dict.fromkeys(s for s in found if s))


def _basic_token(username: str, password: str) -> str:
    return base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without credentials, user name, password)``, both decoded; None when absent."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    username, colon, password = userinfo.partition(":")
    return (
        parts._replace(netloc=hostport).geturl(),
        unquote(username),
        unquote(password) if colon else None,
    )


def checked_url(url: str, source: str) -> str:
    """``url`` stripped, without a trailing slash, if it is an http(s) URL; else ConfigError."""
    text = url.strip()
    parts = urlsplit(text)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ConfigError(f"{source} must be an http(s) URL such as http://localhost:8080/v1, not {masked_url(text)!r}")
    return text.rstrip("/")


def ollama_base_url(host: str | None, source: str = "OLLAMA_HOST") -> str:
    """The OpenAI-compatible endpoint of an Ollama server, from an ``OLLAMA_HOST`` value.

    Accepts what Ollama itself accepts: ``host``, ``host:port``, or a URL; the scheme
    defaults to http and the port to 11434. ``0.0.0.0`` (a listen address) means this machine.
    Credentials in it are kept (the :class:`Endpoint` takes them out).
    """
    host = (host or "").strip()
    if not host:
        host = "localhost"
    if "://" not in host:
        host = "http://" + host
    parts = urlsplit(host)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise ConfigError(f"ollama host {masked_url(host)!r} ({source}) is not a host or URL; e.g. localhost:11434")
    hostname = "localhost" if parts.hostname == "0.0.0.0" else parts.hostname
    if ":" in hostname:  # IPv6 literal
        hostname = f"[{hostname}]"
    port = port or (DEFAULT_OLLAMA_PORT if parts.scheme == "http" else 443)
    userinfo = parts.netloc.rpartition("@")[0]
    credentials = userinfo + "@" if userinfo else ""
    return f"{parts.scheme}://{credentials}{hostname}:{port}{parts.path.rstrip('/')}/v1"
