"""``%slot``: one line magic, a subcommand per action, each with its own parser and ``--help``.

Handlers only parse, call the Session and print; what they do is the Session's behaviour.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from IPython.core.error import UsageError

from .._core.budget import ContextBudget
from .._core.checks import check_text
from .._core.compaction import Compaction
from .._core.messages import Message
from .._core.slots import FocusedConfig, Slot, SlotConfig, SlotMode
from .._errors import ConfigError
from .._render import describe_mode, plural
from .._store.urls import is_postgres_url, parse_postgres_url, shown_target
from ..session import Session
from .command import Command, CommandTable, Context, Dispatched
from .compare_command import compare, compare_parser
from .explore_commands import explore_commands
from .mcp_commands import mcp_commands
from .notebook_commands import notebook_commands
from .parsing import CommandParser, at_least, split_line

# -- formatting -------------------------------------------------------------------------------


def describe_slot(slot: Slot) -> str:
    meta = slot.meta
    origin = f", derived from {meta.parent_id}" if meta.parent_id else ""
    return (
        f"{slot.id} ({describe_mode(slot.config)}{origin}; {plural(meta.turns, 'turn')}, "
        f"{plural(meta.message_count, 'message')}, ~{meta.total_tokens} tokens)"
    )


def format_messages(messages: Sequence[Message], first_number: int = 1, marks: Mapping[int, str] | None = None) -> str:
    """Messages numbered from ``first_number``; ``marks`` (by stored position, 0-based) labels
    the pinned and excluded ones."""
    labels = {"pin": " · pinned", "exclude": " · excluded: the model never sees it"}
    lines = []
    for number, message in enumerate(messages, first_number):
        label = labels.get((marks or {}).get(number - 1, ""), "")
        lines.append(f"[{number}] {message.role} ({plural(message.tokens, 'token')}{label})")
        body = message.content or "(no text)"
        lines.extend("    " + line for line in body.splitlines() or [""])
        for image in message.images:
            lines.append(f"    [image{' ' + image.label if image.label else ''}: {image.describe()}]")
        for call in message.tool_calls:
            lines.append(f"    -> tool call {call.name}({call.arguments})")
    return "\n".join(lines)


def compaction_marker(slot: str, compaction: Compaction, *, preview: bool = False) -> str:
    """The line a compaction leaves in the notebook (``--preview``: what it would replace)."""
    if not preview:
        return f"slot {slot}: {compaction.describe()}"
    lo, hi = compaction.upto - compaction.replaced + 1, compaction.upto
    where = f"messages {lo}-{hi}" if hi > lo else f"message {hi}"
    return (
        f"preview: slot {slot} would fold {where} into this summary "
        f"({compaction.describe()}); nothing changed: %slot compact --apply {slot} applies exactly this summary, "
        f"--edit {slot} lets you change it first"
    )


# -- focus options shared by create and derive ----------------------------------------------------


def _add_focus_options(parser: CommandParser) -> None:
    parser.add_argument(
        "--recent",
        metavar="N",
        type=at_least(0),
        help="focused: how many of the latest non-system messages the model sees (10)",
    )
    parser.add_argument(
        "--keep-system",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="focused: keep the first system message (default: keep)",
    )
    parser.add_argument(
        "--summary", metavar="TEXT", help="focused: a summary the model sees in place of older messages"
    )


def _focus_given(args: argparse.Namespace) -> bool:
    return args.recent is not None or args.keep_system is not None or args.summary is not None


def _focused_config(args: argparse.Namespace) -> FocusedConfig:
    base = FocusedConfig()
    return FocusedConfig(
        base.keep_system if args.keep_system is None else args.keep_system,
        base.recent_messages if args.recent is None else args.recent,
        args.summary,
    )


def _switch_line(session: Session, slot_id: str, switch: bool) -> str:
    if not switch:
        return f"current slot stays {session.current_slot!r}"
    session.switch_slot(slot_id)
    return "switched to it"


# -- subcommands ----------------------------------------------------------------------------


def _status_parser() -> CommandParser:
    return CommandParser("%slot", "Show the current slot with a one-line summary.")


def _status(ctx: Context, args: argparse.Namespace) -> None:
    session = ctx.session
    slots = session.list_slots()
    print(f"current slot: {describe_slot(session.slot())}")
    print(f"session {session.session_id} · {plural(len(slots), 'slot')} · model {session.model}")


def _list_parser() -> CommandParser:
    return CommandParser("%slot list", "List the slots of this session; * marks the current one.")


def _list(ctx: Context, args: argparse.Namespace) -> None:
    slots = ctx.session.list_slots()
    rows = [("", "slot", "mode", "parent", "turns", "messages", "tokens")]
    rows += [
        (
            "*" if s.current else "",
            s.id,
            s.mode.value,
            s.meta.parent_id or "-",
            str(s.meta.turns),
            str(s.meta.message_count),
            str(s.meta.total_tokens),
        )
        for s in slots
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric = {4, 5, 6}
    for row in rows:
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())


def _create_parser() -> CommandParser:
    parser = CommandParser(
        "%slot create",
        "Create an empty slot and switch to it.\n\n"
        "Running it again with the same definition just switches to the slot.",
    )
    parser.add_argument("id", help="the new slot's id: letters, digits, '-', '_' or '.'")
    parser.add_argument(
        "--mode",
        choices=[m.value for m in SlotMode],
        default=None,
        help="full (all messages), focused (a filter) or readonly (default: full, focused if a focus option is given)",
    )
    _add_focus_options(parser)
    parser.add_argument("--system", metavar="TEXT", help="this slot's own system prompt (quote it)")
    parser.add_argument(
        "--budget",
        metavar="TOKENS",
        type=at_least(64),
        help="this slot's token budget, split like a model's window (default: the model's window)",
    )
    parser.add_argument("--no-switch", dest="switch", action="store_false", help="stay on the current slot")
    return parser


def _create(ctx: Context, args: argparse.Namespace) -> None:
    mode = SlotMode(args.mode) if args.mode else SlotMode.FOCUSED if _focus_given(args) else SlotMode.FULL
    if _focus_given(args) and mode is not SlotMode.FOCUSED:
        raise UsageError(
            f"--recent, --keep-system and --summary apply to focused slots; "
            f"drop them or use --mode focused instead of --mode {mode.value}"
        )
    budget = ContextBudget.auto(args.budget) if args.budget else None
    config = SlotConfig(mode=mode, focused=_focused_config(args), system=args.system, budget=budget)
    # The same line whether the slot is new or was made by an earlier run of this cell: a
    # re-run notebook reproduces its outputs.
    slot = ctx.session.create_slot(args.id, config, exist_ok=True)
    what = f"created ({describe_mode(slot.config)}" + (f", budget {args.budget:,} tokens)" if args.budget else ")")
    print(f"slot {slot.id!r} {what}; {_switch_line(ctx.session, slot.id, args.switch)}")


def _switch_parser() -> CommandParser:
    parser = CommandParser("%slot switch", "Make another slot current: %%turn cells then run on it.")
    parser.add_argument("id", help="the slot to switch to")
    return parser


def _switch(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.switch_slot(args.id)
    print(f"switched to slot {describe_slot(slot)}")


def _derive_parser() -> CommandParser:
    parser = CommandParser(
        "%slot derive",
        "Branch a slot into a new one and switch to it (nothing is copied).\n"
        "The new slot shares its parent's history so far, and turns on either side stay\n"
        "invisible to the other.\n\n"
        "Running it again with the same definition just switches to the slot.",
    )
    parser.add_argument("id", help="the new slot's id")
    parser.add_argument("--from", dest="parent", metavar="PARENT", help="the slot to branch (default: current)")
    parser.add_argument(
        "--focused", action="store_true", help="the new slot sees its history through the focused filter"
    )
    _add_focus_options(parser)
    parser.add_argument("--no-switch", dest="switch", action="store_false", help="stay on the current slot")
    return parser


def _derive(ctx: Context, args: argparse.Namespace) -> None:
    strategy: FocusedConfig | str = _focused_config(args) if args.focused or _focus_given(args) else "full"
    slot = ctx.session.derive_slot(args.id, args.parent, strategy, exist_ok=True)
    # As for create: the same line for a new slot and for one an earlier run made.
    what = (
        f"derived from {slot.meta.parent_id!r} ({describe_mode(slot.config)}, "
        f"sharing {plural(slot.meta.fork_at, 'message')})"
    )
    print(f"slot {slot.id!r} {what}; {_switch_line(ctx.session, slot.id, args.switch)}")


def _delete_parser() -> CommandParser:
    parser = CommandParser(
        "%slot delete", "Delete a slot. Slots derived from it keep their whole history; 'default' stays."
    )
    parser.add_argument("id", help="the slot to delete")
    parser.add_argument(
        "--force", action="store_true", help="also delete turns no other slot shares, and do not mind a missing slot"
    )
    return parser


def _delete(ctx: Context, args: argparse.Namespace) -> None:
    was_current = ctx.session.current_slot == args.id
    if not ctx.session.delete_slot(args.id, force=args.force, missing_ok=args.force):
        print(f"no slot {args.id!r}; nothing to delete")
        return
    after = f"; current slot is now {ctx.session.current_slot!r}" if was_current else ""
    print(f"deleted slot {args.id!r}{after}")


def _show_parser() -> CommandParser:
    parser = CommandParser("%slot show", "Show a slot's stored messages (all of them, before any filter).")
    parser.add_argument("id", nargs="?", help="the slot (default: current)")
    parser.add_argument("--last", metavar="N", type=at_least(0), help="only the last N messages")
    parser.add_argument(
        "--expand", action="store_true", help="show large tool results whole, not as their namespace:// reference"
    )
    return parser


def _show(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.id)
    messages = ctx.session.messages(slot.id, expand=args.expand)
    shown = messages[-args.last :] if args.last else messages if args.last is None else []
    print(f"slot {describe_slot(slot)}")
    if shown:
        print(format_messages(shown, len(messages) - len(shown) + 1, ctx.session.history.marks(slot.id)))


def _preview_parser() -> CommandParser:
    parser = CommandParser(
        "%slot preview",
        "Show what the model would be sent for the slot's next turn.\n"
        "Before the new user message: the system prompt, a compaction's summary, then the history\n"
        "through the slot's mode, each message with its token count as the model counts it; what\n"
        "a compaction folded or the focused filter left out is shown where it was.",
    )
    parser.add_argument("id", nargs="?", help="the slot (default: current)")
    return parser


def _preview(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.id)
    if not show_widget(ctx, "SlotPreviewWidget", args.id):
        print(ctx.session.preview(slot.id).to_text(describe_mode(slot.config)))


def _compact_parser() -> CommandParser:
    parser = CommandParser(
        "%slot compact",
        "Compact a slot now: fold its older messages into one summary the model sees instead.\n"
        "The stored messages stay (%slot show lists them); slots derived later see the summary.\n"
        "Without --keep, what does not fit in half the room left for history is folded.\n"
        "Review first: --preview makes the summary and keeps it, --edit changes it, --apply applies it.",
    )
    parser.add_argument("id", nargs="?", help="the slot (default: current)")
    parser.add_argument("--keep", metavar="N", type=at_least(1), help="keep the last N messages as they are")
    parser.add_argument("--instructions", metavar="TEXT", help="what the summary should keep (quote it)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--preview", action="store_true", help="make the summary and keep it for review; change nothing")
    how.add_argument("--apply", action="store_true", help="apply the previewed summary as it is (asks no model)")
    how.add_argument("--edit", action="store_true", help="edit the previewed summary in a text box, then apply it")
    parser.add_argument("--summary", metavar="TEXT", help="apply this summary of your own (quote it)")
    return parser


def _compact(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.id)
    if args.edit:
        if args.summary is not None:
            raise ConfigError("--edit opens the previewed summary for editing; --summary TEXT applies a text as is")
        draft = ctx.session.compactions.draft(slot.id)
        if draft is None:
            draft = ctx.session.compactions.compact(
                slot.id, keep=args.keep, instructions=args.instructions, preview=True
            )
        if not show_editor(ctx, slot.id, draft):
            print(compaction_marker(slot.id, draft, preview=True))
            print(draft.text)
            print(f'edit it and apply your text with %slot compact --apply {slot.id} --summary "…"')
        return
    compaction = ctx.session.compactions.compact(
        slot.id, keep=args.keep, instructions=args.instructions, preview=args.preview, apply=args.apply,
        summary=args.summary,
    )  # fmt: skip
    print(compaction_marker(slot.id, compaction, preview=args.preview))
    print(compaction.text)


def show_editor(ctx: Context, slot: str, draft: Compaction) -> bool:
    """Display the summary editor; False when widgets are off or not installed."""
    if not ctx.options.widgets or ctx.widgets is None:
        return False
    try:
        from ..widgets import SummaryEditor
    except ImportError:
        return False
    from IPython.display import display

    # it acts on the kernel's session at the click (and says so when that is another one now)
    display(SummaryEditor(ctx.widgets.session, slot, draft))
    return True


def _tools_parser() -> CommandParser:
    return CommandParser(
        "%slot tools",
        "List the tools turns may offer, with their parameters and where each is enabled.\n"
        "A @slotmagic.tool function joins every session; configure_slot(tools=[...]) narrows a slot;\n"
        "%%turn --tools a,b or --no-tools chooses for one turn.",
    )


def _tools(ctx: Context, args: argparse.Namespace) -> None:
    tools = ctx.session.tools.tools()
    if not tools:
        print("no tools: decorate a function with @slotmagic.tool to offer it to the model")
        return
    slots = ctx.session.list_slots()
    for tool in tools:
        spec = tool.spec()
        params = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        signature = ", ".join(
            f"{name}: {prop.get('type', 'any')}{'' if name in required else '?'}" for name, prop in params.items()
        )
        narrowed = [s.id for s in slots if s.config.tools is not None]
        where = [s.id for s in slots if s.config.tools is None or spec.name in s.config.tools]
        enabled = "every slot" if not narrowed else ("slots " + ", ".join(where) if where else "no slot")
        first = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        print(f"{spec.name}({signature}) — {first}")
        print(f"    enabled on {enabled}")
        for name, prop in params.items():
            if prop.get("description"):
                print(f"    {name}: {prop['description']}")


def _budget_parser() -> CommandParser:
    parser = CommandParser(
        "%slot budget",
        "Show the slot's token budget by category, the compaction threshold and the compactions.\n"
        "The slot's next request is counted as the model counts it, within the model's window.",
    )
    parser.add_argument("id", nargs="?", help="the slot (default: current)")
    parser.add_argument("--model", metavar="M", help="count for this model (default: the session's)")
    return parser


def _budget(ctx: Context, args: argparse.Namespace) -> None:
    if args.id is not None:
        ctx.session.slot(args.id)  # an unknown slot is one line, widget or not
    if not show_widget(ctx, "SlotBudgetWidget", args.id, model=args.model):
        print(ctx.session.budget(args.id, model=args.model).to_text())


def _tree_parser() -> CommandParser:
    return CommandParser(
        "%slot tree",
        "Show the slots as a tree: each with its mode, counts, fork point and last question.\n"
        "As a widget it shows the session as of its cell (follow live makes it follow): click a\n"
        "slot to make it current, right-click (or ⋯) to derive, rename or delete it.\n"
        "%config SlotMagic.widgets = False prints the text form.",
    )


def _tree(ctx: Context, args: argparse.Namespace) -> None:
    if not show_widget(ctx, "SlotTreeWidget"):
        print(ctx.session.tree().to_text())


def show_widget(ctx: Context, name: str, *args: Any, **kwargs: Any) -> bool:
    """Display the live widget ``name`` of :mod:`slotmagic.widgets` following the extension's
    session; False when widgets are off (``SlotMagic.widgets``) or not installed, for the
    caller to print the text form instead. The widget's output carries that text form too.

    Other magic families call it the same way, e.g. ``%workflow show``::

        show_widget(ctx, "WorkflowWidget", wf.to_graph) or print(workflow_text(wf.to_graph()))
    """
    if not ctx.options.widgets or ctx.widgets is None:
        return False
    try:
        from .. import widgets

        kind = getattr(widgets, name)
    except ImportError:  # ipywidgets or anywidget missing: the text form
        return False
    from IPython.display import display

    live = ctx.widgets
    display(kind(live.session, *args, live=live, **kwargs))
    return True


def _session_parser() -> CommandParser:
    parser = CommandParser(
        "%slot session", "Show this notebook's session, or attach to another one by name (started if new)."
    )
    parser.add_argument("name", nargs="?", help="the session to attach to")
    parser.add_argument(
        "--readonly",
        action="store_true",
        help="open it read-only: a view of another person's session that refuses every write",
    )
    parser.add_argument(
        "--copy-to",
        metavar="DST",
        help="copy this session to another store (a state file or a postgresql:// URL; its password "
        "belongs in ~/.pgpass or PGPASSWORD, not in the notebook), checking every message",
    )
    return parser


def _session(ctx: Context, args: argparse.Namespace) -> None:
    if args.copy_to is not None:
        _copy_to(ctx, args.copy_to)
        return
    if args.name is None:
        if args.readonly:
            raise UsageError("%slot session --readonly: name the session to view (%slot session NAME --readonly)")
        slots = ctx.session.list_slots()
        print(
            f"session {ctx.session.session_id} in {shown_target(ctx.db_path)} · {plural(len(slots), 'slot')} · "
            f"current slot {ctx.session.current_slot}" + (" · read-only" if ctx.session.readonly else "")
        )
        return
    if not args.name.strip():
        raise UsageError("%slot session: a session name cannot be empty")
    check_text(args.name, "%slot session: the session name")  # before it becomes the setting
    known = args.name in ctx.session.store.sessions()
    if args.readonly and not known:
        raise UsageError(f"%slot session --readonly: there is no session {args.name!r} to view")
    ctx.options.session_id = args.name  # the workspace reopens on these settings
    ctx.options.readonly = args.readonly
    if args.readonly:
        print(f"viewing session {args.name} read-only; %slot session NAME attaches to one to write")
        return
    print(
        f"{'attached to' if known else 'started'} session {args.name}; "
        f"%config SlotMagic.session_id is now {args.name!r}"
    )


def _copy_to(ctx: Context, destination: str) -> None:
    if ctx.db_path == ":memory:":
        raise UsageError("%slot session --copy-to: this session is in memory only; nothing to copy from")
    if is_postgres_url(destination) and parse_postgres_url(destination).password:
        raise UsageError(
            "%slot session --copy-to: a password typed into a cell is saved in the notebook; "
            "put it in ~/.pgpass or the PGPASSWORD variable and leave it out of the URL"
        )
    from .._copy import copy_sessions

    print(copy_sessions(ctx.db_path, destination, [ctx.session.session_id]))


def _rename_parser() -> CommandParser:
    parser = CommandParser("%slot rename", "Rename a slot; its history and branches stay as they are.")
    parser.add_argument("old", help="the slot's id")
    parser.add_argument("new", help="its new id")
    return parser


def _rename(ctx: Context, args: argparse.Namespace) -> None:
    ctx.session.rename_slot(args.old, args.new)
    print(f"renamed slot {args.old!r} to {args.new!r}")


def _diff_parser() -> CommandParser:
    parser = CommandParser("%slot diff", "Where two slots' histories part, and what each has had since.")
    parser.add_argument("a", help="one slot")
    parser.add_argument("b", help="the other slot")
    return parser


def _diff(ctx: Context, args: argparse.Namespace) -> None:
    print(ctx.session.history.diff(args.a, args.b).to_text())


def _export_parser() -> CommandParser:
    parser = CommandParser("%slot export", "Write a slot's whole branch history to a Markdown or JSON file.")
    parser.add_argument("id", nargs="?", help="the slot (default: current)")
    parser.add_argument("--to", metavar="FILE", required=True, help="FILE.md or FILE.json")
    return parser


def _export(ctx: Context, args: argparse.Namespace) -> None:
    slot = ctx.session.slot(args.id)
    path = ctx.session.history.export(args.to, slot.id)
    print(f"exported slot {slot.id!r} ({plural(slot.meta.message_count, 'message')}) to {path}")


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("list", _list_parser, _list, kind="reads"),
        Command("tree", _tree_parser, _tree, kind="reads"),
        Command("create", _create_parser, _create),
        Command("switch", _switch_parser, _switch, slot_positionals=1),
        Command("derive", _derive_parser, _derive, slot_args=("--from",)),
        Command("delete", _delete_parser, _delete, slot_positionals=1),
        Command("show", _show_parser, _show, slot_positionals=1, kind="reads"),
        Command("preview", _preview_parser, _preview, slot_positionals=1, kind="reads"),
        Command("budget", _budget_parser, _budget, slot_positionals=1, kind="reads"),
        Command("compact", _compact_parser, _compact, slot_positionals=1),
        Command("tools", _tools_parser, _tools, kind="reads"),
        Command("session", _session_parser, _session, kind="runs"),
        Command("rename", _rename_parser, _rename, slot_positionals=1),
        Command("diff", _diff_parser, _diff, slot_positionals=2, kind="reads"),
        Command("export", _export_parser, _export, slot_positionals=1, kind="runs"),
        Command("compare", compare_parser, compare, slot_positionals=6, kind="reads"),
        *explore_commands(),
        *notebook_commands(),
        *mcp_commands(),
    )
}


TABLE = CommandTable(
    "%slot",
    COMMANDS,
    header=(
        "usage: %slot [SUBCOMMAND] [ARGS]   (each subcommand takes --help)",
        "A '#' standing alone starts a comment: %slot derive draft  # a firmer tone",
        "",
    ),
    default=_status,
    default_parser=_status_parser,
)


def overview() -> str:
    """``%slot --help``: every subcommand with its summary, generated from the parsers."""
    return TABLE.overview()


def dispatch(line: str) -> Dispatched | None:
    """Parse a ``%slot`` line into its handler and arguments; None when help was printed."""
    return TABLE.dispatch(split_line(line))
