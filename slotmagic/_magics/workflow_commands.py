"""``%%workflow NAME`` defines a workflow from an edge list; ``%workflow`` moves it along.

    %%workflow claim
    intake -> evidence
    evidence -> letter [if the facts are clear]

Handlers parse, call the Session and print. Running a ``%%workflow`` cell makes its workflow
the active one (the one whose block requests carry); the same body again changes nothing
else, an edited body keeps the status of the steps that still exist.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence

from IPython.core.error import UsageError

from .._core.context import STEP_STATUSES
from .._core.workflow import Workflow
from .command import Command, CommandTable, Context, Dispatched
from .parsing import CommandParser, parse, split_line
from .slot_commands import show_widget

EMPTY_CELL = "--empty-cell"  # how an empty %%workflow cell reaches the line magic (see below)


def empty_workflow_as_line(lines: list[str]) -> list[str]:
    """An input transformer: IPython refuses a cell magic with an empty body before the magic
    runs, with a message pointing at the line magic; a ``%%workflow`` cell without a body
    (``%%workflow --help`` among them) goes to the line magic marked, which says what to do."""
    if lines and lines[0].startswith("%%workflow") and not "".join(lines[1:]).strip():
        return [f"%workflow {EMPTY_CELL} {lines[0][len('%%workflow') :].strip()}\n"]
    return lines


def cell_parser() -> CommandParser:
    parser = CommandParser(
        "%%workflow",
        "Define a workflow (or update it) from the cell's edge list, one edge per line, and make\n"
        "it the active workflow, whose block the model is sent with every request:\n\n"
        "  %%workflow claim\n"
        "  intake -> evidence\n"
        "  evidence -> letter [if the facts are clear]     # a label, in brackets\n"
        "  evidence -> gather-more [if something is missing]\n"
        "  gather-more -> letter\n"
        "  letter -> file\n\n"
        "A step's name is one word (letters, digits, '-', '_', '.'); a step may stand alone on a\n"
        "line; '#' starts a comment. Cycles, self-loops, repeated edges and two spellings of one\n"
        "name are refused. Running the cell again with the same body changes nothing; an edited\n"
        "body keeps the status of the steps that still exist. %workflow --help lists the rest.",
    )
    parser.add_argument("name", help="the workflow's name")
    return parser


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def summary_line(workflow: Workflow) -> str:
    """One line: where the workflow stands."""
    current = workflow.node(workflow.current) if workflow.current else None
    at = f"current step {current.id} ({current.status.replace('_', ' ')})" if current else "no current step"
    nxt = [e.target for _, e in workflow.next_steps(1)]
    after = f" · next: {', '.join(nxt)}" if nxt else ""
    return f"workflow {workflow.name}: {workflow.completed} of {workflow.total} done · {at}{after}"


def parse_cell_line(line: str) -> str:
    """The workflow's name from a ``%%workflow`` line (``--help`` prints and raises HelpShown)."""
    return str(parse(cell_parser(), split_line(line)).name)


def define(ctx: Context, name: str, body: str) -> None:
    """``%%workflow NAME`` with a body."""
    session = ctx.session
    before = next((w for w in session.workflows() if w.name == name), None)
    made = session.workflows.define(name, body)
    shape = f"{_count(made.total, 'step')}, {_count(len(made.edges), 'edge')}"
    if before is not None and not before.same_definition(body):
        kept = len({n.id for n in before.nodes} & {n.id for n in made.nodes})
        what = f"updated: {shape}, {kept} kept their status"
    else:
        what = f"defined: {shape}"  # the same line when an unchanged cell runs again
    print(f"workflow {made.name!r} {what}; it is the active workflow")
    print(summary_line(made))


# -- subcommands ------------------------------------------------------------------------------


def _workflow_option(parser: CommandParser) -> None:
    parser.add_argument("--workflow", metavar="NAME", help="the workflow (default: the active one)")


def _show_parser() -> CommandParser:
    parser = CommandParser(
        "%workflow show",
        "Show a workflow: its steps, their status and slots, and what the model is sent.\n\n"
        "* marks the current step; %slot preview shows the block in place in a request.",
    )
    parser.add_argument("name", nargs="?", help="the workflow (default: the active one)")
    return parser


def _show(ctx: Context, args: argparse.Namespace) -> None:
    workflow = ctx.session.workflows.get(args.name)
    name, session = workflow.name, ctx.session
    # The drawing follows the workflow (its text form is in its output too); without widgets, text.
    if not show_widget(ctx, "WorkflowWidget", lambda: session.workflows.get(name).to_graph()):
        print(workflow.to_text())
        print()
    print("sent to the model:" if workflow.active else "sent to the model when active:")
    print("\n".join("  " + line for line in workflow.block().splitlines()))


def _list_parser() -> CommandParser:
    return CommandParser("%workflow list", "List the session's workflows; * marks the active one.")


def _list(ctx: Context, args: argparse.Namespace) -> None:
    workflows = ctx.session.workflows()
    if not workflows:
        print("no workflows yet: define one with %%workflow NAME (an edge per line)")
        return
    width = max(len(w.name) for w in workflows)
    for w in workflows:
        current = f"current {w.current}" if w.current else "no current step"
        print(f"{'*' if w.active else ' '} {w.name:<{width}}  {w.completed} of {w.total} done, {current}")


def _status_parser() -> CommandParser:
    parser = CommandParser("%workflow status", "Set a step's status: done, in_progress, blocked or pending.")
    parser.add_argument("node", help="the step")
    parser.add_argument("status", choices=STEP_STATUSES, help="where it stands")
    _workflow_option(parser)
    return parser


def _status(ctx: Context, args: argparse.Namespace) -> None:
    print(summary_line(ctx.session.workflows.set_status(args.node, args.status, workflow=args.workflow)))


def _current_parser() -> CommandParser:
    parser = CommandParser(
        "%workflow current", "Make a step the current one (the model is told the path to it and what follows)."
    )
    parser.add_argument("node", help="the step")
    _workflow_option(parser)
    return parser


def _current(ctx: Context, args: argparse.Namespace) -> None:
    print(summary_line(ctx.session.workflows.set_current(args.node, workflow=args.workflow)))


def _attach_parser() -> CommandParser:
    parser = CommandParser("%workflow attach", "Record the slot where a step is explored (shown in the block).")
    parser.add_argument("node", help="the step")
    parser.add_argument("slot", nargs="?", help="the slot (default: current)")
    parser.add_argument("--detach", action="store_true", help="forget the step's slot instead")
    _workflow_option(parser)
    return parser


def _attach(ctx: Context, args: argparse.Namespace) -> None:
    if args.detach and args.slot:
        raise UsageError("%workflow attach: give a slot or --detach, not both")
    slot = None if args.detach else ctx.session.slot(args.slot).id
    workflow = ctx.session.workflows.attach_step(args.node, slot, workflow=args.workflow)
    node = workflow.node(args.node)
    where = f"is explored in slot {node.slot}" if node.slot else "has no slot"
    print(f"workflow {workflow.name}: step {node.id} {where}")


def _use_parser() -> CommandParser:
    parser = CommandParser(
        "%workflow use", "Make a workflow the active one: its block goes with every request of the session."
    )
    parser.add_argument("name", nargs="?", help="the workflow")
    parser.add_argument("--none", action="store_true", help="no active workflow: requests carry no workflow block")
    return parser


def _use(ctx: Context, args: argparse.Namespace) -> None:
    if args.none == bool(args.name):
        raise UsageError("%workflow use: name a workflow, or --none for no active workflow")
    workflow = ctx.session.workflows.use(None if args.none else args.name)
    print("no workflow is active" if workflow is None else f"workflow {workflow.name} is the active workflow")


def _delete_parser() -> CommandParser:
    parser = CommandParser("%workflow delete", "Delete a workflow (the active one by default).")
    parser.add_argument("name", nargs="?", help="the workflow (default: the active one)")
    return parser


def _delete(ctx: Context, args: argparse.Namespace) -> None:
    gone = ctx.session.workflows.delete(args.name)
    if gone is None:
        print(
            f"deleted workflow {args.name}, which could not be read"
            if args.name
            else "deleted the active workflow, which could not be read"
        )
        return
    after = "; no workflow is active now" if gone.active else ""
    print(f"deleted workflow {gone.name}{after}")


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("show", _show_parser, _show, kind="reads"),
        Command("list", _list_parser, _list, kind="reads"),
        Command("status", _status_parser, _status),
        Command("current", _current_parser, _current),
        Command("attach", _attach_parser, _attach),
        Command("use", _use_parser, _use),
        Command("delete", _delete_parser, _delete),
    )
}
_NAMED = ("show", "use", "delete")  # their positional is a workflow's name
_NODE = ("status", "current", "attach")  # their first positional is a step


TABLE = CommandTable(
    "%workflow",
    COMMANDS,
    header=(
        "usage: %workflow [SUBCOMMAND] [ARGS]   (each subcommand takes --help)",
        "       %%workflow NAME                  (a cell: the edge list; %%workflow --help)",
        "",
    ),
    default=_show,
    default_parser=_show_parser,
    default_summary="same as show",
    hint="; a definition is a %%workflow NAME cell",
)


def overview() -> str:
    """``%workflow --help``: every subcommand with its summary, generated from the parsers."""
    return TABLE.overview()


def dispatch(line: str) -> Dispatched | None:
    """Parse a ``%workflow`` line into its handler and arguments; None when help was printed."""
    words = split_line(line)
    if words and words[0] == EMPTY_CELL:  # a %%workflow cell with no body
        named = parse(cell_parser(), words[1:]).name
        raise UsageError(
            f"%%workflow {named}: the cell has no edges; write one per line below the magic, e.g. `intake -> research`"
        )
    return TABLE.dispatch(words)


def complete(
    words: Sequence[str], slot_ids: Iterable[str], workflows: Mapping[str, Sequence[str]], active: str | None
) -> list[str]:
    """Candidates for the last of ``words`` (a ``%workflow`` line split): subcommands, options,
    statuses, slot ids, workflow names (``workflows``: name -> steps) and the steps of the
    workflow named by ``--workflow``, else of the active one."""
    current, before = words[-1], list(words[1:-1])

    def starting(candidates: Iterable[str]) -> list[str]:
        return [c for c in candidates if c.startswith(current)]

    if words[0] == "%%workflow":
        return starting(workflows) if not before else []
    if not before:
        return starting([*COMMANDS, "--help"])
    command = COMMANDS.get(before[0])
    if command is None:
        return []
    if before[-1] == "--workflow":
        return starting(workflows)
    if current.startswith("-"):
        parser = command.make_parser()
        return starting(sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--")))
    positionals = [w for i, w in enumerate(before[1:], 1) if not w.startswith("-") and before[i - 1] != "--workflow"]
    if command.name in _NAMED:
        return starting(workflows) if not positionals else []
    if command.name in _NODE:
        named = before[before.index("--workflow") + 1] if "--workflow" in before[:-1] else active
        if not positionals:
            return starting(workflows.get(named or "", ()))
        if len(positionals) == 1 and command.name == "status":
            return starting(STEP_STATUSES)
        if len(positionals) == 1 and command.name == "attach":
            return starting(slot_ids)
    return []
