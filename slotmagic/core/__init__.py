"""The core domain: plain values and pure functions (no I/O, no IPython, no HTTP)."""

from .budget import ContextBudget
from .focus import focused_view, slot_view
from .messages import Message, ToolCall
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

__all__ = [
    "DEFAULT_SLOT",
    "ContextBudget",
    "DeriveStrategy",
    "FocusedConfig",
    "Message",
    "Slot",
    "SlotConfig",
    "SlotMeta",
    "SlotMode",
    "SlotSource",
    "ToolCall",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "focused_view",
    "slot_view",
    "validate_slot_id",
]
