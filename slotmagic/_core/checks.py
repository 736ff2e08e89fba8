"""Checks of values that come from users, at the boundary of the public API.

Each raises ``ConfigError`` with one line that names the value, says what was wrong and how
to fix it, so nothing malformed reaches the store or a request.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .._errors import ConfigError


def _kind(value: object) -> str:
    return type(value).__name__


def check_text(value: object, what: str, *, empty_ok: bool = True) -> str:
    """A string that can be stored: no lone surrogates (they cannot be encoded as UTF-8)."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, not {_kind(value)} {value!r:.60}")
    if not empty_ok and not value.strip():
        raise ConfigError(f"{what} is empty: write the text to send")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigError(
                f"{what} holds a lone surrogate ({value[exc.start]!r} at character {exc.start}), which "
                "cannot be stored; remove it, or decode the text with errors='replace'"
            ) from None
    return value


def check_optional_text(value: object, what: str) -> str | None:
    return None if value is None else check_text(value, what)


def check_whole(value: object, what: str, *, minimum: int = 0) -> int:
    """A whole number (not a bool, not a float) no smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be a whole number >= {minimum}, not {_kind(value)} {value!r:.60}")
    if value < minimum:
        raise ConfigError(f"{what} must be a whole number >= {minimum}, not {value}")
    return value


def check_number(value: object, what: str, *, minimum: float = 0.0) -> float:
    """A finite number (not a bool) no smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number >= {minimum:g}, not {value!r:.60}")
    if value < minimum:
        raise ConfigError(f"{what} must be a finite number >= {minimum:g}, not {value!r}")
    return float(value)


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests dicts and lists more than ``limit`` levels deep
    (counted without recursion: a value too deep for Python's own)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def check_json_mapping(value: object, what: str) -> dict[str, Any]:
    """A mapping with string keys that JSON can store as it is (no NaN, no objects)."""
    if type(value) is dict and not value:  # what most turns give: nothing to check
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a dict, not {_kind(value)} {value!r:.60}")
    checked = dict(value)
    for key in checked:
        if not isinstance(key, str):
            raise ConfigError(f"{what} must have string keys, not {_kind(key)} {key!r:.60}")
    try:
        text = json.dumps(checked, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must hold only JSON values (str, number, bool, None, list, dict): {exc}") from None
    return checked


def check_names(value: object, what: str) -> tuple[str, ...]:
    """A list of names (tools, slots): strings, given as a list or tuple (not one string)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ConfigError(f"{what} must be a list of names, e.g. ['search', 'fetch'], not {value!r:.60}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{what} must hold non-empty strings, not {name!r:.60}")
    return names


def check_flag(value: object, what: str) -> bool:
    """True or False, not something that merely looks true ("yes", 5)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{what} must be True or False, not {value!r:.60}")
    return value
