"""Where two branches part, and what each has said since."""

from __future__ import annotations

from dataclasses import dataclass

from ._core.messages import Message
from ._core.records import TurnRecord
from ._store.base import History, Store

_PREVIEW = 72


@dataclass(frozen=True)
class BranchTurn:
    """A turn one branch has and the other does not, with the messages it added."""

    turn: TurnRecord
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class BranchDiff:
    a: str
    b: str
    shared_turns: int  # turns both histories hold (the same stored rows)
    shared_messages: int  # position where the histories part
    only_a: tuple[BranchTurn, ...]
    only_b: tuple[BranchTurn, ...]

    def to_text(self) -> str:
        """A short plain-text report: the fork point, then each side's turns since."""
        if self.shared_turns == 0:
            head = f"{self.a!r} and {self.b!r} share no history."
        else:
            head = (
                f"{self.a!r} and {self.b!r} share {_count(self.shared_turns, 'turn')} "
                f"({_count(self.shared_messages, 'message')}), then part."
            )
        lines = [head]
        for name, turns in ((self.a, self.only_a), (self.b, self.only_b)):
            lines.append(f"only in {name!r}: {_count(len(turns), 'turn') if turns else 'nothing'}")
            for branch_turn in turns:
                for message in branch_turn.messages:
                    images = f" [+{_count(len(message.images), 'image')}]" if message.images else ""
                    lines.append(
                        f"  turn {branch_turn.turn.number} {message.role:>9}: {_preview(message.content)}{images}"
                    )
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…"


def diff_slots(store: Store, session_id: str, a: str, b: str) -> BranchDiff:
    """Compare two slots' histories turn by turn.

    Branches share stored rows up to their fork point, so the shared part is the longest run
    of identical turn records from the start, and everything after it belongs to one side.
    """
    history_a, history_b = store.history(session_id, a), store.history(session_id, b)
    turns_a, turns_b = history_a.turns(), history_b.turns()
    shared = 0
    while shared < min(len(turns_a), len(turns_b)) and turns_a[shared].origin == turns_b[shared].origin:
        shared += 1
    part = turns_a[shared - 1].end if shared else 0

    def since(history: History, turns: list[TurnRecord]) -> tuple[BranchTurn, ...]:
        return tuple(BranchTurn(t, tuple(history.messages(t.start, t.end))) for t in turns[shared:])

    return BranchDiff(a, b, shared, part, since(history_a, turns_a), since(history_b, turns_b))
