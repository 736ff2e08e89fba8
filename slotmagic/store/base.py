"""What the session needs from a store.

The session never writes SQL: it talks to this interface, which the SQLite store implements
today and a shared PostgreSQL store can implement later.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.messages import Message
from ..core.slots import Slot, SlotConfig


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One stored turn: which messages it added to a slot's history, and what produced them.

    ``start`` is the position of the turn's first message in the slot's history and
    ``count`` how many messages it added. ``info`` holds what the session recorded with it
    (model, usage, cost, the cell it came from ...). Turn 0 is a static slot's preset.
    """

    number: int
    start: int
    count: int
    info: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    # Where the store keeps the turn; slots that share a turn report the same origin.
    origin: tuple[int, int] = (0, 0)

    @property
    def end(self) -> int:
        return self.start + self.count


class Store(Protocol):
    def ensure_session(self, session_id: str) -> None:
        """Create the session, with its ``default`` slot, unless it exists."""

    def sessions(self) -> list[str]: ...

    def current_slot(self, session_id: str) -> str: ...

    def set_current_slot(self, session_id: str, slot_id: str) -> None: ...

    def slots(self, session_id: str) -> list[Slot]: ...

    def slot(self, session_id: str, slot_id: str) -> Slot:
        """The slot, or SlotNotFound."""

    def create_slot(self, session_id: str, slot_id: str, config: SlotConfig, messages: Sequence[Message] = ()) -> Slot:
        """A new slot; ``messages`` (a static slot's preset) are stored as turn 0."""

    def derive_slot(
        self, session_id: str, slot_id: str, parent_id: str, config: SlotConfig, at: int | None = None
    ) -> Slot:
        """A slot that shares the parent's first ``at`` messages (all of them if None)."""

    def update_config(self, session_id: str, slot_id: str, config: SlotConfig) -> Slot: ...

    def rename_slot(self, session_id: str, old_id: str, new_id: str) -> Slot: ...

    def delete_slot(self, session_id: str, slot_id: str) -> None:
        """Remove the slot; the history its derived slots share stays readable for them."""

    def messages(self, session_id: str, slot_id: str) -> list[Message]: ...

    def turns(self, session_id: str, slot_id: str) -> list[TurnRecord]: ...

    def has_cell_turns(self, session_id: str, cell_id: str) -> bool:
        """Whether any stored turn of the session came from this notebook cell
        (``info["cell"]["id"]``), in a live slot or one kept for its derived slots."""

    def append_turn(
        self, session_id: str, slot_id: str, messages: Sequence[Message], info: dict[str, Any]
    ) -> TurnRecord:
        """Store one turn's messages, all or none."""

    def atomic(self) -> AbstractContextManager[None]:
        """Make several calls one transaction: if the block raises, none of them happened."""

    def close(self) -> None: ...
