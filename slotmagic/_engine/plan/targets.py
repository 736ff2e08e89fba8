"""Where a fan-out goes: the columns named by ``slots=`` and ``models=``.

``slots`` names slots (``a,b,c``), ``all``, or shell-style globs (``draft-*``), mixed as
wished; a name that matches no slot is a mistake, said in one line with the closest name.
``models`` sends the slot's history to each model and stores each reply on a new sibling
branch named after the model (``default.gpt-4o-mini``), so each branch stays one model's clean
conversation. Both together make a column for each slot and model.

Everything here reads slot ids and model strings; nothing calls a model or writes.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ..._core.slots import Slot, SlotMode, validate_slot_id
from ..._errors import ConfigError, SlotNotFound, SlotReadonly
from ...providers import parse_model

__all__ = ["Target", "branch_hint", "resolve_models", "resolve_slots", "targets"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")  # '.' too: ``.2`` is how forks are numbered
_MAX_ID = 64


@dataclass(frozen=True)
class Target:
    """One column: the slot whose history is sent and the model asked. ``branch`` is the name
    of the new branch a model column's reply is stored on (None: stored on ``slot``)."""

    key: str  # the column's name in results: the slot, or the branch
    slot: str
    model: str | None  # None: the turn's model (the session's, or ``model=``)
    branch: str | None = None


def _names(value: str | Iterable[str] | None, what: str) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` as a list of non-empty names."""
    if value is None:
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable):
        items = list(value)
        if not all(isinstance(v, str) for v in items):
            raise ConfigError(f"{what} must be names (strings), e.g. {what}=['a', 'b'] or {what}='a,b'")
    else:
        raise ConfigError(f"{what} must be a list of names or one comma-separated string, not {type(value).__name__}")
    names = [v.strip() for v in items]
    if not any(names):
        raise ConfigError(f"{what} is empty: name at least one, e.g. {what}='a,b'")
    return [n for n in names if n]


def resolve_slots(
    spec: str | Iterable[str] | None, slots: Sequence[Slot], current: str, skip: Collection[str] = ()
) -> list[str]:
    """The slot ids ``spec`` names, in the order given (``all`` and globs in tree order),
    each once. Named slots must exist and take turns; ``all`` and globs skip readonly slots
    and the slots in ``skip`` (the branches an earlier run of the same cell made, so running
    it again asks the same slots). None: the current slot."""
    by_id = {s.id: s for s in slots}
    if spec is None:
        if current in by_id and by_id[current].mode is SlotMode.READONLY:
            raise SlotReadonly(current)
        return [current]
    chosen: dict[str, None] = {}
    for name in _names(spec, "slots"):
        if name == "all" or any(c in name for c in "*?["):
            pattern = "*" if name == "all" else name
            found = [
                s.id
                for s in slots
                if fnmatch.fnmatchcase(s.id, pattern) and s.mode is not SlotMode.READONLY and s.id not in skip
            ]
            if not found:
                raise ConfigError(
                    f"no slot that takes turns matches {name!r}; slots: {', '.join(by_id)}"
                    if name != "all"
                    else "every slot of this session is readonly; create one that takes turns"
                )
            chosen.update(dict.fromkeys(found))
            continue
        validate_slot_id(name)
        if name not in by_id:
            raise SlotNotFound(name, by_id)
        if by_id[name].mode is SlotMode.READONLY:
            raise SlotReadonly(name)
        chosen[name] = None
    return list(chosen)


def resolve_models(spec: str | Iterable[str] | None) -> list[str]:
    """The model strings ``spec`` names, each checked (``provider:model`` or ``echo``), once."""
    models = list(dict.fromkeys(_names(spec, "models")))
    for model in models:
        parse_model(model)
    return models


def branch_hint(slot: str, model: str, models: Sequence[str]) -> str:
    """``<slot>.<model name>``: the model's name without its provider unless another listed
    model has the same name, made a slot id (other characters, dots included, become '-')."""
    provider, name = parse_model(model)
    clash = sum(parse_model(m)[1] == name for m in models) > 1
    label = _UNSAFE.sub("-", f"{provider}-{name}" if clash else name).strip("-") or provider
    return f"{slot}.{label}"[:_MAX_ID]


def targets(slots: Sequence[str], models: Sequence[str]) -> list[Target]:
    """The columns: each slot, or each slot with each model."""
    if not models:
        return [Target(slot, slot, None) for slot in slots]
    out = []
    for slot in slots:
        for model in models:
            hint = branch_hint(slot, model, models)
            out.append(Target(hint, slot, model, hint))
    return out
