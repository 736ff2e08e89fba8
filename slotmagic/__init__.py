"""slotmagic: context slots for conversations with language models, in Jupyter and Python.

    from slotmagic import Session
    session = Session.open("notes", model="echo")
    print(session.submit_turn("Hello"))

In a notebook: ``%load_ext slotmagic``.
"""

import typing as _typing

from ._core import (
    DEFAULT_SLOT,
    ContextBudget,
    DeriveStrategy,
    FocusedConfig,
    Message,
    Slot,
    SlotConfig,
    SlotMeta,
    SlotMode,
    SlotSource,
    ToolCall,
)
from ._core.context import WorkingContext
from ._core.images import Image, TextPart
from ._core.records import CellRef, ForkRef, TurnInfo, TurnRecord
from ._core.usage import Usage
from ._core.workflow import Workflow
from ._errors import (
    CompactionNeeded,
    ConfigError,
    ConnectionLost,
    DamagedRecord,
    InvalidSlotId,
    MalformedReply,
    MissingAPIKey,
    OverBudget,
    ProtectedSlot,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    ReplyTooLarge,
    RequestRefused,
    SlotConflict,
    SlotError,
    SlotExists,
    SlotMagicError,
    SlotMoved,
    SlotNotEmpty,
    SlotNotFound,
    SlotReadonly,
    StoreError,
    StreamInterrupted,
    TurnNotStored,
    UnknownModel,
)

# The providers' registry: it says which models' tokens are counted exactly (slotmagic.tokens
# reads what it publishes), so it is loaded with the package; each provider's wire module
# still loads when a model of it is first used.
from .providers import ProviderSettings

if _typing.TYPE_CHECKING:
    from ._compare import Comparison
    from ._engine import AsyncTurnStream, Reply, TurnStream, View, ViewEntry
    from ._engine.run.fanout import ColumnResult, FanOutResult
    from ._store import SQLiteStore
    from ._store.recovery import recover
    from ._store.recovery_report import RecoveryReport
    from .session import Session
    from .tools import Tool, ToolRegistry, ToolResult, default_registry, tool

# Imported when first named: the session, the turn engine, the stores and the tools are what a
# kernel uses once it opens a session (or ``%load_ext`` loads them), and ``import slotmagic``
# stays plain values and the providers' registry; few compare slots or recover a file.
_LAZY = {
    "AsyncTurnStream": "._engine",
    "Reply": "._engine",
    "TurnStream": "._engine",
    "View": "._engine",
    "ViewEntry": "._engine",
    "ColumnResult": "._engine.run.fanout",
    "FanOutResult": "._engine.run.fanout",
    "SQLiteStore": "._store",
    "Session": ".session",
    "Tool": ".tools",
    "ToolRegistry": ".tools",
    "ToolResult": ".tools",
    "default_registry": ".tools",
    "tool": ".tools",
    "Comparison": "._compare",
    "RecoveryReport": "._store.recovery_report",
    "recover": "._store.recovery",
}


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # once: later lookups find it without this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SLOT",
    "AsyncTurnStream",
    "CellRef",
    "ColumnResult",
    "CompactionNeeded",
    "Comparison",
    "ConfigError",
    "ConnectionLost",
    "ContextBudget",
    "DamagedRecord",
    "DeriveStrategy",
    "FanOutResult",
    "FocusedConfig",
    "ForkRef",
    "Image",
    "InvalidSlotId",
    "MalformedReply",
    "Message",
    "MissingAPIKey",
    "OverBudget",
    "ProtectedSlot",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderSettings",
    "ProviderTimeout",
    "RateLimited",
    "RecoveryReport",
    "Reply",
    "ReplyTooLarge",
    "RequestRefused",
    "SQLiteStore",
    "Session",
    "Slot",
    "SlotConfig",
    "SlotConflict",
    "SlotError",
    "SlotExists",
    "SlotMagicError",
    "SlotMeta",
    "SlotMode",
    "SlotMoved",
    "SlotNotEmpty",
    "SlotNotFound",
    "SlotReadonly",
    "SlotSource",
    "StoreError",
    "StreamInterrupted",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolResult",
    "TurnInfo",
    "TurnNotStored",
    "TurnRecord",
    "TurnStream",
    "UnknownModel",
    "Usage",
    "View",
    "ViewEntry",
    "Workflow",
    "WorkingContext",
    "__version__",
    "current_session",
    "default_registry",
    "recover",
    "tool",
]


def current_session() -> "Session":
    """In a notebook with ``%load_ext slotmagic``: the session its ``%slot`` and ``%%turn`` use,
    for the Python API (``current_session().tools``, ``.budget()``, ``.compact()``…)."""
    from ._magics import current_session as current

    return current()


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext slotmagic``: the magics module is imported here, not with the package."""
    from ._magics import load_ipython_extension as load

    load(ipython)  # type: ignore[arg-type]


def unload_ipython_extension(ipython: object) -> None:
    from ._magics import unload_ipython_extension as unload

    unload(ipython)  # type: ignore[arg-type]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab "Slots" sidebar is (``jupyter labextension develop``);
    a wheel installs it into ``share/jupyter/labextensions/slotmagic``."""
    return [{"src": "labextension", "dest": "slotmagic"}]
