"""``%slot compare A B [C]``: the last replies of several slots side by side (or, with
``--since-fork``, everything each said since they parted), to decide which branch to keep."""

from __future__ import annotations

import argparse

from .command import Context
from .parsing import CommandParser


def compare_parser() -> CommandParser:
    parser = CommandParser(
        "%slot compare",
        "Show the last replies of 2 to 6 slots side by side (--since-fork: every turn since they part).",
    )
    parser.add_argument("slots", nargs="+", metavar="ID", help="the slots to compare")
    parser.add_argument(
        "--since-fork", action="store_true", help="each slot's whole branch since the point where they part"
    )
    return parser


def compare(ctx: Context, args: argparse.Namespace) -> None:
    comparison = ctx.session.history.compare(*args.slots, since_fork=args.since_fork)
    if ctx.options.widgets and ctx.widgets is not None:
        try:
            from ..widgets._fanout import FanOutWidget
        except ImportError:  # ipywidgets or anywidget missing: the text form
            pass
        else:
            from IPython.display import display

            widget = FanOutWidget()
            widget.show(comparison.columns, comparison.summary)
            display(widget)
            return
    print(comparison.to_text())
