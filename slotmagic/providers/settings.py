"""Provider settings: keys, base URLs, timeouts, retries and prices.

Every key and URL left at None is read from its environment variable each time a request is
made, so exporting a variable after the session opened takes effect at the next turn:

    ============================  ======================  =============================
    setting                       environment variable    default
    ============================  ======================  =============================
    ``openai_api_key``            ``OPENAI_API_KEY``      required for api.openai.com
    ``openai_base_url``           ``OPENAI_BASE_URL``     https://api.openai.com/v1
    ``anthropic_api_key``         ``ANTHROPIC_API_KEY``   required for api.anthropic.com
    ``anthropic_base_url``        ``ANTHROPIC_BASE_URL``  https://api.anthropic.com
    ``ollama_host``               ``OLLAMA_HOST``         http://localhost:11434 (no key)
    ============================  ======================  =============================

With a base URL of your own (a local server, a proxy, OpenRouter) the key is sent when one is
set and not required otherwise. Keys go into request headers only; ``repr`` hides them.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, MissingAPIKey

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_OLLAMA_PORT = 11434

# (USD per million input tokens, USD per million output tokens)
Price = tuple[float, float]

_KEYS = ("openai_api_key", "anthropic_api_key")


@dataclass(frozen=True, repr=False)
class ProviderSettings:
    """How to reach the model providers. In a notebook, ``%config SlotMagic.<field>`` sets
    the same names, except the keys: those come from the environment only."""

    openai_api_key: str | None = None
    openai_base_url: str | None = None
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    ollama_host: str | None = None
    connect_timeout: float = 10.0  # seconds to establish the connection
    read_timeout: float = 120.0  # seconds the server may stay silent, before or within a reply
    max_retries: int = 3  # retries after HTTP 429 or 5xx; 0 turns retrying off
    backoff_base: float = 0.5  # first retry waits about this long, doubling each time
    prices: Mapping[str, Price] = field(default_factory=dict)  # extends/overrides the built-in table

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a positive number of seconds, not {value!r}")
        if not _is_number(self.backoff_base) or not 0 <= self.backoff_base < math.inf:
            raise ConfigError(f"backoff_base must be a number of seconds >= 0, not {self.backoff_base!r}")
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"max_retries must be a whole number >= 0, not {self.max_retries!r}")
        object.__setattr__(self, "prices", MappingProxyType(_checked_prices(self.prices)))

    def replace(self, **changes: Any) -> ProviderSettings:
        """A copy with some fields changed: ``settings.replace(read_timeout=30)``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown provider setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _KEYS and value is not None:
                parts.append(f"{f.name}='***'")
            elif f.name == "prices":
                parts.append(f"prices={dict(value)!r}")
            else:
                parts.append(f"{f.name}={value!r}")
        return f"ProviderSettings({', '.join(parts)})"


@dataclass(frozen=True)
class Endpoint:
    """Where one request goes, resolved from settings and the environment at request time."""

    provider: str  # "openai", "ollama" or "anthropic"
    base_url: str = field(repr=False)  # without a trailing slash; may hold credentials
    api_key: str | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        """``host[:port]``, without any ``user:password@`` the URL carries."""
        return urlsplit(self.base_url).netloc.rpartition("@")[2]

    @property
    def display_url(self) -> str:
        """The base URL as it may be shown: without credentials."""
        return urlsplit(self.base_url)._replace(netloc=self.host).geturl()

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never appear in a message or log line: the key, and a URL's password."""
        password = urlsplit(self.base_url).password
        return tuple(s for s in (self.api_key, password) if s)


def resolve_endpoint(settings: ProviderSettings, provider: str, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint for ``provider`` now: settings first, then the environment, then defaults.

    Raises ``MissingAPIKey`` when the official endpoint is used without a key.
    """
    env = os.environ if environ is None else environ
    if provider == "ollama":
        host = _pick(settings.ollama_host, env, "OLLAMA_HOST")
        return Endpoint("ollama", ollama_base_url(host[0] if host else None))
    if provider == "openai":
        setting, variable, default = "openai", "OPENAI", DEFAULT_OPENAI_BASE_URL
    elif provider == "anthropic":
        setting, variable, default = "anthropic", "ANTHROPIC", DEFAULT_ANTHROPIC_BASE_URL
    else:
        raise ConfigError(f"no endpoint settings for provider {provider!r}")
    url = _pick(getattr(settings, f"{setting}_base_url"), env, f"{variable}_BASE_URL")
    key = _pick(getattr(settings, f"{setting}_api_key"), env, f"{variable}_API_KEY")
    base_url = _checked_url(*url) if url else default
    if key is None and url is None:  # a custom server decides for itself whether it wants a key
        raise MissingAPIKey(provider, f"{variable}_API_KEY")
    return Endpoint(provider, base_url, key[0] if key else None)


def ollama_base_url(host: str | None) -> str:
    """The OpenAI-compatible endpoint of an Ollama server, from an ``OLLAMA_HOST`` value.

    Accepts what Ollama itself accepts: ``host``, ``host:port``, or a URL; the scheme
    defaults to http and the port to 11434. ``0.0.0.0`` (a listen address) means this machine.
    """
    host = (host or "").strip()
    if not host:
        host = "localhost"
    if "://" not in host:
        host = "http://" + host
    parts = urlsplit(host)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"ollama host {host!r} (OLLAMA_HOST) is not a host or URL; e.g. localhost:11434")
    hostname = "localhost" if parts.hostname == "0.0.0.0" else parts.hostname
    if ":" in hostname:  # IPv6 literal
        hostname = f"[{hostname}]"
    port = parts.port or (DEFAULT_OLLAMA_PORT if parts.scheme == "http" else 443)
    return f"{parts.scheme}://{hostname}:{port}{parts.path.rstrip('/')}/v1"


def _pick(value: str | None, env: Mapping[str, str], variable: str) -> tuple[str, str] | None:
    """(value, where it came from), ignoring empty strings, which mean "not set"."""
    if value:
        return value, f"the {variable.lower()} setting"
    if env.get(variable):
        return env[variable], variable
    return None


def _checked_url(url: str, source: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{source} must be an http(s) URL such as http://localhost:8080/v1, not {url!r}")
    return url.strip().rstrip("/")


def _checked_prices(prices: Mapping[str, Any]) -> dict[str, Price]:
    if not isinstance(prices, Mapping):
        raise ConfigError("prices must map model strings to (input, output) USD per million tokens")
    checked: dict[str, Price] = {}
    for model, price in prices.items():
        try:
            inp, out = price
        except (TypeError, ValueError):
            inp = out = None
        if not (isinstance(model, str) and _is_number(inp) and _is_number(out) and inp >= 0 and out >= 0):
            raise ConfigError(
                f"price for {model!r} must be (USD per million input tokens, USD per million output "
                f"tokens), e.g. (0.15, 0.60), not {price!r}"
            )
        checked[model] = (float(inp), float(out))
    return checked


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
