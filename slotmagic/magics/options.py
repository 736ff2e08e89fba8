"""Settings of the magics: traitlets set with ``%config SlotMagic.<name> = ...`` or, before the
extension loads, with ``SLOTMAGIC_<NAME>`` environment variables. ``%config SlotMagic`` lists
them with this help text.

Provider settings (base URLs, timeouts, retries, prices) are traitlets too and become the
session's ``ProviderSettings``. API keys are deliberately not settings: a key typed on a
``%config`` line would be saved in the notebook. Keys come from environment variables only
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``), which a notebook can set without showing them:
``os.environ["OPENAI_API_KEY"] = getpass.getpass()``.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, CFloat, CInt, Dict, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from ..errors import ConfigError
from ..providers.settings import ProviderSettings

# Each setting's environment variable; SLOTMAGIC_DB predates the others and stays short.
ENVIRONMENT = {
    "model": "SLOTMAGIC_MODEL",
    "db_path": "SLOTMAGIC_DB",
    "session_id": "SLOTMAGIC_SESSION",
    "system": "SLOTMAGIC_SYSTEM",
    "stream": "SLOTMAGIC_STREAM",
    "stream_throttle": "SLOTMAGIC_STREAM_THROTTLE",
    "connect_timeout": "SLOTMAGIC_CONNECT_TIMEOUT",
    "read_timeout": "SLOTMAGIC_READ_TIMEOUT",
    "max_retries": "SLOTMAGIC_MAX_RETRIES",
}
_FALSE = {"0", "false", "no", "off"}


def _env(name: str) -> str | None:
    value = os.environ.get(ENVIRONMENT[name])
    return value if value else None


def _number(name: str, kind: type[float] | type[int], fallback: float) -> float:
    text = _env(name)
    if not text:
        return fallback
    try:
        return kind(text)
    except ValueError:
        raise TraitError(f"{ENVIRONMENT[name]} must be a number, got {text!r}") from None


class SlotMagicOptions(Configurable):
    model = Unicode(
        help="The model for %%turn: provider:model (openai:gpt-4o-mini, anthropic:..., "
        "ollama:...) or echo, the offline test model. Env: SLOTMAGIC_MODEL.",
    ).tag(config=True)

    db_path = Unicode(
        help="The SQLite state file; empty means .slotmagic/state.sqlite3 in the kernel's "
        "working directory (beside the notebook); ':memory:' keeps nothing. Env: SLOTMAGIC_DB.",
    ).tag(config=True)

    session_id = Unicode(
        help="The session to open; empty means the notebook's path when the kernel knows it, "
        "else a new id (see %slot session). Env: SLOTMAGIC_SESSION.",
    ).tag(config=True)

    system = Unicode(
        help="The default system prompt for slots that have none of their own. Env: SLOTMAGIC_SYSTEM.",
    ).tag(config=True)

    stream = Bool(
        help="Show replies while they stream (--no-stream on a %%turn line turns it off for "
        "one turn). Env: SLOTMAGIC_STREAM=0 to turn it off.",
    ).tag(config=True)

    stream_throttle = CFloat(
        help="Seconds between display updates while a reply streams, so a long reply costs "
        "a bounded number of re-renders; a reply complete sooner is shown once. "
        "Env: SLOTMAGIC_STREAM_THROTTLE.",
    ).tag(config=True)

    openai_base_url = Unicode(
        help="Base URL of an OpenAI-compatible server for openai:... models (vLLM, llama.cpp, "
        "LM Studio, OpenRouter, a proxy); empty uses OPENAI_BASE_URL, else api.openai.com.",
    ).tag(config=True)

    anthropic_base_url = Unicode(
        help="Base URL for anthropic:... models; empty uses ANTHROPIC_BASE_URL, else api.anthropic.com.",
    ).tag(config=True)

    ollama_host = Unicode(
        help="Where ollama:... models are served; empty uses OLLAMA_HOST, else http://localhost:11434.",
    ).tag(config=True)

    connect_timeout = CFloat(
        help="Seconds to wait for a connection to the model's server. Env: SLOTMAGIC_CONNECT_TIMEOUT.",
    ).tag(config=True)

    read_timeout = CFloat(
        help="Seconds the model's server may stay silent, before or within a reply. Env: SLOTMAGIC_READ_TIMEOUT.",
    ).tag(config=True)

    max_retries = CInt(
        help="Retries after HTTP 429 (rate limited) or 5xx, with exponential backoff; 0 turns "
        "retrying off. Env: SLOTMAGIC_MAX_RETRIES.",
    ).tag(config=True)

    prices = Dict(
        help="Prices to add to or override the built-in table, in USD per million tokens: "
        "{'openai:my-model': (input, output)}; 'provider:*' covers a whole provider.",
    ).tag(config=True)

    def provider_settings(self) -> ProviderSettings:
        """These settings as the session's ProviderSettings (keys stay in the environment)."""
        return ProviderSettings(
            openai_base_url=self.openai_base_url or None,
            anthropic_base_url=self.anthropic_base_url or None,
            ollama_host=self.ollama_host or None,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            max_retries=self.max_retries,
            prices=self.prices,
        )

    @default("connect_timeout")
    def _default_connect_timeout(self) -> float:
        return _number("connect_timeout", float, ProviderSettings.connect_timeout)

    @default("read_timeout")
    def _default_read_timeout(self) -> float:
        return _number("read_timeout", float, ProviderSettings.read_timeout)

    @default("max_retries")
    def _default_max_retries(self) -> int:
        return int(_number("max_retries", int, ProviderSettings.max_retries))

    @validate("connect_timeout", "read_timeout", "max_retries", "prices")
    def _check_provider_setting(self, proposal: Any) -> Any:
        # ProviderSettings knows the rules; ask it, so a bad value is refused when it is set.
        name = proposal["trait"].name
        try:
            ProviderSettings(**{name: proposal["value"]})
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        return proposal["value"]

    @default("model")
    def _default_model(self) -> str:
        return _env("model") or "echo"

    @default("db_path")
    def _default_db_path(self) -> str:
        return _env("db_path") or ""

    @default("session_id")
    def _default_session_id(self) -> str:
        return _env("session_id") or ""

    @default("system")
    def _default_system(self) -> str:
        return _env("system") or ""

    @default("stream")
    def _default_stream(self) -> bool:
        return (_env("stream") or "1").strip().lower() not in _FALSE

    @default("stream_throttle")
    def _default_stream_throttle(self) -> float:
        text = _env("stream_throttle")
        try:
            return float(text) if text else 0.1
        except ValueError:
            raise TraitError(f"SLOTMAGIC_STREAM_THROTTLE must be a number of seconds, got {text!r}") from None

    @validate("stream_throttle")
    def _check_throttle(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if value < 0:
            raise TraitError(f"stream_throttle must be >= 0 seconds, got {value}")
        return value
