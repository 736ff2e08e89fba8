"""Exploring branches: merge a branch back, undo and redo, pin and exclude, search, gc.

Each operation is a small step over the store (and, for a merged summary, the compaction
machinery); ``Session`` exposes them as methods, ``%slot`` as subcommands
(``_magics/explore_commands.py``). Nothing here writes SQL or calls back into the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._core.checks import check_optional_text, check_text, check_whole
from ._core.compaction import Compaction
from ._core.messages import Message
from ._core.records import MergeExtra, TurnInfo, TurnRecord
from ._core.slots import validate_slot_id
from ._diff import diff_slots
from ._engine.compaction.compactor import Fold
from ._engine.plan.pending import counted
from ._engine.run.turn import TurnEngine
from ._errors import ConfigError
from ._store.base import GcReport, Mark, SearchHit, Store, UndoStep

MergeAs = Literal["summary", "messages"]
MERGE_AS: tuple[MergeAs, ...] = ("summary", "messages")
MERGE_HEADER = "Merged from branch"


@dataclass(frozen=True)
class Merge:
    """A branch folded back into a slot: the turn stored on ``into`` (``repeated``: it was
    there already, from the same branch at the same point, and nothing was stored now), and
    the summary when merged ``as_`` one."""

    child: str
    into: str
    as_: MergeAs
    record: TurnRecord
    turns: int  # the branch's turns it carries
    summary: Compaction | None = None
    repeated: bool = False

    def describe(self) -> str:
        what = "one summary" if self.as_ == "summary" else f"{self.record.count} messages"
        again = " (already merged: nothing changed)" if self.repeated else ""
        summary = self.summary
        if summary is not None and summary.method == "keyword":  # say the model's summary was not used, and why
            again += f" (keyword summary: {summary.note or 'the model did not answer'})"
        return (
            f"merged {self.turns} turn{'s' * (self.turns != 1)} of {self.child!r} into {self.into!r} "
            f"as {what}, turn {self.record.number}{again}"
        )


class Explorer:
    """The exploring operations of one session."""

    def __init__(self, store: Store, session_id: str, engine: TurnEngine) -> None:
        self.store = store
        self.session_id = session_id
        self.engine = engine

    # -- pins and exclusions -------------------------------------------------------------------

    def mark(self, position: object, mark: Mark, slot: str | None) -> int:
        """Pin, exclude or clear the message at ``position`` (0-based; negative counts from
        the end) and return the position. Tool calls and results are refused: a call and its
        results reach the model together or not at all."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise ConfigError(f"a message position must be a whole number, not {position!r:.60}")
        history = self.store.history(self.session_id, slot)
        length = len(history)
        at = position + length if position < 0 else position
        if not 0 <= at < length:
            number = position + 1 if position >= 0 else position  # as %slot show numbers them
            raise ConfigError(
                f"slot {history.slot.id if history.slot else slot!r} has no message {number}: "
                f"it holds {length} (%slot show numbers them from 1)"
            )
        message = history.messages(at, at + 1)[0]
        if mark != "clear" and (message.role == "tool" or message.tool_calls):
            raise ConfigError(
                f"message {at + 1} is part of a tool exchange (a call and its results go together); "
                "pin or exclude the user message or the reply around it"
            )
        self.store.mark_message(self.session_id, slot, at, mark)
        return at

    # -- undo and redo -------------------------------------------------------------------------

    def undo(self, slot: str | None, turns: object = 1, cell: str | None = None) -> UndoStep:
        count = check_whole(turns, "turns to undo", minimum=1)
        return self.store.undo(self.session_id, slot, count, cell=check_optional_text(cell, "cell"))

    def redo(self, slot: str | None, branch: str | None = None) -> UndoStep:
        if branch is not None:
            branch = validate_slot_id(branch)
        return self.store.redo(self.session_id, slot, branch=branch)

    # -- search and gc -------------------------------------------------------------------------

    def search(self, text: object, slot: str | None = None, limit: object = 20) -> list[SearchHit]:
        query = check_text(text, "the search text")
        return self.store.search(self.session_id, query, slot, limit=check_whole(limit, "limit", minimum=1))

    def gc(self, drop_undo: bool = False) -> GcReport:
        return self.store.gc(self.session_id, drop_undo=drop_undo)

    # -- merge ---------------------------------------------------------------------------------

    def merge(self, child: str, into: str | None, as_: object, instructions: str | None, model: str) -> Merge:
        """Fold what ``child`` has had since it left ``into`` (its parent by default) into
        ``into`` as one turn: one summary message (the compaction machinery: a card of topics,
        decisions, open questions and facts, and a few sentences) or the messages themselves.
        The turn records where it came from; the child stays as it is."""
        if as_ not in MERGE_AS:
            raise ConfigError(f"merge as {as_!r}? use one of: {', '.join(MERGE_AS)}")
        how: MergeAs = "summary" if as_ == "summary" else "messages"
        instructions = check_optional_text(instructions, "instructions")
        branch = self.store.slot(self.session_id, child)
        target = into or branch.meta.parent_id
        if target is None:
            raise ConfigError(f"slot {child!r} has no parent to merge into: name one with --into SLOT")
        target = self.store.slot(self.session_id, target).id
        if target == branch.id:
            raise ConfigError(f"cannot merge slot {child!r} into itself: name another with --into SLOT")
        diff = diff_slots(self.store, self.session_id, target, branch.id)
        if not diff.only_b:
            raise ConfigError(f"nothing to merge: {branch.id!r} has had no turn since it left {target!r}")
        history = self.store.history(self.session_id, branch.id)
        found = self._merged_before(target, branch.id, len(history), how)
        if found is not None:
            return Merge(branch.id, target, how, found, len(diff.only_b), None, True)
        split = diff.shared_messages
        # What the branch excluded stays out of the parent, as it stayed out of the model's view.
        excluded = {p for p, mark in history.marks().items() if mark == "exclude"}
        messages = [m for p, m in enumerate(history.messages(split), split) if p not in excluded]
        summary = None
        if how == "messages":
            merged = [counted(m) for m in messages]
        else:
            summary = self._summarize(branch.id, split, messages, instructions, model)
            turns = f"{len(diff.only_b)} turn{'s' * (len(diff.only_b) != 1)}"
            head = f"{MERGE_HEADER} {branch.id!r} ({turns} since it left {target!r}):"
            card = f"\n\nKey points:\n{summary.card.to_text()}" if not summary.card.empty else ""
            text = f"{head}\n{summary.text}{card}"
            merged = [counted(Message.user(text))]
        extra: MergeExtra = {
            "merged_from": branch.id,
            "as": how,
            "upto": len(history),
            "turns": [t.turn.number for t in diff.only_b],
        }
        if summary is not None:
            extra["method"] = summary.method
        info = TurnInfo(kind="merge", extra=extra)
        record = self.store.append_turn(self.session_id, target, merged, info, writable=True)
        return Merge(branch.id, target, how, record, len(diff.only_b), summary)

    def _merged_before(self, into: str, child: str, upto: int, how: MergeAs) -> TurnRecord | None:
        """A merge turn already on ``into`` from ``child`` as it stands now, made the same way:
        a merge cell run again does not merge twice."""
        for record in reversed(self.store.history(self.session_id, into).turns()):
            merged = record.info.merged()
            if merged is not None and (merged["merged_from"], merged["upto"], merged["as"]) == (child, upto, how):
                return record
        return None

    def _summarize(
        self, child: str, split: int, messages: list[Message], instructions: str | None, model: str
    ) -> Compaction:
        """What the branch concluded, as a compaction of its own part would put it."""
        history = self.store.history(self.session_id, child)
        assert history.slot is not None
        view = self.engine.view(history.slot, history, model=model)
        counting = self.engine.counting(model)
        before = sum(counting.count(m) for m in messages)
        fold = Fold(split, len(history), len(history), tuple(messages), before, None)
        return self.engine.summarizer(model, view).summarize(fold, instructions)
