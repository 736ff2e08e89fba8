"""``%slot explain`` and ``%slot code``: the notebook's own errors into a turn, and a stored
reply's code back into a cell."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol, cast

from .._errors import ConfigError
from .command import Command, Context
from .parsing import CommandParser, at_least

if TYPE_CHECKING:
    from .._engine.run.reply import Reply
    from .cells import KernelCells

EXPLAIN = "Explain this error: what went wrong, and how to fix it."


class Notebook(Protocol):
    """What these commands need of the magics: the kernel's cells, a turn, a new cell."""

    cells: KernelCells

    def explain_turn(self, text: str, args: argparse.Namespace, cell_id: str | None) -> None: ...

    def put_code(self, reply: Reply, block: int = 1) -> bool: ...


def _notebook(ctx: Context) -> Notebook:
    if ctx.notebook is None:
        raise ConfigError("this command works in an IPython shell or a notebook (%load_ext slotmagic)")
    return cast("Notebook", ctx.notebook)


def _explain_parser() -> CommandParser:
    parser = CommandParser(
        "%slot explain",
        "Ask the model about the last error (or cell N's): its cell, the traceback and the variables it names.",
    )
    parser.add_argument("cell", nargs="?", type=at_least(1), metavar="N", help="the cell's execution count (In[N])")
    parser.add_argument("--slot", metavar="ID", help="ask on this slot; the current slot stays current")
    parser.add_argument("--model", metavar="M", help="this turn's model")
    return parser


def _explain(ctx: Context, args: argparse.Namespace) -> None:
    notebook = _notebook(ctx)
    cells = notebook.cells
    if args.cell is not None:
        error = cells.errors.get(args.cell)
        if error is None:
            known = ", ".join(f"In[{n}]" for n in sorted(cells.errors)) or "none so far"
            raise ConfigError(f"cell {args.cell} raised no error (cells that did: {known}); nothing was sent")
    else:
        error = cells.last_error
        if error is None:
            raise ConfigError("no cell has raised an exception in this kernel yet: nothing to explain")
    notebook.explain_turn(f"{EXPLAIN}\n\n{error.describe()}", args, ctx.cell_id)


def _code_parser() -> CommandParser:
    parser = CommandParser("%slot code", "Put a stored reply's code block into a new cell below.")
    parser.add_argument("turn", nargs="?", type=at_least(1), metavar="N", help="the turn (default: the last)")
    parser.add_argument("--slot", metavar="ID", help="a turn of this slot (default: current)")
    parser.add_argument("--block", type=at_least(1), default=1, metavar="K", help="the K-th code block (default 1)")
    return parser


def _code(ctx: Context, args: argparse.Namespace) -> None:
    notebook = _notebook(ctx)
    slot = ctx.session.slot(args.slot).id
    turns = ctx.session.history.turns(slot)
    if not turns:
        raise ConfigError(f"slot {slot!r} has no turns yet: nothing to put in a cell")
    if args.turn is None:
        turn = turns[-1]
    else:
        turn = next((t for t in turns if t.number == args.turn), None)  # type: ignore[assignment]
        if turn is None:
            raise ConfigError(f"slot {slot!r} has turns 1 to {turns[-1].number}, not {args.turn}")
    notebook.put_code(ctx.session.history.stored_reply(slot, turn), args.block)


def notebook_commands() -> tuple[Command, ...]:
    return (
        Command("explain", _explain_parser, _explain, slot_args=("--slot",)),
        Command("code", _code_parser, _code, slot_args=("--slot",)),
    )
