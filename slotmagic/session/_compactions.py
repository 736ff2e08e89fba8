"""``session.compactions``: folding a slot's older messages into a summary, and the summaries so far.

session.compactions.compact(keep=4)     # fold all but the last 4 messages now
session.compactions.compact(preview=True); session.compactions.compact(apply=True)
session.compactions()                   # the current slot's, oldest first
"""

from __future__ import annotations

from .._core.checks import check_flag, check_optional_text, check_text, check_whole
from .._core.compaction import Compaction
from .._core.slots import SlotMode
from .._engine.compaction.review import Draft, drop_draft, keep_draft, kept_draft
from .._engine.run.turn import TurnEngine
from .._engine.view.next_view import next_view
from .._engine.view.view import View
from .._errors import ConfigError, SlotReadonly
from .._store.base import History
from ._checks import check_model, optional_slot


class Compactions:
    """The compactions of a session's slots; calling it lists a slot's (the current one's by default)."""

    def __init__(self, engine: TurnEngine) -> None:
        self._engine = engine
        self.store = engine.store
        self.session_id = engine.session_id

    def __call__(self, slot: str | None = None) -> list[Compaction]:
        """The compactions the slot's view has seen, oldest first (the latest applies)."""
        return self.store.history(self.session_id, optional_slot(slot)).compactions()

    def __repr__(self) -> str:
        return f"<Compactions of {self.session_id!r}: call it for a slot's>"

    def compact(
        self,
        slot: str | None = None,
        *,
        keep: int | None = None,
        instructions: str | None = None,
        model: str | None = None,
        preview: bool = False,
        apply: bool = False,
        summary: str | None = None,
    ) -> Compaction:
        """Compact the slot now: fold all but its newest messages into a summary (all but the
        last ``keep`` messages, or what does not fit in half the room left for history). The
        stored messages stay; only the model's view changes. ``instructions`` steer what the
        summary keeps.

        Reviewed: with ``preview`` the summary is made and kept as the slot's draft, nothing
        applied (:meth:`draft`); ``apply`` then applies exactly that draft, asking no model,
        or ``summary`` in its place (an edited text). ``summary`` alone applies a summary of
        your own over what would be folded."""
        check_flag(preview, "preview")
        check_flag(apply, "apply")
        if preview and (apply or summary is not None):
            raise ConfigError("preview shows a summary without applying it: use apply=True (or summary=) afterwards")
        if keep is not None:
            check_whole(keep, "keep", minimum=1)
        check_optional_text(instructions, "instructions")
        if summary is not None and not check_text(summary, "summary").strip():
            raise ConfigError("the summary is empty: write what the folded messages should be replaced by")
        model = check_model(model) if model else self._engine.model
        history = self.store.history(self.session_id, optional_slot(slot))
        found = history.slot
        assert found is not None
        if found.mode is SlotMode.READONLY:
            raise SlotReadonly(found.id)
        view = next_view(self._engine, found, history, model=model)  # the threshold a turn has, tools counted
        summarizer = self._engine.summarizer(model, view)
        if apply:
            draft = kept_draft(self.store, self.session_id, found.id)
            if draft is None:
                raise ConfigError(
                    f"no summary was previewed for slot {found.id!r}: %slot compact --preview {found.id} "
                    "(compactions.compact(preview=True)) makes one to review"
                )
            draft.check(history)
            made = draft.compaction
            if summary is not None:
                made = made.replace(text=" ".join(summary.split()), method="edited", model=None, note=None)
                made = made.replace(tokens_after=summarizer.counting.count(made.message()))
            return self._apply(found.id, history, view, made)
        fold = self._engine.plan_compaction(view, history, model, keep)
        if fold is None:
            hint = "it fits its budget" if keep is None else f"it has no more than {keep} messages to keep"
            raise ConfigError(f"nothing to compact in slot {found.id!r}: {hint} (keep=N folds all but the last N)")
        if summary is not None:
            return self._apply(found.id, history, view, summarizer.written(fold, summary))
        compaction = summarizer.summarize(fold, instructions)
        if preview:
            after = fold.previous.upto if fold.previous is not None else 0
            keep_draft(self.store, self.session_id, Draft(found.id, compaction, history.tip, after))
            return compaction
        return self._apply(found.id, history, view, compaction)

    def draft(self, slot: str | None = None) -> Compaction | None:
        """The summary previewed for the slot and not applied yet (None: there is none)."""
        found = self.store.slot(self.session_id, optional_slot(slot))
        draft = kept_draft(self.store, self.session_id, found.id)
        return None if draft is None else draft.compaction

    def _apply(self, slot: str, history: History, view: View, compaction: Compaction) -> Compaction:
        assert view.report is not None
        room = view.report.history_available + view.report.system.used
        if compaction.method == "edited" and compaction.tokens_after > room:
            raise ConfigError(
                f"the summary takes {compaction.tokens_after:,} tokens, more than the {room:,} slot {slot!r} has "
                "room for: shorten it"
            )
        stored = self.store.add_compaction(self.session_id, slot, compaction, base=history.tip)
        drop_draft(self.store, self.session_id, slot)
        return stored
