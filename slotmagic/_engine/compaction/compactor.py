"""Compacting a slot: what to fold, asking a model for the summary, and the fallback.

The pure parts (prompts, checks, the keyword summary, where to cut) are in
:mod:`slotmagic._core.compaction`; this module runs them against a history and a provider, sync
or async. A model that fails, answers junk or times out never stops the user's turn: the
keyword summary is used and the compaction says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..._core.compaction import (
    Compaction,
    SummaryCard,
    SummaryRejected,
    compaction_request,
    cut_point,
    format_tokens,
    keyword_summary,
    parse_summary,
    transcript,
)
from ..._core.messages import Message
from ..._core.request import ChatRequest
from ..._errors import ConfigError
from ..._store.base import History
from ...providers import parse_model
from ...providers._base import Provider
from ..run.effects import Ask, Steps, run_async, run_sync
from ..view.inputs import Counting
from ..view.view import View


@dataclass(frozen=True)
class Fold:
    """What a compaction folds: positions ``start`` to ``upto - 1`` of a history of length
    ``at`` (``start`` is where an earlier compaction stopped), and what they cost. ``messages``
    are every folded message but the excluded ones: the summary reads them all. ``later`` is
    how many positions after ``upto`` should have been folded too but were left for the next
    compaction, because summarizing them now would take more requests than one compaction may
    make (the request this fold is made for leaves them out: they are beyond its budget)."""

    start: int
    upto: int
    at: int
    messages: tuple[Message, ...]
    tokens_before: int
    previous: Compaction | None
    later: int = 0

    def describe(self) -> str:
        """``42 messages (38.1k tokens)``."""
        count = self.upto - self.start
        return f"{count:,} message{'s' if count != 1 else ''} ({format_tokens(self.tokens_before)} tokens)"


def summary_limit(view: View, recall: int) -> int:
    """The most a summary may cost: a third of ``view``'s room for history, and never so much
    that with ``recall``'s definition (``recall`` tokens) the kept half would not fit."""
    assert view.report is not None
    room = view.report.history_available
    return max(64, min((room + view.report.system.used) // 3, (room - recall) // 2))


_BLOCK = 512  # positions read at a time


def plan_fold(
    history: History,
    counting: Counting,
    *,
    keep_tokens: int = 0,
    keep_messages: int = 0,
    most: int | None = None,
    read_most: int | None = None,
) -> Fold | None:
    """Fold everything but the most recent messages that fit in ``keep_tokens`` (and at least
    the last ``keep_messages``), cut at a turn boundary (keeping no more than ``most`` tokens
    to get there); None when there is nothing to fold.

    Every folded message is read for the summary. When the fold holds more than ``read_most``
    tokens (what one compaction's summary requests can read), fewer are folded now: the oldest
    that fit, up to a turn boundary, and the rest are left for the next compaction
    (``Fold.later``). The kept part is found reading the history from its end, so deciding
    what to fold reads about the kept part and the fold alone, however long the history."""
    previous = history.compaction()
    start = previous.upto if previous is not None else 0
    n = len(history)
    window = _BLOCK
    while True:  # a tail long enough that a longer one would cut at the same place
        lo = max(start, n - window)
        messages, tokens = history.messages(lo, n), _counts(history, counting, lo, n)
        cut = cut_point(messages, tokens, 0, keep_tokens=keep_tokens, keep_last=keep_messages, most=most)
        older = messages[1 : max(1, len(messages) // 2)]
        if lo == start or (sum(tokens) > keep_tokens + (most or 0) and any(m.role == "user" for m in older)):
            break
        window *= 4
    cut += lo
    if cut <= start:
        return None
    upto, counts = _affordable(history, counting, start, cut, read_most)
    # An excluded message is never shown to a model, the one writing the summary included.
    excluded = {p for p, mark in history.marks().items() if mark == "exclude"}
    positions = range(start, upto)
    folded = [m for p, m in zip(positions, history.messages(start, upto), strict=True) if p not in excluded]
    before = sum(c for p, c in zip(positions, counts, strict=True) if p not in excluded)
    before += previous.tokens_after if previous is not None else 0
    return Fold(start, upto, n, tuple(folded), before, previous, cut - upto)


def _affordable(
    history: History, counting: Counting, start: int, cut: int, read_most: int | None
) -> tuple[int, list[int]]:
    """Where a fold from ``start`` may end: ``cut``, or when more than ``read_most`` tokens lie
    before it, the last turn boundary (a user message) within them (the first one after
    ``start`` when none is: a fold always folds something). With the counts of what it folds."""
    counts: list[int] = []
    total, best = 0, None
    lo = start
    while lo < cut:
        hi = min(cut, lo + _BLOCK)
        block, messages = _counts(history, counting, lo, hi), history.messages(lo, hi)
        for position, (count, message) in enumerate(zip(block, messages, strict=True), lo):
            if read_most is not None and position > start and message.role == "user":
                if total <= read_most:
                    best = position
                if total > read_most and best is not None:
                    return best, counts[: best - start]
                if total > read_most:
                    return position, counts
            total += count
            counts.append(count)
        lo = hi
    return cut, counts


def _counts(history: History, counting: Counting, lo: int, hi: int) -> list[int]:
    if counting.counter.exact:
        return history.token_counts(lo, hi, counting.counts_key, counting.count)
    return [counting.count(m) for m in history.messages(lo, hi)]


def _trimmed(card: SummaryCard) -> SummaryCard:
    """The card less one item: the oldest topic first, then facts, decisions, and last the
    open questions (what the conversation is still about)."""
    if card.topics:
        return replace(card, topics=card.topics[1:])
    if card.facts:
        return replace(card, facts=card.facts[1:])
    if card.decisions:
        return replace(card, decisions=card.decisions[1:])
    return replace(card, open_questions=card.open_questions[1:])


class Summarizer:
    """Asks ``model`` (through ``provider``) to summarize a fold, in at most ``limit`` tokens;
    falls back to keywords, trimmed to fit.

    A summary request holds at most ``room`` tokens (the summarizing model's window less its
    reply), counted with ``request_counting`` (its tokenizer): a fold too long for one request
    is summarized in parts, oldest first, each request carrying the summary so far (a rolling
    summary), so no request ever holds the whole transcript. ``progress(part, parts)`` is
    called before each part when there are several. After the model fails once, the parts
    left are summarized by keywords (a failing model is not asked again and again).
    """

    def __init__(
        self,
        provider: Provider,
        model: str,
        counting: Counting,
        limit: int,
        *,
        room: int | None = None,
        request_counting: Counting | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.counting = counting
        self.limit = limit
        self.room = room
        self.request_counting = request_counting or counting
        self.progress = progress

    def request(self, part: Fold, instructions: str | None) -> ChatRequest:
        messages = compaction_request(part.messages, part.previous, instructions)
        return ChatRequest(model=parse_model(self.model)[1], messages=tuple(messages))

    def part_budget(self, instructions: str | None = None) -> int:
        """Tokens of transcript one summary request may carry (None: no ``room`` is set)."""
        assert self.room is not None
        count = self.request_counting
        base = sum(count.count(m) for m in compaction_request([], None, instructions))
        # the summary so far rides along in every request: at most ``limit`` tokens, with its markup
        return max(_SMALLEST_PART, self.room - base - (self.limit * 4) // 3 - 32)

    def parts(self, fold: Fold, instructions: str | None = None) -> list[Fold]:
        """The fold in parts whose summary requests each fit ``room`` (one part when it does
        whole); a message too long for any request is cut in the middle."""
        if self.room is None:
            return [fold]
        count = self.request_counting
        budget = self.part_budget(instructions)
        lines: list[tuple[Message, int]] = []
        cut = False
        for message in fold.messages:
            tokens = count.scale(count.counter.count_text(transcript([message]))) + 1
            if tokens > budget:
                message, tokens, cut = _cut(message, budget, count), budget, True
            lines.append((message, tokens))
        total = sum(tokens for _, tokens in lines)
        if total <= budget and not cut:
            return [fold]
        # Parts of about equal size (not full ones and a scrap): each says enough to summarize.
        target = -(-total // -(-total // budget))
        groups: list[list[Message]] = [[]]
        sizes = [0]
        for message, tokens in lines:
            if groups[-1] and (sizes[-1] + tokens > budget or sizes[-1] >= target):
                groups.append([])
                sizes.append(0)
            groups[-1].append(message)
            sizes[-1] += tokens
        if len(groups) > 1 and sizes[-1] < target // 3 and sizes[-2] + sizes[-1] <= budget:
            groups[-2:] = [groups[-2] + groups[-1]]  # a scrap left at the end joins the part before
        return [replace(fold, messages=tuple(group)) for group in groups]

    def summarize(self, fold: Fold, instructions: str | None = None) -> Compaction:
        return run_sync(self.steps(fold, instructions))

    async def asummarize(self, fold: Fold, instructions: str | None = None) -> Compaction:
        return await run_async(self.steps(fold, instructions))

    def steps(self, fold: Fold, instructions: str | None = None) -> Steps[Compaction]:
        """The compaction of ``fold``, asking the model for each part's summary (see
        :mod:`..run.effects`: driven by :meth:`summarize`, :meth:`asummarize` or a turn's loop)."""
        parts = self.parts(fold, instructions)
        made: Compaction | None = fold.previous
        failed: str | None = None
        for number, part in enumerate(parts, 1):
            self._tell(number, len(parts))
            part = replace(part, previous=made)
            if failed is not None:
                made = self._build(part, None, failed, instructions)
                continue
            try:
                text: str = yield Ask(self.provider, self.request(part, instructions))
            except Exception as exc:  # failing in any way (a reply of any shape too): keywords, the turn goes on
                failed = f"the model failed: {exc or type(exc).__name__}"
                made = self._build(part, None, failed, instructions)
                continue
            made = self._build(part, text, None, instructions)
        return self._whole(fold, made, parts)

    def written(self, fold: Fold, text: str, card: SummaryCard | None = None) -> Compaction:
        """The compaction of ``fold`` with a summary the user wrote (nothing is asked)."""
        made = self._compaction(fold, card or SummaryCard(), " ".join(text.split()), None, None)
        made = made.replace(method="edited", model=None)
        return made.replace(tokens_after=self.counting.count(made.message()))

    def _tell(self, number: int, parts: int) -> None:
        if self.progress is not None and parts > 1:
            self.progress(number, parts)

    def _whole(self, fold: Fold, last: Compaction | None, parts: list[Fold]) -> Compaction:
        """The compaction of the whole fold: the last part's summary (rolled over every part
        before it), covering positions ``fold.start`` to ``fold.upto - 1``."""
        assert last is not None
        return last.replace(
            upto=fold.upto, at=fold.at, tokens_before=fold.tokens_before, replaced=fold.upto - fold.start,
            parts=len(parts), later=fold.later,
        )  # fmt: skip

    def _build(self, fold: Fold, reply: str | None, failure: str | None, instructions: str | None) -> Compaction:
        note = failure
        if reply is not None:
            try:
                card, text = parse_summary(reply, transcript(fold.messages), fold.previous)
                made = self._compaction(fold, card, text, None, instructions)
                if made.tokens_after <= self.limit:
                    return made
                note = f"the model's summary took {made.tokens_after:,} tokens, more than the {self.limit:,} it may"
            except (SummaryRejected, ConfigError) as exc:  # ConfigError: text that cannot be stored
                note = str(exc)
        card, text = keyword_summary(fold.messages, fold.previous)
        made = self._compaction(fold, card, text, note, instructions)
        while made.tokens_after > self.limit:  # trim the oldest items, the text, then the rest
            card, text = made.card, made.text
            if card.topics or card.facts or card.decisions:
                card = _trimmed(card)
            elif len(text) > 40:
                text = text[: len(text) // 2].rstrip() + "…"
            elif card.open_questions:
                card = _trimmed(card)
            else:
                break
            made = self._compaction(fold, card, text, note, instructions)
        return made

    def _compaction(
        self, fold: Fold, card: SummaryCard, text: str, note: str | None, instructions: str | None
    ) -> Compaction:
        compaction = Compaction(
            upto=fold.upto,
            at=fold.at,
            card=card,
            text=text,
            model=self.model if note is None else None,
            method="model" if note is None else "keyword",
            tokens_before=fold.tokens_before,
            tokens_after=0,
            replaced=fold.upto - fold.start,
            note=note.splitlines()[0][:200].encode("utf-8", "backslashreplace").decode() if note else None,
            instructions=instructions,
        )
        return compaction.replace(tokens_after=self.counting.count(compaction.message()))


_SMALLEST_PART = 200  # tokens of transcript: below this a part says too little to summarize


def _cut(message: Message, budget: int, count: Counting) -> Message:
    """``message`` with its text cut in the middle so its transcript line fits ``budget`` tokens."""
    text = message.content
    keep = len(text)
    while keep > 0:
        keep //= 2
        half = keep // 2
        tail = text[-half:] if half else ""
        shorter = replace(message, content=f"{text[:half]} […{len(text) - 2 * half:,} characters cut…] {tail}")
        if count.scale(count.counter.count_text(transcript([shorter]))) + 1 <= budget:
            return shorter
    return replace(message, content="[…cut…]", tool_calls=())
