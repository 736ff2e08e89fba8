"""Tab completion for ``%slot`` subcommands, options and slot ids, ``%%turn`` options, and
``%ctx`` / ``%workflow`` (their own rules live with their commands)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

from . import ctx_commands, workflow_commands
from .parsing import CommandParser
from .slot_commands import COMMANDS
from .turn import turn_parser

WorkflowNames = tuple[Mapping[str, Sequence[str]], "str | None"]  # name -> steps, and the active one

_TURN_SLOT_ARGS = ("--slot", "--slots")


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


def complete(text_until_cursor: str, slot_ids: Iterable[str], workflows: WorkflowNames | None = None) -> list[str]:
    """Candidates for the word at the cursor of a ``%slot``, ``%%turn``, ``%ctx`` or
    ``%workflow`` line, else []."""
    words = _words(text_until_cursor.lstrip())
    if len(words) < 2 or words[0] not in ("%slot", "%%turn", "%ctx", "%workflow", "%%workflow"):
        return []
    if words[0] == "%ctx":
        return ctx_commands.complete(words, slot_ids)
    if words[0] in ("%workflow", "%%workflow"):
        names, active = workflows if workflows is not None else ({}, None)
        return workflow_commands.complete(words, slot_ids, names, active)
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


def make_matcher(slot_ids: Callable[[], list[str]], workflows: Callable[[], WorkflowNames] | None = None) -> Any:
    """An IPython completion matcher (API v2) over the live slot ids (and workflows)."""

    @context_matcher()
    def slotmagic_matcher(context: CompletionContext) -> SimpleMatcherResult:
        text = context.text_until_cursor
        named: WorkflowNames | None = None
        try:
            ids = slot_ids()
            if workflows is not None and "workflow" in text:
                named = workflows()
        except Exception:  # completion must never raise into the editor
            ids = []
        found = complete(text, ids, named)
        return {"completions": [SimpleCompletion(text=c, type="slotmagic") for c in found], "suppress": bool(found)}

    slotmagic_matcher.slotmagic = True  # found again on reload
    return slotmagic_matcher
