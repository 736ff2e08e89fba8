"""Compaction: older messages replaced, in the model's view only, by a structured summary.

When a slot's history passes what its budget leaves for history (seed T1), the older part is
folded into one summary with two parts (seed T3): a JSON *card* (topics, decisions with
reasons, open questions, facts to keep; each a short list) and a natural-language summary.
The model is asked for both; its answer is checked (parseable, schema-valid, non-empty, not a
near-copy of the input, shorter than what it replaces), and when it fails, is junk or times
out, a local keyword summary takes its place so the user's turn still goes on.

Everything here is pure: prompts, parsing, checks, the keyword fallback, where to cut. The
engine makes the model call and the store keeps the record; the stored messages never change.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .messages import Message

COMPACTION_MARKER = "[slotmagic compaction request]"
SUMMARY_HEADER = "Summary of the earlier conversation"
_CARD_FIELDS = ("topics", "decisions", "open_questions", "facts")
_MAX_ITEMS = 12
_MAX_ITEM_CHARS = 300
_BEGIN_CARD, _END_CARD = "<card>", "</card>"
_BEGIN_TEXT, _END_TEXT = "<summary>", "</summary>"

Method = Literal["model", "keyword", "edited"]  # edited: written or changed by the user


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision, why, and the question it answers (kept with it: a decision read without
    its question is often a bare "yes")."""

    decision: str
    reason: str = ""
    question: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"decision": self.decision, "reason": self.reason}
        if self.question:
            out = {"question": self.question, **out}
        return out

    def to_text(self) -> str:
        """``Which source first? The largest, because it holds the most.``"""
        said = self.decision.rstrip(".")
        said = f"{self.question.rstrip()} {said[:1].upper()}{said[1:]}" if self.question else said
        return f"{said}, because {self.reason.rstrip('.')}." if self.reason else f"{said}."


@dataclass(frozen=True, slots=True)
class SummaryCard:
    """The structured half of a summary: short lists a model (and a person) can scan."""

    topics: tuple[str, ...] = ()
    decisions: tuple[Decision, ...] = ()
    open_questions: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.topics or self.decisions or self.open_questions or self.facts)

    def to_text(self) -> str:
        """The card as lines a model and a person read (each list on one line; no JSON)."""
        lines = []
        if self.topics:
            lines.append("- Topics: " + "; ".join(self.topics))
        lines += [f"- Decided: {d.to_text()}" for d in self.decisions]
        if self.open_questions:
            lines.append("- Open questions: " + "; ".join(self.open_questions))
        if self.facts:
            lines.append("- Facts: " + "; ".join(self.facts))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": list(self.topics),
            "decisions": [d.to_dict() for d in self.decisions],
            "open_questions": list(self.open_questions),
            "facts": list(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryCard:
        """A card from JSON data; raises ``SummaryRejected`` naming what is malformed."""
        if not isinstance(data, Mapping):
            raise SummaryRejected("the card is not a JSON object")
        unknown = set(data) - set(_CARD_FIELDS)
        if unknown:
            raise SummaryRejected(f"the card has unknown fields: {', '.join(sorted(unknown))}")

        def strings(name: str) -> tuple[str, ...]:
            items = data.get(name, [])
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise SummaryRejected(f"the card's {name} must be a list of strings")
            return _short_list(items)

        raw = data.get("decisions", [])
        if not isinstance(raw, list):
            raise SummaryRejected("the card's decisions must be a list")
        decisions = []
        for item in raw[:_MAX_ITEMS]:
            if isinstance(item, str):
                decisions.append(Decision(_short(item)))
            elif isinstance(item, Mapping) and isinstance(item.get("decision"), str):
                reason, question = item.get("reason", ""), item.get("question", "")
                decisions.append(
                    Decision(
                        _short(item["decision"]),
                        _short(reason if isinstance(reason, str) else ""),
                        _short(question if isinstance(question, str) else ""),
                    )
                )
            else:
                raise SummaryRejected("each decision must be a string or {question, decision, reason}")
        return cls(
            strings("topics"), tuple(d for d in decisions if d.decision), strings("open_questions"), strings("facts")
        )


class SummaryRejected(ValueError):
    """A model's summary did not pass the checks; the reason is one line."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction of a slot: positions ``0`` to ``upto - 1`` of its history are replaced
    in the model's view by the summary. ``at`` is the history's length when it was made."""

    upto: int
    at: int
    card: SummaryCard
    text: str
    model: str | None
    method: Method
    tokens_before: int  # what the replaced part cost in the view (the previous summary included)
    tokens_after: int  # what the summary costs
    replaced: int  # messages folded in by this compaction (not counting an earlier summary)
    note: str | None = None  # why the keyword fallback was used
    instructions: str | None = None
    created_at: float = 0.0
    origin: tuple[int, int] = (0, 0)  # where the store keeps it
    parts: int = 0  # summary requests the model was asked (0: none, or made before this was kept)
    later: int = 0  # positions after ``upto`` left for the next compaction (too many to summarize at once)

    @property
    def covers(self) -> tuple[int, int]:
        """The positions this compaction folded (``upto - replaced`` to ``upto - 1``), each
        read by its summary; the ones before are in the earlier summary it rolled forward."""
        return self.upto - self.replaced, self.upto

    def replace(self, **changes: Any) -> Compaction:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "upto": self.upto,
            "at": self.at,
            "card": self.card.to_dict(),
            "text": self.text,
            "model": self.model,
            "method": self.method,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "replaced": self.replaced,
            "note": self.note,
            "instructions": self.instructions,
            "parts": self.parts,
            "later": self.later,
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], created_at: float = 0.0, origin: tuple[int, int] = (0, 0)
    ) -> Compaction:
        return cls(
            upto=int(data["upto"]),
            at=int(data["at"]),
            card=SummaryCard.from_dict(data.get("card") or {}),
            text=str(data.get("text", "")),
            model=data.get("model"),
            method=data["method"] if data.get("method") in ("keyword", "edited") else "model",
            tokens_before=int(data.get("tokens_before", 0)),
            tokens_after=int(data.get("tokens_after", 0)),
            replaced=int(data.get("replaced", 0)),
            note=data.get("note"),
            instructions=data.get("instructions"),
            parts=int(data.get("parts", 0)),
            later=int(data.get("later", 0)),
            created_at=created_at,
            origin=origin,
        )

    def message(self) -> Message:
        """The summary as the model sees it: one system message, marked as a summary."""
        head = f"{SUMMARY_HEADER} (the first {self.upto} messages):\n{self.text}"
        if self.card.empty:  # a summary written by hand may have no card
            return Message.system(head)
        return Message.system(f"{head}\n\nKey points:\n{self.card.to_text()}")

    def describe(self) -> str:
        """A footer line: ``compacted 42 messages → 1 summary, 38.1k → 2.3k tokens``."""
        if self.method == "edited":
            how = " (a summary written by hand)"
        elif self.method == "keyword":
            how = " (keyword summary: " + (self.note or "the model's summary failed") + ")"
        else:
            how = ""
        later = (
            f"; {self.later:,} more are folded by the next turn (more than one compaction summarizes at once)"
            if self.later
            else ""
        )
        return (
            f"compacted {self.replaced} message{'s' if self.replaced != 1 else ''} → 1 summary, "
            f"{format_tokens(self.tokens_before)} → {format_tokens(self.tokens_after)} tokens{how}{later}"
        )


def format_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_ITEM_CHARS else line[: _MAX_ITEM_CHARS - 1] + "…"


def _short_list(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(s for s in (_short(i) for i in items[:_MAX_ITEMS]) if s)


# -- asking the model ---------------------------------------------------------------------------


def transcript(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"[tool result {m.name or ''}] {m.content}")
        else:
            lines.append(f"[{m.role}] {m.content}")
            lines += [f"[tool call] {c.name}({c.arguments})" for c in m.tool_calls]
    return "\n".join(lines)


def compaction_request(
    messages: Sequence[Message], previous: Compaction | None = None, instructions: str | None = None
) -> list[Message]:
    """The messages to send the model: what to produce, then the part to fold away."""
    ask = (
        f"{COMPACTION_MARKER}\nYou compact a conversation so it can go on within a token budget. "
        "Read the transcript and answer with exactly two parts and nothing else:\n"
        f'{_BEGIN_CARD}{{"topics": [...], "decisions": [{{"question": "...", "decision": "...", "reason": "..."}}], '
        f'"open_questions": [...], "facts": [...]}}{_END_CARD}\n'
        f"{_BEGIN_TEXT}a few sentences that let the conversation continue{_END_TEXT}\n"
        "Each list holds at most 12 short items; each decision keeps the question it answers. Keep names, numbers, "
        "dates and commitments; "
        "drop pleasantries and repetition. The summary must be much shorter than the transcript."
    )
    if instructions:
        ask += f"\nAlso: {instructions}"
    body = transcript(messages)
    if previous is not None:
        body = f"[earlier summary] {previous.text}\n[earlier key points] {json.dumps(previous.card.to_dict())}\n{body}"
    return [Message.system(ask), Message.user(body)]


def _between(text: str, begin: str, end: str) -> str | None:
    start = text.find(begin)
    stop = text.find(end, start + len(begin))
    return None if start < 0 or stop < 0 else text[start + len(begin) : stop].strip()


def parse_summary(reply: str, folded: str, previous: Compaction | None = None) -> tuple[SummaryCard, str]:
    """The card and text from a model's reply, checked; ``SummaryRejected`` otherwise.

    ``folded`` is the transcript of the messages folded now and ``previous`` the summary they
    follow. A summary replaces both, so it must be shorter than both together. It may carry the
    previous summary forward (a rolling summary repeats what still matters), but not copy the
    folded messages verbatim.
    """
    card_text = _between(reply, _BEGIN_CARD, _END_CARD)
    text = _between(reply, _BEGIN_TEXT, _END_TEXT)
    if card_text is None or text is None:
        raise SummaryRejected("the reply does not hold a <card> and a <summary>")
    card_text = re.sub(r"^```(?:json)?|```$", "", card_text.strip()).strip()
    try:
        data = json.loads(card_text)
    except ValueError:
        raise SummaryRejected("the card is not valid JSON") from None
    card = SummaryCard.from_dict(data)
    text = " ".join(text.split())
    if not text or card.empty:
        raise SummaryRejected("the summary or the card is empty")
    whole = text + json.dumps(card.to_dict())
    replaced = len(folded) + (len(previous.text) + len(json.dumps(previous.card.to_dict())) if previous else 0)
    if len(whole) >= replaced:
        raise SummaryRejected("the summary is not shorter than what it replaces")
    if len(folded) > 200 and _near_copy(text, folded):
        raise SummaryRejected("the summary is a near-copy of the conversation")
    return card, text


def _near_copy(summary: str, folded: str) -> bool:
    """Whether the summary mostly repeats the folded messages verbatim (a model echoing its
    input): most of its six-word runs appear in them too. Only the summary's runs are kept;
    the transcript is scanned once against them."""
    said = _shingles(summary)
    if len(said) < 4:
        return False
    firsts = {run[0] for run in said}
    words = _WORDS.findall(folded.lower())
    found = {run for i, w in enumerate(words[:-5]) if w in firsts and (run := tuple(words[i : i + 6])) in said}
    return len(found) >= 0.6 * len(said)


_WORDS = re.compile(r"\w+")


def _shingles(text: str, size: int = 6) -> set[tuple[str, ...]]:
    words = _WORDS.findall(text.lower())
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


# -- the local fallback -------------------------------------------------------------------------

_WORD = re.compile(r"[^\W\d_](?:[\w'-]*[^\W_])?", re.UNICODE)  # a word, without quotes or dashes around it
_STOPWORDS = frozenset(
    (
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "just",
        "more",
        "most",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "want",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "you're",
        "it's",
        "i'm",
        "please",
        "thanks",
        "thank",
        "okay",
        "sure",
    )
)


def keyword_summary(messages: Sequence[Message], previous: Compaction | None = None) -> tuple[SummaryCard, str]:
    """A summary made without a model, as prose: what the user asked about (the first words of
    each question), the words used most, and the question asked last. A summary a model wrote
    before is carried forward in front; a keyword summary before it is not repeated (its topics
    and decisions stay on the card)."""
    asked = [m.content.strip().splitlines()[0] for m in messages if m.role == "user" and m.content.strip()]
    questions = [q for q in map(_snippet, asked) if q]
    words = Counter(
        w.lower() for m in messages if m.role in ("user", "assistant") for w in _WORD.findall(m.content) if len(w) >= 4
    )
    common = [w for w, _ in words.most_common(40) if w not in _STOPWORDS][:10]
    topics = _short_list([*(previous.card.topics if previous else ()), *asked[:6]])
    facts = _short_list(["frequent words: " + ", ".join(common)] if common else [])
    open_questions = _short_list(asked[-1:]) or (previous.card.open_questions if previous else ())
    card = SummaryCard(topics[-_MAX_ITEMS:], previous.card.decisions if previous else (), open_questions, facts)
    parts: list[str] = []
    if previous is not None and previous.method != "keyword":
        parts.append(previous.text)
    if questions:
        before = "; ".join(questions[:-1][-3:])
        parts.append(
            f"The user asked about {before}, and last about {questions[-1]}."
            if before
            else f"The user asked about {questions[-1]}."
        )
    if common:
        parts.append("The words used most: " + ", ".join(common) + ".")
    return card, " ".join(parts) or "Earlier messages were compacted."


def _snippet(text: str, most: int = 60) -> str:
    """The first line of ``text``, at most ``most`` characters cut at a word, without the
    quotes and end punctuation around it."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    if len(line) > most:
        line = line[:most].rsplit(" ", 1)[0] + "…"
    return line.strip("\"'` \u2018\u2019\u201c\u201d").rstrip(".?!:;,")


# -- where to cut -------------------------------------------------------------------------------


def cut_point(
    messages: Sequence[Message],
    tokens: Sequence[int],
    start: int,
    keep_tokens: int,
    keep_last: int = 2,
    most: int | None = None,
) -> int:
    """Where the kept part of ``messages[start:]`` begins: as many recent messages as fit in
    ``keep_tokens`` (at least ``keep_last``), at a turn boundary (the kept part starts with a
    user message), so a tool result never loses its call. The cut moves back to the turn's
    start, keeping a little more (never past ``most`` tokens kept); when that would fold
    nothing or keep too much it moves forward instead (to the end: everything is folded).
    Returns ``start`` when nothing can be folded."""
    n = len(messages)
    cut, kept = n, 0
    while cut > start and (n - cut < keep_last or kept + tokens[cut - 1] <= keep_tokens):
        cut -= 1
        kept += tokens[cut]
    if cut == n:  # nothing fits: fold it all
        return n if n > start else start
    back = cut
    while back > start and messages[back].role != "user":
        back -= 1
    if back > start and messages[back].role == "user" and (most is None or sum(tokens[back:]) <= most):
        return back
    forward = cut
    while forward < n and messages[forward].role != "user":
        forward += 1
    return forward if forward < n else n  # no turn starts after the cut: fold it all
