"""What every magic's subcommand is: a parser, a handler, and the context a handler runs in."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from .options import SlotMagicOptions
from .parsing import CommandParser

if TYPE_CHECKING:
    from ..session import Session
    from ..widgets.live import LiveWidgets


@dataclass
class Context:
    """What a subcommand may use: the session, and the settings (``session`` changes them)."""

    session: Session
    options: SlotMagicOptions
    db_path: str
    widgets: LiveWidgets | None = None  # the kernel's live widgets; None: text only
    cell_id: str | None = None  # the notebook cell running the line, when the front end says


Handler = Callable[[Context, argparse.Namespace], None]


@dataclass(frozen=True)
class Command:
    name: str
    make_parser: Callable[[], CommandParser]
    run: Handler
    slot_args: tuple[str, ...] = ()  # options after which a slot id is expected (for completion)
    slot_positionals: int = 0  # how many leading positionals are slot ids (for completion)

    @cached_property
    def parser(self) -> CommandParser:
        """Built once: a parser is not changed by parsing, and building one costs ~1 ms."""
        return self.make_parser()
