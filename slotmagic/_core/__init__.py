"""The core domain: plain values and pure functions (no I/O, no IPython, no HTTP)."""

from .budget import ContextBudget
from .messages import Message, ToolCall
from .records import CellRef, ForkRef, TurnInfo, TurnRecord
from .slots import (
    DEFAULT_SLOT,
    DeriveStrategy,
    FocusedConfig,
    Slot,
    SlotConfig,
    SlotMeta,
    SlotMode,
    SlotSource,
    validate_slot_id,
)
from .tokens import estimate_message_tokens, estimate_text_tokens
from .usage import Usage

__all__ = [
    "DEFAULT_SLOT",
    "CellRef",
    "ContextBudget",
    "DeriveStrategy",
    "FocusedConfig",
    "ForkRef",
    "Message",
    "Slot",
    "SlotConfig",
    "SlotMeta",
    "SlotMode",
    "SlotSource",
    "ToolCall",
    "TurnInfo",
    "TurnRecord",
    "Usage",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "validate_slot_id",
]
