"""Provider settings: keys, base URLs, timeouts, retries, limits and prices.

``ProviderSettings`` is a frozen dataclass built from two lists: the settings each provider
registers (:mod:`.registry`: keys and URLs, with their environment variables, read at each
request while the setting is None, so exporting a variable after the session opened takes
effect at the next turn) and the general settings below (:data:`GENERAL_SETTINGS`). Every
field carries its spec as metadata, and ``repr`` derives what it may show from it: a field
registered ``secret`` shows ``'***'``, a ``url`` field shows its URL without credentials.

With a base URL of your own (a local server, a proxy, OpenRouter) the key is sent when one is
set and not required otherwise. Keys go into request headers only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.secrets import masked_url
from .._errors import ConfigError
from ._endpoint import DEFAULT_OLLAMA_PORT, Endpoint, ollama_base_url
from ._registry import DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_OPENAI_BASE_URL, REGISTRY, Registry

__all__ = [
    "DEFAULT_ANTHROPIC_BASE_URL",
    "DEFAULT_OLLAMA_PORT",
    "DEFAULT_OPENAI_BASE_URL",
    "GENERAL_SETTINGS",
    "Endpoint",
    "GeneralSetting",
    "Number",
    "Price",
    "ProviderSettings",
    "SettingsBase",
    "masked_url",
    "ollama_base_url",
    "resolve_endpoint",
    "settings_class",
]

# (USD per million input tokens, USD per million output tokens)
Price = tuple[float, float]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Number:
    """What a numeric setting must be, and how to read one from text (an environment variable)."""

    what: str  # "a positive number of seconds"
    integer: bool = False
    minimum: float = 0.0
    minimum_allowed: bool = False  # whether ``minimum`` itself is allowed
    off_at_zero: bool = False  # 0 and None both mean "no limit" (stored as None)
    maximum: float = math.inf  # the largest value that still works (a timer, a loop, a sum)

    def check(self, value: Any) -> Any:
        """``value`` if it is allowed (0 becomes None where 0 means off); else ValueError."""
        if value is None and self.off_at_zero:
            return None
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            raise ValueError
        if math.isnan(value) or math.isinf(value):
            raise ValueError
        if self.off_at_zero and value == 0:
            return None
        if value < self.minimum or (value == self.minimum and not self.minimum_allowed) or value > self.maximum:
            raise ValueError
        return value

    def parse(self, text: str) -> Any:
        """A value from text, checked; ValueError if it is not one."""
        text = text.strip()
        if self.off_at_zero and text.lower() in ("none", "off"):
            return None
        return self.check(int(text) if self.integer else float(text))


@dataclass(frozen=True)
class GeneralSetting:
    """A setting that is not any one provider's: timeouts, retries, limits, prices."""

    name: str
    kind: Number | None  # None: prices
    default: Any
    example: str  # a valid value, for messages
    help: str
    env: str | None = None  # the SLOTMAGIC_* variable %load_ext reads (the magics only)
    config: bool = True  # a %config SlotMagic setting

    def check(self, value: Any) -> Any:
        if self.kind is None:
            return MappingProxyType(_checked_prices(value))
        try:
            return self.kind.check(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{self.name} must be {self.kind.what}, e.g. {self.example}, not {value!r}") from None

    def shown(self, value: Any) -> str:
        return repr(dict(value)) if self.kind is None else repr(value)


DAY = 86_400.0
SECONDS = Number("a positive number of seconds, at most 86400 (a day)", maximum=DAY)
# A price past this (USD per million tokens: a dollar a token) is a typo, and prices far past
# it make a turn's cost overflow to infinity, which no store can keep.
MAX_PRICE = 1_000_000.0

GENERAL_SETTINGS: tuple[GeneralSetting, ...] = (
    GeneralSetting(
        "connect_timeout",
        SECONDS,
        10.0,
        "10",
        "Seconds to wait for a connection to the model's server.",
        env="SLOTMAGIC_CONNECT_TIMEOUT",
    ),
    GeneralSetting(
        "read_timeout",
        SECONDS,
        120.0,
        "300",
        "Seconds the model's server may stay silent, before or within a reply.",
        env="SLOTMAGIC_READ_TIMEOUT",
    ),
    GeneralSetting(
        "turn_timeout",
        Number(
            "a number of seconds >= 0, at most 86400 (0 or None: no limit)",
            minimum_allowed=True,
            off_at_zero=True,
            maximum=DAY,
        ),
        600.0,
        "600",
        "Seconds one reply may take in all, retries included, however steadily the server "
        "keeps sending; 0 turns the limit off.",
        env="SLOTMAGIC_TURN_TIMEOUT",
    ),
    GeneralSetting(
        "max_retries",
        Number("a whole number from 0 to 100", integer=True, minimum_allowed=True, maximum=100),
        3,
        "5",
        "Retries after HTTP 429 (rate limited) or 5xx, with exponential backoff; 0 turns retrying off.",
        env="SLOTMAGIC_MAX_RETRIES",
    ),
    GeneralSetting(
        "backoff_base",
        Number("a number of seconds from 0 to 60", minimum_allowed=True, maximum=60.0),
        0.5,
        "0.5",
        "Seconds before the first retry (before jitter), doubling each time.",
        config=False,
    ),
    GeneralSetting(
        "max_reply_bytes",
        Number("a whole number of bytes > 0", integer=True),
        16 * MiB,
        str(32 * MiB),
        "Bytes one reply may take on the wire (16 MiB by default); a longer reply is refused and nothing is stored.",
        env="SLOTMAGIC_MAX_REPLY_BYTES",
    ),
    GeneralSetting(
        "prices",
        None,
        {},
        "{'openai:my-model': (1.0, 2.0)}",
        "Prices to add to or override the genai-prices data, in USD per million tokens: "
        "{'openai:my-model': (input, output)}; 'provider:*' covers a whole provider.",
    ),
)

_S = TypeVar("_S", bound="SettingsBase")


class SettingsBase:
    """What every settings class built by :func:`settings_class` does: check each field by its
    spec, ``replace``, and a ``repr`` that shows each field only as its spec allows."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            spec = f.metadata["slotmagic"]
            value = getattr(self, f.name)
            if isinstance(spec, GeneralSetting):
                object.__setattr__(self, f.name, spec.check(value))
            elif value is not None:
                if not isinstance(value, str):
                    raise ConfigError(f"{f.name} must be a string or None, not {type(value).__name__}")
                if value and spec.check is not None:
                    spec.check(value, f"the {f.name} setting")

    def replace(self: _S, **changes: Any) -> _S:
        """A copy with some fields changed: ``settings.replace(read_timeout=30)``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        if unknown:
            raise ConfigError(f"unknown provider setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def __repr__(self) -> str:
        parts = [
            f"{f.name}={f.metadata['slotmagic'].shown(getattr(self, f.name))}"
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
        ]
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__


def settings_class(registry: Registry, name: str = "ProviderSettings", doc: str | None = None) -> type[Any]:
    """A frozen settings dataclass with a ``str | None`` field per setting of every provider in
    ``registry``, then the general settings; each field's spec is its ``metadata["slotmagic"]``."""
    general = {g.name for g in GENERAL_SETTINGS}
    fields: list[tuple[str, Any, Any]] = []
    for spec in registry.settings():
        if spec.name in general:
            raise ConfigError(f"provider setting {spec.name!r} has the name of a general setting")
        fields.append((spec.name, str | None, field(default=None, metadata={"slotmagic": spec})))
    for g in GENERAL_SETTINGS:
        if g.kind is None:  # prices
            fields.append((g.name, Mapping[str, Price], field(default_factory=dict, metadata={"slotmagic": g})))
        else:
            fields.append((g.name, type(g.default) | None, field(default=g.default, metadata={"slotmagic": g})))
    return dataclasses.make_dataclass(
        name,
        fields,
        bases=(SettingsBase,),
        frozen=True,
        repr=False,
        namespace={"__module__": __name__, "__doc__": doc or _doc(registry)},
    )


def _doc(registry: Registry) -> str:
    names = ", ".join(s.name for s in registry.settings())
    return (
        "How to reach the model providers. In a notebook, ``%config SlotMagic.<field>`` sets the same "
        "names, except the keys: those come from the environment only.\n\n"
        f"Provider settings ({names}) left at None are read from their environment variable at "
        "each request:\n\n" + registry.settings_table() + "\n\n"
        "General settings:\n\n"
        + "\n".join(f"- ``{g.name}`` (default {g.default!r}): {g.help}" for g in GENERAL_SETTINGS)
    )


if TYPE_CHECKING:
    # What type checkers see. At run time the class is built from the registry (below), so a
    # provider's fields, their secrecy and their docs come from its registration alone;
    # tests/providers/test_providers_registry.py keeps this declaration equal to it.

    @dataclass(frozen=True, repr=False)
    class ProviderSettings(SettingsBase):
        openai_api_key: str | None = None
        openai_base_url: str | None = None
        openai_reasoning_models: str | None = None
        openai_responses_models: str | None = None
        azure_openai_api_key: str | None = None
        azure_openai_ad_token: str | None = None
        azure_openai_endpoint: str | None = None
        azure_openai_api_version: str | None = None
        azure_openai_deployments: str | None = None
        anthropic_api_key: str | None = None
        anthropic_base_url: str | None = None
        gemini_api_key: str | None = None
        gemini_base_url: str | None = None
        ollama_host: str | None = None
        connect_timeout: float = 10.0
        read_timeout: float = 120.0
        turn_timeout: float | None = 600.0
        max_retries: int = 3
        backoff_base: float = 0.5
        max_reply_bytes: int = 16 * MiB
        prices: Mapping[str, Price] = field(default_factory=dict)

else:
    ProviderSettings = settings_class(REGISTRY)


@functools.cache
def default_settings() -> ProviderSettings:
    """The settings of every session given none: frozen, so one will do (making one checks
    every field, on each Session.open); the environment is read when an endpoint is resolved."""
    return ProviderSettings()


def resolve_endpoint(
    settings: ProviderSettings, provider: str, environ: Mapping[str, str] | None = None, registry: Registry = REGISTRY
) -> Endpoint:
    """The endpoint for ``provider`` now: settings first, then the environment, then defaults.

    Raises ``MissingAPIKey`` when the official endpoint is used without a key.
    """
    return registry.endpoint(settings, provider, environ)


def _checked_prices(prices: Any) -> dict[str, Price]:
    if not isinstance(prices, Mapping):
        raise ConfigError("prices must map model strings to (input, output) USD per million tokens")
    checked: dict[str, Price] = {}
    for model, price in prices.items():
        try:
            inp, out = price
        except (TypeError, ValueError):
            inp = out = None
        if not (isinstance(model, str) and _is_price(inp) and _is_price(out)):
            raise ConfigError(
                f"price for {model!r} must be (USD per million input tokens, USD per million output "
                f"tokens), each from 0 to {MAX_PRICE:,.0f}, e.g. (0.15, 0.60), not {price!r}"
            )
        checked[model] = (float(inp), float(out))
    return checked


def _is_price(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_PRICE
