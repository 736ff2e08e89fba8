"""The view pipeline: from a slot's stored history to what the model is sent.

An ordered list of small steps, each one concern (the system prompt, the slot's mode; later
compaction, working context, workflow, pins, namespace references), works on a ``ViewBuild``.
``Session.view()``, ``%slot preview`` and the real request all go through it, so what is
previewed is what is sent. Every entry says where it came from (a stored message and its
position, or something a step injected), and what the steps left out is kept as ranges of
positions, so a preview can show it greyed where it was.

Steps read the history lazily: a focused view of a long history reads its tail, not all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..core.messages import Message
from ..core.slots import FocusedConfig, SlotConfig, SlotMode
from ..store.base import History

SUMMARY_PREFIX = "Summary of the earlier conversation: "

EntryKind = Literal["system", "history", "summary", "new"]


@dataclass(frozen=True, slots=True)
class ViewEntry:
    """One message of a view: ``history`` entries carry their position in the stored
    history; the others were put there by a step (``system`` prompt, ``summary``) or are the
    turn's ``new`` message."""

    message: Message
    kind: EntryKind
    position: int | None = None


@dataclass
class ViewBuild:
    """What the steps work on. ``system`` is the system side of the request (prompt and
    injected blocks), ``conversation`` the rest, in order."""

    config: SlotConfig
    history: History
    prompt: str | None
    count: Callable[[Message], int]
    system: list[ViewEntry] = field(default_factory=list)
    conversation: list[ViewEntry] = field(default_factory=list)
    omitted: list[tuple[int, int]] = field(default_factory=list)

    def inject(self, message: Message, kind: EntryKind) -> ViewEntry:
        """An entry for a message a step made (its token count is taken now)."""
        return ViewEntry(message if message.tokens else message.with_tokens(self.count(message)), kind)


Step = Callable[[ViewBuild], None]


def system_prompt(build: ViewBuild) -> None:
    """The system prompt in effect (the turn's, else the slot's, else the session's)."""
    if build.prompt:
        build.system.append(build.inject(Message.system(build.prompt), "system"))


def mode_filter(build: ViewBuild) -> None:
    """Full and readonly slots see every stored message. A focused slot sees the first system
    message (if ``keep_system``), the summary override, then the last ``recent_messages``
    non-system messages, widened so that a tool result never loses the call it answers."""
    history = build.history
    if build.config.mode is not SlotMode.FOCUSED:
        build.conversation.extend(ViewEntry(m, "history", i) for i, m in enumerate(history.messages()))
        return
    focus = build.config.focused
    kept_system = _first_system(build, focus)
    build.system[:] = [kept_system] if kept_system is not None else []
    if focus.summary_override:
        build.system.append(build.inject(Message.system(SUMMARY_PREFIX + focus.summary_override), "summary"))
    start, tail = history.tail(focus.recent_messages)
    build.conversation.extend(ViewEntry(m, "history", start + i) for i, m in enumerate(tail) if m.role != "system")
    kept = [e.position for e in (kept_system, *build.conversation) if e is not None and e.position is not None]
    build.omitted.extend(_gaps(sorted(kept), len(history)))


def _first_system(build: ViewBuild, focus: FocusedConfig) -> ViewEntry | None:
    if not focus.keep_system:
        return None
    if build.system:
        return build.system[0]
    found = build.history.first_system()
    return None if found is None else ViewEntry(found[1], "history", found[0])


def _gaps(kept: Sequence[int], length: int) -> list[tuple[int, int]]:
    """The ranges of positions between the kept ones (without visiting every position)."""
    out, previous = [], 0
    for p in kept:
        if p > previous:
            out.append((previous, p))
        previous = p + 1
    if previous < length:
        out.append((previous, length))
    return out


STEPS: tuple[Step, ...] = (system_prompt, mode_filter)


@dataclass(frozen=True)
class View:
    """What the model is sent for a slot's next turn, entry by entry."""

    slot: str
    entries: tuple[ViewEntry, ...]
    omitted: tuple[tuple[int, int], ...] = ()  # positions of the stored history left out
    history_length: int = 0

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(e.message for e in self.entries)

    @property
    def tokens(self) -> int:
        return sum(e.message.tokens for e in self.entries)

    def with_new(self, message: Message) -> View:
        """The view with the turn's new message last (never filtered out)."""
        return replace(self, entries=(*self.entries, ViewEntry(message, "new")))


def assemble(
    slot: str,
    config: SlotConfig,
    history: History,
    prompt: str | None,
    count: Callable[[Message], int],
    steps: Sequence[Step] = STEPS,
) -> View:
    build = ViewBuild(config, history, prompt, count)
    for step in steps:
        step(build)
    return View(slot, (*build.system, *build.conversation), tuple(build.omitted), len(history))
