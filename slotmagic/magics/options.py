"""Settings of the magics: traitlets set with ``%config SlotMagic.<name> = ...`` or, before the
extension loads, with ``SLOTMAGIC_<NAME>`` environment variables. ``%config SlotMagic`` lists
them with this help text.

API keys are deliberately not settings: a key typed on a ``%config`` line would be saved in
the notebook. Keys come from environment variables only.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, CFloat, TraitError, Unicode, default, validate
from traitlets.config import Configurable

# Each setting's environment variable; SLOTMAGIC_DB predates the others and stays short.
ENVIRONMENT = {
    "model": "SLOTMAGIC_MODEL",
    "db_path": "SLOTMAGIC_DB",
    "session_id": "SLOTMAGIC_SESSION",
    "system": "SLOTMAGIC_SYSTEM",
    "stream": "SLOTMAGIC_STREAM",
    "stream_throttle": "SLOTMAGIC_STREAM_THROTTLE",
}
_FALSE = {"0", "false", "no", "off"}


def _env(name: str) -> str | None:
    value = os.environ.get(ENVIRONMENT[name])
    return value if value else None


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
