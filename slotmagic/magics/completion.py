"""Tab completion for ``%slot`` subcommands, options and slot ids, and ``%%turn`` options."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from typing import Any

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

from .parsing import CommandParser
from .slot_commands import COMMANDS
from .turn import turn_parser

_TURN_SLOT_ARGS = ("--slot",)


def _words(text: str) -> list[str]:
    """The words before the cursor; the last one is the word being completed ('' after a space)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    words: list[str] = []
    try:
        words.extend(lexer)
    except ValueError:  # an open quote: complete the quoted word as it stands
        words.append(lexer.token)
    if not text or text[-1].isspace():
        words.append("")
    return words


def _options(parser: CommandParser) -> list[str]:
    return sorted(o for action in parser._actions for o in action.option_strings if o.startswith("--"))


def _starting(prefix: str, candidates: Iterable[str]) -> list[str]:
    return [c for c in candidates if c.startswith(prefix)]


def complete(text_until_cursor: str, slot_ids: Iterable[str]) -> list[str]:
    """Candidates for the word at the cursor of a ``%slot`` or ``%%turn`` line, else []."""
    words = _words(text_until_cursor.lstrip())
    if len(words) < 2 or words[0] not in ("%slot", "%%turn"):
        return []
    current, before = words[-1], words[1:-1]
    if words[0] == "%%turn":
        if before and before[-1] in _TURN_SLOT_ARGS:
            return _starting(current, slot_ids)
        return _starting(current, _options(turn_parser())) if current.startswith("-") else []
    if not before:
        return _starting(current, [*COMMANDS, "--help"])
    command = COMMANDS.get(before[0])
    if command is None:
        return []
    if before[-1] in command.slot_args:
        return _starting(current, slot_ids)
    if current.startswith("-"):
        return _starting(current, _options(command.parser))
    positionals = [
        w for i, w in enumerate(before[1:], 1) if not w.startswith("-") and before[i - 1] not in command.slot_args
    ]
    if len(positionals) < command.slot_positionals:
        return _starting(current, slot_ids)
    return []


def make_matcher(slot_ids: Callable[[], list[str]]) -> Any:
    """An IPython completion matcher (API v2) over the live slot ids."""

    @context_matcher()
    def slotmagic_matcher(context: CompletionContext) -> SimpleMatcherResult:
        try:
            ids = slot_ids()
        except Exception:  # completion must never raise into the editor
            ids = []
        found = complete(context.text_until_cursor, ids)
        return {"completions": [SimpleCompletion(text=c, type="slotmagic") for c in found], "suppress": bool(found)}

    slotmagic_matcher.slotmagic = True  # found again on reload
    return slotmagic_matcher
