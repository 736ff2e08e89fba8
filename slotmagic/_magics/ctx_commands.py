"""``%ctx``: a slot's working context (goals, decisions, questions, the current step).

Handlers parse, call the Session and print; what they do is the Session's behaviour. Texts are
the words as written (``%ctx goal add Get the landlord's answer``): only double quotes group
words, so apostrophes, ``#4`` and backslashes stay text; a ``#`` standing alone begins a
comment, which the magic drops before it gets here (``parsing.strip_comment``). A line ending with ``?`` (``%ctx ask
Is the lease signed?``) is a question, not IPython's help: :func:`ctx_line_as_call` sees to
it. Every change prints the item as it now stands, the same line when a cell runs again
(adding what is already there changes nothing).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable, Sequence

from IPython.core.error import UsageError

from .._core.context import STEP_STATUSES, DecisionItem, GoalItem, QuestionItem, StepInfo
from .command import Command, CommandTable, Context, Dispatched, Handler
from .parsing import CommandParser

GOAL_ACTIONS = ("add", "done", "cancel")


def split_text_line(line: str) -> list[str]:
    """Words split on whitespace; double quotes group words (and are dropped), nothing else
    is special, so natural text passes as written."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.quotes, lexer.escape, lexer.commenters = '"', "", ""
    try:
        return list(lexer)
    except ValueError:
        raise UsageError('cannot read the line: a double quote (") is not closed; close it') from None


def ctx_line_as_call(lines: list[str]) -> list[str]:
    """An input transformer: IPython reads a line ending with ``?`` as a request for help
    about the last word (``%ctx ask Is it signed?`` would show help on ``signed``), so a
    ``%ctx`` line ending with ``?`` becomes the call IPython would make for it anyway. The
    bodies of cell magics (a ``%%turn`` that quotes a ``%ctx`` line) are left as they are."""
    if not lines or lines[0].startswith("%%"):
        return lines
    out = []
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith("%ctx ") and line.rstrip().endswith("?"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}get_ipython().run_line_magic('ctx', {stripped[4:].strip()!r})\n")
        else:
            out.append(line)
    return out


def _words(words: Sequence[str] | None) -> str:
    return " ".join(words or [])


def _slot_option(parser: CommandParser) -> None:
    parser.add_argument("--slot", metavar="ID", help="the slot whose context this is (default: current)")


def _where(args: argparse.Namespace) -> str:
    return f" · slot {args.slot}" if args.slot else ""


def goal_line(goal: GoalItem) -> str:
    return f"goal {goal.id} ({goal.status}): {goal.text}"


def decision_line(decision: DecisionItem) -> str:
    because = f" (because {decision.reason})" if decision.reason else ""
    return f"decision {decision.id}: {decision.question} -> {decision.decision}{because}"


def question_line(question: QuestionItem) -> str:
    answer = f" -> {question.answer}" if question.status == "resolved" else ""
    return f"question {question.id} ({question.status}): {question.text}{answer}"


def step_line(step: StepInfo) -> str:
    note = f"; note: {step.note}" if step.note else ""
    return f"current step: {step.name} ({step.status.replace('_', ' ')}){note}"


# -- subcommands ------------------------------------------------------------------------------


def _show_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx show",
        "Show the slot's whole working context, each item with the turn it last changed in.\n\n"
        "Goals, decisions, questions and the current step. The model is sent the current step\n"
        "with every request, the rest for a few turns after it changed (%slot preview shows\n"
        "what it gets).",
    )
    _slot_option(parser)
    return parser


def _show(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.slot)
    turns = ctx.session.context.turns
    if turns is None or not slot.config.working_context:
        how = "it is not sent: " + ("%ctx on" if turns is not None else "SlotMagic.working_context_turns is None")
    else:
        how = f"changes are sent for {turns} turns"
    print(f"working context of slot {slot.id} (next turn: {slot.meta.turns + 1}; {how})")
    print(ctx.session.context(slot.id).to_text())


def _goal_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx goal",
        "Add a goal, or mark one done or cancelled.\n\n"
        "  %ctx goal add Get the deposit back\n"
        "  %ctx goal done g1\n"
        "  %ctx goal cancel g2\n\n"
        "Adding a goal whose text is already there changes nothing.",
    )
    parser.add_argument("action", choices=GOAL_ACTIONS, help="add a goal, or mark one done or cancelled")
    parser.add_argument("text", nargs="+", help="the goal (add), or its id such as g1 (done, cancel)")
    _slot_option(parser)
    return parser


def _goal(ctx: Context, args: argparse.Namespace) -> None:
    text = _words(args.text)
    session = ctx.session
    if args.action == "add":
        goal = session.context.add_goal(text, slot=args.slot)
    else:
        if len(args.text) != 1:
            raise UsageError(f"%ctx goal {args.action}: name one goal by its id, such as g1 (%ctx show lists them)")
        change = session.context.complete_goal if args.action == "done" else session.context.cancel_goal
        goal = change(text, slot=args.slot)
    print(goal_line(goal) + _where(args))


def _decide_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx decide",
        "Record a decision: the question, what was decided and why.\n\n"
        "  %ctx decide Court or letter first --as A demand letter --because it is cheaper\n\n"
        "Deciding a question again replaces the earlier decision (same id).",
    )
    parser.add_argument("question", nargs="+", help="what was to be decided")
    parser.add_argument("--as", dest="decision", nargs="+", required=True, metavar="DECISION", help="what was decided")
    parser.add_argument("--because", nargs="+", metavar="REASON", help="why")
    _slot_option(parser)
    return parser


def _decide(ctx: Context, args: argparse.Namespace) -> None:
    made = ctx.session.context.decide(
        _words(args.question), _words(args.decision), _words(args.because), slot=args.slot
    )
    print(decision_line(made) + _where(args))


def _ask_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx ask",
        "Note an open question (q1, q2 …); %ctx resolve answers it.\n\n"
        "Asking a question whose text is already there changes nothing.",
    )
    parser.add_argument("question", nargs="+", help="the question")
    _slot_option(parser)
    return parser


def _ask(ctx: Context, args: argparse.Namespace) -> None:
    print(question_line(ctx.session.context.ask(_words(args.question), slot=args.slot)) + _where(args))


def _resolve_parser() -> CommandParser:
    parser = CommandParser("%ctx resolve", "Resolve an open question with its answer.")
    parser.add_argument("id", help="the question's id, such as q1")
    parser.add_argument("--answer", nargs="+", required=True, metavar="TEXT", help="the answer")
    _slot_option(parser)
    return parser


def _resolve(ctx: Context, args: argparse.Namespace) -> None:
    print(question_line(ctx.session.context.resolve(args.id, _words(args.answer), slot=args.slot)) + _where(args))


def _step_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx step",
        "Set the current step, or change its status or note.\n\n"
        "A new name starts a step (in progress unless --status says else); without a name, or\n"
        "with the current step's name, --status and --note change it. The model is sent the\n"
        "current step with every request.",
    )
    parser.add_argument("name", nargs="*", help="the step, in a few words")
    parser.add_argument("--status", choices=STEP_STATUSES, help="where it stands (a new step: in_progress)")
    parser.add_argument("--note", nargs="+", metavar="TEXT", help="anything worth remembering about it")
    _slot_option(parser)
    return parser


def _step(ctx: Context, args: argparse.Namespace) -> None:
    name = _words(args.name) or None
    if name is None and args.status is None and args.note is None:
        raise UsageError("%ctx step: name the step, or change the current one with --status or --note")
    note = _words(args.note) if args.note is not None else None
    print(step_line(ctx.session.context.set_step(name, status=args.status, note=note, slot=args.slot)) + _where(args))


def _clear_parser() -> CommandParser:
    parser = CommandParser("%ctx clear", "Empty the slot's working context (%ctx history still lists what it held).")
    _slot_option(parser)
    return parser


def _clear(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.slot)
    ctx.session.context.clear(slot.id)
    print(f"working context of slot {slot.id} is empty")


def _off_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx off",
        "Send no working context with the slot's requests (goals, decisions, questions, step),\n"
        "and offer no context tools; what it holds is kept. %ctx on sends it again.",
    )
    _slot_option(parser)
    return parser


def _on_parser() -> CommandParser:
    parser = CommandParser("%ctx on", "Send the slot's working context with its requests again (the default).")
    _slot_option(parser)
    return parser


def _switch(on: bool) -> Handler:
    def run(ctx: Context, args: argparse.Namespace) -> None:
        slot = ctx.session.configure_slot(args.slot, working_context=on)
        if on:
            print(f"slot {slot.id} sends its working context with its requests")
        else:
            print(f"slot {slot.id} sends no working context (it is kept: %ctx on sends it again)")

    return run


def _history_parser() -> CommandParser:
    parser = CommandParser(
        "%ctx history",
        "List what changed in the slot's working context, and in which turn.\n\n"
        "A change made between turns counts for the next one. Changes the model made through\n"
        "tools are marked.",
    )
    _slot_option(parser)
    return parser


def _history(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.slot)
    events = ctx.session.context.history(slot.id)
    if not events:
        print(f"the working context of slot {slot.id} has not changed yet")
        return
    width = len(str(max(e.turn for e in events)))
    print(f"working context of slot {slot.id}, {len(events)} change{'s' if len(events) != 1 else ''}:")
    for event in events:
        print(f"  turn {event.turn:>{width}}  {event.describe()}")


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("goal", _goal_parser, _goal, slot_args=("--slot",)),
        Command("decide", _decide_parser, _decide, slot_args=("--slot",)),
        Command("ask", _ask_parser, _ask, slot_args=("--slot",)),
        Command("resolve", _resolve_parser, _resolve, slot_args=("--slot",)),
        Command("step", _step_parser, _step, slot_args=("--slot",)),
        Command("show", _show_parser, _show, slot_args=("--slot",), kind="reads"),
        Command("clear", _clear_parser, _clear, slot_args=("--slot",)),
        Command("history", _history_parser, _history, slot_args=("--slot",), kind="reads"),
        Command("off", _off_parser, _switch(False), slot_args=("--slot",)),
        Command("on", _on_parser, _switch(True), slot_args=("--slot",)),
    )
}


TABLE = CommandTable(
    "%ctx",
    COMMANDS,
    header=(
        "usage: %ctx [SUBCOMMAND] [ARGS]   (each subcommand takes --help)",
        "",
        "The working context of a slot: what the model must not forget. The current step is",
        "sent with every request; goals, decisions and questions for a few turns after they",
        "change (%config SlotMagic.working_context_turns), and all of it once after a compaction.",
        "Texts are taken as written: double quotes group words, and a '#' standing alone starts",
        'a comment (write "#" to keep one).',
        "",
    ),
    default=_show,
    default_parser=_show_parser,
    default_summary="same as show",
)


def overview() -> str:
    """``%ctx --help``: every subcommand with its summary, generated from the parsers."""
    return TABLE.overview()


def dispatch(line: str) -> Dispatched | None:
    """Parse a ``%ctx`` line into its handler and arguments; None when help was printed."""
    return TABLE.dispatch(split_text_line(line))


def complete(words: Sequence[str], slot_ids: Iterable[str]) -> list[str]:
    """Candidates for the last of ``words`` (a ``%ctx`` line split, the word being completed last)."""
    current, before = words[-1], list(words[1:-1])
    if not before:
        return [c for c in [*COMMANDS, "--help"] if c.startswith(current)]
    command = COMMANDS.get(before[0])
    if command is None:
        return []
    if before[-1] in command.slot_args:
        return [s for s in slot_ids if s.startswith(current)]
    if before[-1] == "--status":
        return [s for s in STEP_STATUSES if s.startswith(current)]
    if current.startswith("-"):
        parser = command.make_parser()
        options = sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))
        return [o for o in options if o.startswith(current)]
    if command.name == "goal" and len(before) == 1:
        return [a for a in GOAL_ACTIONS if a.startswith(current)]
    return []
