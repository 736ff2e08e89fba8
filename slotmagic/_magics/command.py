"""What every magic's subcommand is: a parser, a handler, and the context a handler runs in."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from .._core.cells import Kind
from .options import SlotMagicOptions
from .parsing import CommandParser, did_you_mean, parse

if TYPE_CHECKING:
    from ..session import Session
    from ..widgets._live import LiveWidgets


@dataclass
class Context:
    """What a subcommand may use: the session, and the settings (``session`` changes them)."""

    session: Session
    options: SlotMagicOptions
    db_path: str
    widgets: LiveWidgets | None = None  # the kernel's live widgets; None: text only
    cell_id: str | None = None  # the notebook cell running the line, when the front end says
    notebook: object | None = None  # the magics, for %slot explain and code (notebook_commands.Notebook)


Handler = Callable[[Context, argparse.Namespace], None]


@dataclass(frozen=True)
class Dispatched:
    """A parsed line: what runs it, its arguments, and what it does to the session."""

    handler: Handler
    args: argparse.Namespace
    kind: Kind


@dataclass(frozen=True)
class Command:
    name: str
    make_parser: Callable[[], CommandParser]
    run: Handler
    slot_args: tuple[str, ...] = ()  # options after which a slot id is expected (for completion)
    slot_positionals: int = 0  # how many leading positionals are slot ids (for completion)
    # changes: run again unchanged from its cell, it replays (_engine/plan/cells.py); reads: shows the
    # session as of its cell while a Run All retraces the first run; runs: never recorded.
    kind: Kind = "changes"

    @cached_property
    def parser(self) -> CommandParser:
        """Built once: a parser is not changed by parsing, and building one costs ~1 ms."""
        return self.make_parser()


@dataclass(frozen=True)
class CommandTable:
    """A magic's subcommands: its ``--help`` overview, and a line's words to a handler and
    arguments. ``header`` is the overview's first lines; a line with no words runs
    ``default`` (summed up as ``default_summary``, else by its parser)."""

    magic: str  # "%slot"
    commands: Mapping[str, Command]
    header: tuple[str, ...]
    default: Handler
    default_parser: Callable[[], CommandParser]
    default_summary: str | None = None
    hint: str = ""  # said after "--help lists the subcommands" when a subcommand is unknown
    default_kind: Kind = "reads"

    def overview(self) -> str:
        """Every subcommand with its summary, generated from the parsers."""
        width = max(len(name) for name in self.commands)
        summary = self.default_summary or self.default_parser().summary()
        lines = [*self.header, f"  {'(none)':<{width}}  {summary}"]
        lines += [f"  {name:<{width}}  {command.parser.summary()}" for name, command in self.commands.items()]
        return "\n".join(lines)

    def dispatch(self, words: Sequence[str]) -> Dispatched | None:
        """The handler and arguments of a line's words; None when help was printed."""
        if not words:
            return Dispatched(self.default, parse(self.default_parser(), []), self.default_kind)
        name, rest = words[0], list(words[1:])
        if name in ("-h", "--help", "help"):
            print(self.overview())
            return None
        command = self.commands.get(name)
        if command is None:
            what = "option" if name.startswith("-") else "subcommand"
            raise UsageError(
                f"{self.magic}: unknown {what} {name!r}{did_you_mean(name, self.commands)} "
                f"({self.magic} --help lists the subcommands{self.hint})"
            )
        return Dispatched(command.run, parse(command.parser, rest), command.kind)
