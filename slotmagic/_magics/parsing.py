"""Parsing magic lines: shlex for quoting, argparse for options, UsageError for mistakes.

argparse would print to stderr and exit the process; these parsers raise instead, so a bad
flag is one IPython ``UsageError`` line and ``--help`` just prints the help.
"""

from __future__ import annotations

import argparse
import math
import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from IPython.core.error import UsageError

from .._errors import closest


class HelpShown(Exception):
    """``--help`` was asked for and printed; the command has nothing more to do."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser for one magic command, named like the magic (``%slot create``)."""

    def __init__(self, prog: str, description: str, **kwargs: Any) -> None:
        super().__init__(
            prog=prog,
            description=description,
            add_help=True,
            allow_abbrev=False,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **kwargs,
        )

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, end="")
        raise HelpShown()

    def summary(self) -> str:
        """The first line of the description, for command lists."""
        return (self.description or "").strip().splitlines()[0]


def strip_comment(line: str, quotes: str = "\"'", escape: bool = True) -> str:
    """The line without its comment: a ``#`` standing alone (whitespace or the line's start
    before it, whitespace or the line's end after it) outside ``quotes`` begins a comment that
    runs to the end of the line, as ``%slot derive draft  # try another tone``. A ``#`` inside
    a word (``issue#4``, ``#4``) is text, and so is a lone one in double quotes (``"#"``).
    ``escape``: a backslash makes the next character plain (the shlex-split lines)."""
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if escape and char == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in quotes:
            quote = char
        elif (
            char == "#"
            and (index == 0 or line[index - 1].isspace())
            and (index + 1 == len(line) or line[index + 1].isspace())
        ):
            return line[:index].rstrip()
        index += 1
    return line


def split_line(line: str) -> list[str]:
    """Split a magic line like a shell would: quotes group words, backslashes escape."""
    try:
        return shlex.split(line, posix=True)
    except ValueError as exc:  # e.g. "No closing quotation"
        raise UsageError(f"cannot read the line: {str(exc).lower()}; close the quote or escape it") from None


def parse(parser: CommandParser, args: Sequence[str]) -> argparse.Namespace:
    return parser.parse_args(list(args))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    match = closest(word, choices)
    return f"; did you mean {match!r}?" if match else ""


def at_least(minimum: int, kind: type[int] | type[float] = int) -> Callable[[str], Any]:
    """An argparse ``type`` accepting a number (whole, by default) no smaller than ``minimum``."""
    what = "a whole number" if kind is int else "a number"

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what} >= {minimum}, got {value}")
        return value

    return convert
