"""``%slot`` subcommands for exploring branches: merge, undo, redo, pin, exclude, include,
search and gc. Handlers only parse, call the Session and print."""

from __future__ import annotations

import argparse

from .._store.base import UndoStep
from .command import Command, Context
from .parsing import CommandParser, at_least


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _message_number(text: str) -> int:
    """A message as ``%slot show`` numbers it (1 is the first; -1 the last) -> a position."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a message number (%slot show numbers them)") from None
    if number == 0:
        raise argparse.ArgumentTypeError("messages are numbered from 1 (or -1 for the last)")
    return number - 1 if number > 0 else number


# -- merge ------------------------------------------------------------------------------------


def _merge_parser() -> CommandParser:
    parser = CommandParser(
        "%slot merge",
        "Fold what a branch concluded back into its parent (or --into SLOT), as one turn.\n"
        "By default one summary message (topics, decisions, open questions, facts, and a few\n"
        "sentences); --as messages copies the branch's messages. The branch stays as it is.",
    )
    parser.add_argument("child", help="the branch to merge")
    parser.add_argument("--into", metavar="SLOT", help="the slot to merge into (default: the branch's parent)")
    parser.add_argument("--as", dest="as_", choices=("summary", "messages"), default="summary", help="(summary)")
    parser.add_argument("--instructions", metavar="TEXT", help="what the summary should keep (quote it)")
    return parser


def _merge(ctx: Context, args: argparse.Namespace) -> None:
    merge = ctx.session.history.merge(args.child, into=args.into, as_=args.as_, instructions=args.instructions)
    print(merge.describe())
    if merge.summary is not None:
        print(merge.summary.text)


# -- undo and redo ----------------------------------------------------------------------------


def _undo_parser() -> CommandParser:
    parser = CommandParser(
        "%slot undo",
        "Move a slot's tip back N turns (1); nothing is deleted, and %slot redo returns.\n"
        "The undone turns stay readable (--list, %slot search) until %slot gc --drop-undo.\n"
        "Run again from the same notebook cell, it does not undo a second time.",
    )
    parser.add_argument("turns", nargs="?", type=at_least(1), default=1, help="how many turns (1)")
    parser.add_argument("--slot", metavar="ID", help="the slot (default: current)")
    parser.add_argument("--list", action="store_true", help="list the slot's undo steps instead")
    return parser


def _describe_step(step: UndoStep, verb: str) -> str:
    turns = step.undone()
    numbers = ", ".join(str(t.number) for t in turns)
    return (
        f"slot {step.slot}: {verb} {_plural(step.turns, 'turn')} (turn{'s' * (len(turns) != 1)} {numbers}); "
        f"it holds {_plural(step.length if verb == 'redid' else step.at, 'message')}"
    )


def _listed_step(step: UndoStep) -> str:
    """A kept undo step in ``%slot undo --list``: what it took off, not a verb that reads as
    an undo done now."""
    numbers = ", ".join(str(t.number) for t in step.undone())
    return f"turn{'s' * (step.turns != 1)} {numbers} taken off, leaving {_plural(step.at, 'message')}"


def _undo(ctx: Context, args: argparse.Namespace) -> None:
    if args.list:
        steps = ctx.session.history.undo_steps(args.slot)
        slot = steps[0].slot if steps else ctx.session.slot(args.slot).id
        print(f"slot {slot}: {_plural(len(steps), 'undo step') + ', latest first' if steps else 'no undo steps'}")
        for number, step in enumerate(steps, 1):
            print(f"  {number}. {_listed_step(step)}" + (" · %slot redo brings it back" if number == 1 else ""))
        return
    step = ctx.session.history.undo(args.slot, args.turns, cell=ctx.cell_id)
    again = " (this cell's undo, already done: nothing changed)" if step.repeated else ""
    print(_describe_step(step, "undid") + again + " · %slot redo brings them back")


def _redo_parser() -> CommandParser:
    parser = CommandParser(
        "%slot redo",
        "Return a slot to where its latest %slot undo took it from.\n"
        "--as NAME makes those undone turns a new slot instead, even after new turns.",
    )
    parser.add_argument("--slot", metavar="ID", help="the slot (default: current)")
    parser.add_argument("--as", dest="branch", metavar="NAME", help="a new slot holding the undone turns")
    return parser


def _redo(ctx: Context, args: argparse.Namespace) -> None:
    step = ctx.session.history.redo(args.slot, branch=args.branch)
    if args.branch is None:
        print(_describe_step(step, "redid"))
        return
    turns = ", ".join(str(t.number) for t in step.undone())
    print(f"slot {args.branch!r} holds the turns undone on {step.slot!r} (turns {turns}); current slot stays")


# -- pin, exclude, include ----------------------------------------------------------------------


def _mark_parser(name: str, what: str) -> CommandParser:
    parser = CommandParser(f"%slot {name}", what)
    parser.add_argument("number", type=_message_number, help="the message, numbered as %slot show does (-1: last)")
    parser.add_argument("--slot", metavar="ID", help="the slot (default: current)")
    return parser


def _pin_parser() -> CommandParser:
    return _mark_parser("pin", "Pin a message: the focused filter and compaction always keep it in the model's view.")


def _exclude_parser() -> CommandParser:
    return _mark_parser("exclude", "Exclude a message: the model never sees it (it stays stored; include undoes).")


def _include_parser() -> CommandParser:
    return _mark_parser("include", "Clear a message's pin or exclusion: the slot's mode decides again.")


def _mark(ctx: Context, args: argparse.Namespace, action: str) -> None:
    session = ctx.session
    mark = {"pin": session.history.pin, "exclude": session.history.exclude, "include": session.history.unmark}[action]
    position = mark(args.number, args.slot)
    slot = session.slot(args.slot).id
    done = {"pin": "pinned", "exclude": "excluded", "include": "cleared the mark of"}[action]
    print(f"slot {slot}: {done} message {position + 1} (%slot preview shows what the model sees)")


def _pin(ctx: Context, args: argparse.Namespace) -> None:
    _mark(ctx, args, "pin")


def _exclude(ctx: Context, args: argparse.Namespace) -> None:
    _mark(ctx, args, "exclude")


def _include(ctx: Context, args: argparse.Namespace) -> None:
    _mark(ctx, args, "include")


# -- search and gc ----------------------------------------------------------------------------


def _search_parser() -> CommandParser:
    parser = CommandParser(
        "%slot search",
        "Find the messages holding every word of TEXT, in every slot of the session.\n"
        "SQLite full-text search, best first, each named by slot, turn and message number.",
    )
    parser.add_argument("text", nargs="+", help="the words to find")
    parser.add_argument("--slot", metavar="ID", help="only this slot's history")
    parser.add_argument("--limit", metavar="N", type=at_least(1), default=20, help="at most N results (20)")
    return parser


def _search(ctx: Context, args: argparse.Namespace) -> None:
    text = " ".join(args.text)
    hits = ctx.session.history.search(text, slot=args.slot, limit=args.limit)
    if not hits:
        print(f"no message holds {text!r}")
    for hit in hits:
        where = f"slot {hit.slot}" + (" (undone)" if hit.undone else "")
        print(f"{where} · turn {hit.turn} · message {hit.position + 1} ({hit.role}): {' '.join(hit.snippet.split())}")


def _gc_parser() -> CommandParser:
    parser = CommandParser(
        "%slot gc",
        "Remove what no slot, undo history or export can reach any more, and shrink the file.\n"
        "That is what deleted branches left behind; it reports the bytes freed.",
    )
    parser.add_argument("--drop-undo", action="store_true", help="forget the undo history first (no redo after)")
    return parser


def _gc(ctx: Context, args: argparse.Namespace) -> None:
    report = ctx.session.history.gc(drop_undo=args.drop_undo)
    print(
        f"gc: removed {_plural(report.messages, 'message')} in {_plural(report.turns, 'turn')} and "
        f"{_plural(report.namespace, 'large tool result')}; freed {report.freed:,} bytes "
        f"({report.bytes_before:,} → {report.bytes_after:,})"
        + ("" if report.compacted else "; another kernel was using the file: run %slot gc again to shrink it")
    )


def explore_commands() -> list[Command]:
    return [
        Command("merge", _merge_parser, _merge, slot_args=("--into",), slot_positionals=1),
        Command("undo", _undo_parser, _undo, slot_args=("--slot",)),
        Command("redo", _redo_parser, _redo, slot_args=("--slot",)),
        Command("pin", _pin_parser, _pin, slot_args=("--slot",)),
        Command("exclude", _exclude_parser, _exclude, slot_args=("--slot",)),
        Command("include", _include_parser, _include, slot_args=("--slot",)),
        Command("search", _search_parser, _search, slot_args=("--slot",), kind="reads"),
        Command("gc", _gc_parser, _gc),
    ]
