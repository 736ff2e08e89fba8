"""What :func:`~slotmagic._store.recovery.recover` saved and lost: one value, filled as the
rows are copied (:mod:`.recovery`) and made consistent (:mod:`.consistency`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecoveryReport:
    """What ``recover()`` saved into ``target`` and what it could not.

    Counts are of the new file (live slots, their turns and stored messages); ``lost_*`` are
    turns and messages the damaged file's slots held but that could not be read whole (a turn
    is saved whole or not at all, and a slot keeps its history up to its first loss).
    """

    source: str
    target: str
    moved_to: str | None = None  # where the damaged file went (replace=True)
    sessions: int = 0
    slots: int = 0
    turns: int = 0
    messages: int = 0
    lost_turns: int = 0
    lost_messages: int = 0
    lost_slots: list[str] = field(default_factory=list)  # "session/slot" cut short or emptied
    unreadable: dict[str, int] = field(default_factory=dict)  # table -> stretches of rows that could not be read
    # table -> rows read but not kept: pins, compactions and working-context changes of a slot
    # whose history lost turns (their positions would point elsewhere), rows a damaged page
    # left without their slot or session, and rows that do not parse
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not (self.lost_turns or self.lost_messages or self.lost_slots or self.unreadable or self.dropped)

    def __str__(self) -> str:
        saved = (
            f"saved {self.sessions} session{'s' * (self.sessions != 1)}, {self.slots} slot{'s' * (self.slots != 1)}, "
            f"{self.turns} turn{'s' * (self.turns != 1)} ({self.messages} message{'s' * (self.messages != 1)})"
        )
        where = f"recovered {self.source} into {self.target}" + (
            f" (the damaged file is now {self.moved_to})" if self.moved_to else ""
        )
        if self.complete:
            return f"{where}: {saved}; nothing was lost"
        cut = (
            f" in {', '.join(self.lost_slots[:8])}{', …' if len(self.lost_slots) > 8 else ''}"
            if self.lost_slots
            else ""
        )
        rows = ", ".join(f"{n} stretch{'es' * (n != 1)} of {t} rows" for t, n in sorted(self.unreadable.items()))
        dropped = ", ".join(f"{n} {_STATE_WORDS.get(t, (t, t))[n != 1]}" for t, n in sorted(self.dropped.items()))
        return (
            f"{where}: {saved}; lost {self.lost_turns} turn{'s' * (self.lost_turns != 1)} "
            f"({self.lost_messages} message{'s' * (self.lost_messages != 1)}){cut}"
            + (f"; unreadable: {rows}" if rows else "")
            + (f"; not kept: {dropped}" if dropped else "")
        )


_STATE_WORDS = {  # table -> (one, several)
    "namespace": ("large tool result", "large tool results"),
    "workflows": ("workflow", "workflows"),
    "marks": ("pin or exclusion", "pins or exclusions"),
    "compactions": ("compaction", "compactions"),
    "context_events": ("working-context change", "working-context changes"),
    "meta": ("calibration value", "calibration values"),
}
