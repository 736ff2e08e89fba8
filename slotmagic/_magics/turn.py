"""``%%turn``: send the cell as a user message on a slot and show the reply as it streams."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from functools import cache

from .._core.attachments import Attached
from .._engine.plan.cells import NOT_SHOWN, ShownTurn
from .._engine.run.fanout import FanOutResult
from .._engine.run.reply import Reply
from .._errors import ConfigError
from ..session import Session, TurnArgs
from .display import StreamView, footer, reply_metadata
from .fanout import run_fan_out, turn_args
from .options import SlotMagicOptions
from .parsing import CommandParser, at_least, parse, split_line


@cache  # built once: parsing does not change it, and building one costs ~1 ms a cell
def turn_parser() -> CommandParser:
    parser = CommandParser(
        "%%turn",
        "Send the cell as a user message and show the model's reply.\n\n"
        "Re-running a cell replays its stored reply when its text is unchanged (no model call),\n"
        "and forks a sibling branch just before its earlier turn when the text was edited.\n"
        "The reply is the cell's value: `reply = _` keeps it.",
    )
    parser.add_argument("--slot", metavar="ID", help="run on this slot; the current slot stays current")
    parser.add_argument("--model", metavar="M", help="this turn's model, e.g. openai:gpt-4o-mini or echo")
    parser.add_argument("--system", metavar="TEXT", help="this turn's system prompt (quote it)")
    parser.add_argument("--temperature", metavar="T", type=at_least(0, float), help="sampling temperature")
    parser.add_argument("--max-tokens", metavar="N", type=at_least(1), help="longest reply, in tokens")
    parser.add_argument(
        "--no-stream",
        dest="stream",
        action="store_false",
        default=None,
        help="show the reply once, when it is complete",
    )
    parser.add_argument(
        "--rerun", action="store_true", help="ask the model again even if this cell's text is unchanged (forks)"
    )
    tools = parser.add_mutually_exclusive_group()
    tools.add_argument("--tools", metavar="A,B", help="offer only these tools in this turn (comma-separated names)")
    tools.add_argument("--no-tools", action="store_true", help="offer no tools in this turn")
    parser.add_argument(
        "--slots",
        metavar="A,B",
        help="fan out: send the cell to each of these slots at once (names, all, or globs such as 'draft-*')",
    )
    parser.add_argument(
        "--models",
        metavar="M1,M2",
        help="fan out: ask each model on the slot's history; each reply goes to a new branch named after it",
    )
    parser.add_argument(
        "--attach",
        metavar="A,B",
        help="send these objects after the text: names or expressions (df, fig, Out[7]); DataFrames as an "
        "excerpt with the whole table kept aside, figures and images as images, long text kept aside; a URI "
        "(demo://...) is an MCP server's resource, read from the server that offers it",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        help="the reply must match this schema: a pydantic model class or a JSON schema dict in the notebook; "
        "the reply's value is then _.parsed",
    )
    parser.add_argument(
        "--raw", action="store_true", help="send the cell as written: {name} and {expression} are not filled in"
    )
    parser.add_argument(
        "--error", action="store_true", help="ask about the last error: its cell, traceback and the variables it names"
    )
    parser.add_argument("--code", action="store_true", help="put the reply's first code block in a new cell below")
    parser.add_argument(
        "--read-vars",
        action="store_true",
        help="let the model read a variable's type, shape and repr by name (the read_variable tool; no code runs)",
    )
    parser.add_argument(
        "--id",
        metavar="NAME",
        help="this cell's identity for replay, when the front end sends no cell id or the cell moves between notebooks",
    )
    return parser


def parse_turn_line(line: str) -> argparse.Namespace:
    """The ``%%turn`` line's options; ``--help`` prints and raises HelpShown before anything else."""
    return parse(turn_parser(), split_line(line))


def run_turn(
    session: Session,
    options: SlotMagicOptions,
    args: argparse.Namespace,
    cell: str,
    cell_id: str | None,
    attachments: tuple[Attached, ...] = (),
    shown: ShownTurn = NOT_SHOWN,
) -> Reply | FanOutResult:
    """Run (or replay) the turn with a live view, return the stored reply (a fan-out's
    columns with ``--slots`` or ``--models``). ``attachments`` follow the text; ``shown`` is
    how the cell read the first time (the lines it printed before its reply, a compaction's;
    the notes under it; the slot its footer named): a replay shows it so again."""
    if args.slots is not None or args.models is not None:
        if getattr(args, "read_vars", False):
            raise ConfigError("--read-vars goes with one slot's turn, not with --slots or --models")
        return run_fan_out(session, options, args, cell, cell_id, attachments)
    turn: TurnArgs = {
        **turn_args(args, cell_id),
        "slot": args.slot,
        "attachments": attachments,
        "read_variables": bool(getattr(args, "read_vars", False)),
    }
    stream = session.stream_turn(cell.strip("\n"), **turn)
    model, slot = stream.model, stream.slot
    live = options.stream if args.stream is None else args.stream
    view = StreamView(
        images=[image for attached in attachments for image in attached.images],
        live=live and not stream.replayed,
        throttle=options.stream_throttle,
        metadata=reply_metadata(None, session.session_id, slot, model),
        waiting=f"streaming from {model} on slot {slot}…",
    )
    stream.on_step = view.step
    if stream.replayed:
        for line in shown.before:
            sys.stdout.write(line)
    notice = stream.compacting
    if notice is not None:  # a model call before the reply: say why the cell waits
        print(notice)
        stream.on_progress = lambda part, parts: view.waiting_for(f"{notice} part {part} of {parts}")
    try:
        view.feed(stream)
    except KeyboardInterrupt:
        message = f"interrupted: nothing was stored, slot {slot!r} is as it was before the turn"
        view.interrupted(message)
        print(message, file=sys.stderr)
        raise
    assert stream.reply is not None
    reply = stream.reply
    if reply.replayed and shown.notes and not reply.notes:  # what the first run noted under it
        reply = replace(reply, notes=shown.notes)
    # A replay names the slot as the cell did (renamed since, its footer still says where it went).
    as_of = replace(reply, slot=shown.slot) if reply.replayed and shown.slot else reply
    view.finish(reply, footer(as_of))
    return reply
