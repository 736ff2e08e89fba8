"""Compacting a slot: what to fold, asking a model for the summary, and the fallback.

The pure parts (prompts, checks, the keyword summary, where to cut) are in
:mod:`slotmagic.core.compaction`; this module runs them against a history and a provider, sync
or async. A model that fails, answers junk or times out never stops the user's turn: the
keyword summary is used and the compaction says why.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace

from ..core.compaction import (
    Compaction,
    SummaryCard,
    SummaryRejected,
    compaction_request,
    cut_point,
    keyword_summary,
    parse_summary,
    transcript,
)
from ..core.messages import Message
from ..errors import ConfigError
from ..providers import parse_model
from ..providers.base import ChatRequest, Completion, Provider, StreamEvent, TextDelta
from ..store.base import History
from .view import Counting


@dataclass(frozen=True)
class Fold:
    """What a compaction folds: positions ``start`` to ``upto - 1`` of a history of length
    ``at`` (``start`` is where an earlier compaction stopped), and what they cost."""

    start: int
    upto: int
    at: int
    messages: tuple[Message, ...]
    tokens_before: int
    previous: Compaction | None


def plan_fold(history: History, counting: Counting, *, keep_tokens: int = 0, keep_messages: int = 0) -> Fold | None:
    """Fold everything but the most recent messages that fit in ``keep_tokens`` (and at least
    the last ``keep_messages``), cut at a turn boundary; None when there is nothing to fold."""
    previous = history.compaction()
    start = previous.upto if previous is not None else 0
    messages = history.messages(start)
    if counting.counter.exact:
        tokens = history.token_counts(start, len(history), counting.encoding, counting.count)
    else:
        tokens = [counting.count(m) for m in messages]
    cut = cut_point(messages, tokens, 0, keep_tokens=keep_tokens, keep_last=keep_messages)
    if cut <= 0:
        return None
    # An excluded message is never shown to a model, the one writing the summary included.
    excluded = {p for p, mark in history.marks().items() if mark == "exclude"}
    kept = [i for i in range(cut) if start + i not in excluded]
    before = sum(tokens[i] for i in kept) + (previous.tokens_after if previous is not None else 0)
    return Fold(start, start + cut, len(history), tuple(messages[i] for i in kept), before, previous)


def _collect(events: Iterator[StreamEvent]) -> str:
    chunks, completion = [], None
    for event in events:
        if isinstance(event, TextDelta):
            chunks.append(event.text)
        elif isinstance(event, Completion):
            completion = event
    return completion.message.content if completion is not None else "".join(chunks)


async def _acollect(events: AsyncIterator[StreamEvent]) -> str:
    chunks, completion = [], None
    async for event in events:
        if isinstance(event, TextDelta):
            chunks.append(event.text)
        elif isinstance(event, Completion):
            completion = event
    return completion.message.content if completion is not None else "".join(chunks)


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
    falls back to keywords, trimmed to fit."""

    def __init__(self, provider: Provider, model: str, counting: Counting, limit: int) -> None:
        self.provider = provider
        self.model = model
        self.counting = counting
        self.limit = limit

    def request(self, fold: Fold, instructions: str | None) -> ChatRequest:
        messages = compaction_request(fold.messages, fold.previous, instructions)
        return ChatRequest(model=parse_model(self.model)[1], messages=tuple(messages))

    def summarize(self, fold: Fold, instructions: str | None = None) -> Compaction:
        try:
            text = _collect(self.provider.stream(self.request(fold, instructions)))
        except Exception as exc:  # failing in any way (a reply of any shape too): keywords, the turn goes on
            return self._build(fold, None, f"the model failed: {exc or type(exc).__name__}", instructions)
        return self._build(fold, text, None, instructions)

    async def asummarize(self, fold: Fold, instructions: str | None = None) -> Compaction:
        try:
            text = await _acollect(self.provider.astream(self.request(fold, instructions)))
        except Exception as exc:  # as in summarize
            return self._build(fold, None, f"the model failed: {exc or type(exc).__name__}", instructions)
        return self._build(fold, text, None, instructions)

    def _build(self, fold: Fold, reply: str | None, failure: str | None, instructions: str | None) -> Compaction:
        note = failure
        if reply is not None:
            replaced = transcript(fold.messages)
            if fold.previous is not None:
                replaced = fold.previous.text + json.dumps(fold.previous.card.to_dict()) + replaced
            try:
                card, text = parse_summary(reply, replaced)
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
