"""What the session checks of what it is given: one clear line for each mistake."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._attach import attach_all
from .._core.checks import check_text, check_whole
from .._core.definition import describe_difference
from .._core.messages import Message
from .._core.slots import Slot, SlotConfig, validate_slot_id
from .._engine.run.turn import TurnOptions
from .._errors import ConfigError, SlotConflict
from ..providers import parse_model


def check_model(value: object) -> str:
    parse_model(check_text(value, "model"))  # refuse a malformed model string now, not at the first turn
    return str(value)


def check_windows(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"context windows must be a dict of model -> tokens, not {type(value).__name__}")
    checked = {}
    for model, tokens in value.items():
        if not isinstance(model, str):
            raise ConfigError(f"context windows are keyed by model strings, not {model!r}")
        checked[model] = check_whole(tokens, f"the context window of {model}", minimum=1)
    return checked


def optional_slot(slot: object) -> str | None:
    """A slot id to look up, or None for the current slot."""
    return None if slot is None else validate_slot_id(slot)


def turn_options(options: Mapping[str, Any], threshold: int | None = None) -> TurnOptions:
    """The options checked; given the namespace ``threshold``, ``attachments`` (objects, or a
    dict of label -> object) are made into what the model reads (see :mod:`slotmagic._attach`)."""
    if threshold is not None and "attachments" in options:
        options = {**options, "attachments": attach_all(options["attachments"], threshold=threshold)}
    try:
        return TurnOptions(**options)
    except TypeError:
        known = ", ".join(TurnOptions.__dataclass_fields__)
        unknown = ", ".join(sorted(set(options) - set(TurnOptions.__dataclass_fields__)))
        raise ConfigError(f"unknown turn option(s) {unknown}; known: {known}") from None


def check_config(config: object) -> SlotConfig:
    if config is None:
        return SlotConfig()
    if not isinstance(config, SlotConfig):
        hint = f"; for a mode write SlotConfig(mode={config!r})" if isinstance(config, str) else ""
        raise ConfigError(f"config must be a SlotConfig, not {type(config).__name__}{hint}")
    return config


def check_messages(messages: object, what: str) -> list[Message]:
    if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Iterable):
        raise ConfigError(f"{what} must be a list of Message values, not {type(messages).__name__}")
    checked = list(messages)
    for message in checked:
        if not isinstance(message, Message):
            raise ConfigError(f"{what} must hold Message values (Message.user(...)), not {type(message).__name__}")
    return checked


def same_definition(existing: Slot, config: SlotConfig) -> Slot:
    difference = describe_difference(existing.config, config)
    if difference is not None:
        raise SlotConflict(existing.id, difference)
    return existing
