"""The ``SlotMagic`` magics class: binds ``%slot``, ``%%turn``, ``%ctx`` and ``%%workflow`` to
the notebook's session.

It only parses (``slot_commands``, ``turn``, ``ctx_commands``, ``workflow_commands``), calls
the session through the workspace and binds results; its settings are the traitlets of
``SlotMagicOptions``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionInfo, InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from traitlets import TraitError, validate

from .._attach import attach_all
from .._core.attachments import Attached
from .._core.cells import CellOutput
from .._core.schema import ResponseSchema
from .._engine.plan.cells import NOT_SHOWN
from .._engine.run.fanout import FanOutResult
from .._engine.run.reply import Reply
from .._errors import ConfigError, SlotMagicError, StoreError
from .._markdown import code_blocks
from ..providers import parse_model
from ..session import Session
from ..widgets._live import live_widgets
from . import ctx_commands, workflow_commands
from .cells import KernelCells
from .command import Context, Dispatched
from .errors import user_errors
from .identity import CellIdentity, notebook_name, split_id, text_digest
from .options import SlotMagicOptions
from .parsing import HelpShown, strip_comment
from .publishing import publishing_through
from .recording import capture, check_record, emit
from .references import attach_values, fill, split_names
from .slot_commands import dispatch, overview
from .turn import parse_turn_line, run_turn, turn_parser
from .workspace import Workspace

_RESOURCE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S")  # --attach of an MCP resource's URI
_IDENTITY = "_slotmagic_cell_identity"  # the magics run in this kernel so far (identity.py)


def empty_turn_as_line(lines: list[str]) -> list[str]:
    """An input transformer: IPython refuses a cell magic with an empty body before the magic
    runs, so ``%%turn --help`` alone in a cell becomes the line magic ``%turn --help``."""
    if lines and lines[0].startswith("%%turn") and not "".join(lines[1:]).strip():
        return ["%" + lines[0][2:]]
    return lines


@magics_class
class SlotMagic(Magics, SlotMagicOptions):
    """Context slots for conversations with language models: ``%slot`` and ``%%turn``."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell=shell)
        self.workspace = Workspace(shell)
        self.cells = KernelCells(shell)  # errors and images by cell: Err[n], --error, --attach Out[n]
        self._cell: ExecutionInfo | None = None  # the cell being run, for its id
        self._slot_lines = 0  # %slot lines run so far in that cell

    # -- plumbing ---------------------------------------------------------------------------

    def session(self) -> Session:
        with user_errors():
            session = self.workspace.session(self)
        assert self.shell is not None
        session.options.allow_variables(self.shell.user_ns)  # read_variable, when a turn opts in
        return session

    def remember_cell(self, info: ExecutionInfo) -> None:
        """pre_run_cell hook: JupyterLab sends each cell's id with its execution."""
        self._cell = info
        self._slot_lines = 0
        sent = getattr(info, "cell_id", None)
        self._identity().start_cell(sent if isinstance(sent, str) and sent else None, info.raw_cell or "")

    def _identity(self) -> CellIdentity:
        assert self.shell is not None
        found = getattr(self.shell, _IDENTITY, None)
        if found is None:  # on the shell: %reload_ext keeps counting
            found = CellIdentity()
            setattr(self.shell, _IDENTITY, found)
        return found

    def _scope(self, explicit: str | None, text: str, *, own: bool = False) -> str | None:
        """Where this magic's identity is (see ``identity.py``); None outside a kernel without
        ``--id`` (a terminal: it always acts)."""
        assert self.shell is not None
        identity = self._identity()
        if not explicit and identity.sent_cell(text) is None and getattr(self.shell, "kernel", None) is None:
            return None
        inputs = identity.texts[:-1]  # the cells run before this one (IPython's history may be off)
        if own:  # a turn of an unnamed notebook is known by its text too: another's is never its edit
            inputs.append(text)
        return identity.scope(explicit, text, notebook_name(self.notebook, self.shell.user_ns), inputs)

    def _cell_identity(self, explicit: str | None, cell: str) -> str | None:
        """Who this ``%%turn`` cell is, for replay: ``--id``, else the id the front end sent
        (JupyterLab, Notebook 7 and VS Code send one), else, in a kernel whose front end sends
        none (nbclient: nbconvert --execute, papermill), the notebook's name and its position
        among the turn cells run since the kernel started, so Run All in a new kernel finds
        each cell again. Outside a kernel (a terminal) a turn has no identity and always asks
        the model."""
        scope = self._scope(explicit, cell, own=True)
        key = self._identity().turn_key(scope or "")
        return None if scope is None else key

    def _run_command(self, magic: str, text: str, explicit: str | None, parsed: Dispatched, context: Context) -> None:
        """Run a command, or replay what it did when its cell ran first (_engine/plan/cells.py)."""
        assert self.shell is not None
        scope = self._scope(explicit, text)
        key = None if scope is None else self._identity().key(scope, magic, text)
        book = context.session.cells
        if key is not None:
            record = book.replay(key, parsed.kind, check_record)
            _say_damaged(book.damaged())
            if record is not None:
                reads = parsed.kind == "reads"
                emit(
                    self.shell,
                    record.outputs,
                    changed=book.changed_since(record),
                    follow=(lambda: self._live_widget(parsed, context)) if reads else None,
                )
                return
        with capture(self.shell) as outputs:
            parsed.handler(context, parsed.args)
        if key is not None:
            done = "done" if parsed.kind == "changes" else "shown"
            _keep_record(
                lambda: book.record(key, magic, parsed.kind, outputs),
                lambda exc: f"{magic} is {done}, but this cell's record was not ({exc}): run again, the cell acts anew",
            )

    def _live_widget(self, parsed: Dispatched, context: Context) -> Any:
        """Run a read again without showing anything; the live widget it made (None if it
        made none, or failed: the snapshot then stays as of its cell)."""
        assert self.shell is not None
        live = live_widgets(self.shell)
        if live is None:
            return None
        before = {id(w) for w in live.widgets()}
        with (
            publishing_through(self.shell, lambda *args, **kwargs: None),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.suppress(Exception),
        ):
            parsed.handler(context, parsed.args)
        made = [w for w in live.widgets() if id(w) not in before]
        return made[-1] if made else None

    def _bind(self, reply: Reply | FanOutResult) -> None:
        """Make the reply the cell's value (``_``, ``Out[n]``) without displaying it twice."""
        assert self.shell is not None
        hook = self.shell.displayhook
        hook.update_user_ns(reply)
        hook.fill_exec_result(reply)

    def close(self) -> None:
        self.cells.detach()
        self.workspace.close()

    @validate("model")
    def _check_model(self, proposal: Any) -> str:
        """A malformed model is refused when it is set, with the fix, not at the next turn."""
        try:
            parse_model(proposal["value"])
        except SlotMagicError as exc:
            raise TraitError(str(exc)) from None
        return str(proposal["value"])

    # -- magics -----------------------------------------------------------------------------

    @no_var_expand  # settings and names as written: "$1,200" stays
    @line_magic
    def slot(self, line: str) -> None:
        command, explicit = split_id(strip_comment(line))
        try:
            parsed = dispatch(command)
        except HelpShown:
            return
        if parsed is None:
            return
        session = self.session()
        # Which cell (and which of its %slot lines) runs this, so a %slot undo run again from the
        # same place does not undo twice.
        self._slot_lines += 1
        info = self._cell
        sent = getattr(info, "cell_id", None) if info is not None and line in (info.raw_cell or "") else None
        cell_id = f"{sent}#{self._slot_lines}" if sent else None
        with user_errors():
            context = Context(session, self, self.workspace.db_path(self), live_widgets(self.shell), cell_id, self)
            self._run_command("%slot", command, explicit, parsed, context)

    @no_var_expand  # options as written; the cell's text is never expanded
    @line_cell_magic
    def turn(self, line: str, cell: str | None = None) -> None:
        line = strip_comment(line)  # a comment is no part of the turn: editing one is no edit
        try:
            args = parse_turn_line(line)  # --help needs no session, no model and no body
        except HelpShown:
            return
        if cell is None or not cell.strip():
            raise UsageError("the turn is empty: write the message to send to the model")
        session = self.session()
        cell_id = self._cell_identity(args.id, cell)
        with user_errors():
            text, attachments = self._turn_input(args, cell, session)
            args.schema = self._schema(args.schema)
        key = None if cell_id is None else f"turn|{cell_id}|{text_digest(line + chr(10) + text)}"
        if key is not None and cell_id is not None and not args.rerun and args.slots is None and args.models is None:
            with user_errors():
                gone = session.cells.gone_turn(key, cell_id, args.slot or session.current_slot, check_record)
            _say_damaged(session.cells.damaged())
            if gone is not None:  # its turn was removed since (later in the notebook): shown as it was
                assert self.shell is not None
                emit(self.shell, gone.outputs)
                return
        assert self.shell is not None
        shown = NOT_SHOWN if key is None else session.cells.as_shown(key)
        _say_damaged(session.cells.damaged())
        with capture(self.shell) as outputs, user_errors():
            reply = run_turn(session, self, args, text, cell_id, attachments, shown)
        if key is not None:  # a read after it retraces only if it replayed
            _record_turn(session, key, reply, outputs)
        self._bind(reply)
        if args.code and isinstance(reply, Reply) and not reply.replayed:
            self.put_code(reply)

    def _schema(self, name: str | None) -> ResponseSchema | None:
        """``--schema NAME``: the pydantic model class or JSON schema dict of that name."""
        if name is None:
            return None
        assert self.shell is not None
        if name not in self.shell.user_ns:
            raise ConfigError(
                f"--schema {name}: no such name in this notebook; define a pydantic model class or a JSON schema "
                "dict by that name first; nothing was sent"
            )
        return ResponseSchema.of(self.shell.user_ns[name])

    def _turn_input(self, args: argparse.Namespace, cell: str, session: Session) -> tuple[str, tuple[Attached, ...]]:
        """The cell's text as sent (references filled in, the last error after it) and its
        attachments; one line (a ConfigError) when any of it cannot be made: nothing is sent."""
        assert self.shell is not None
        namespace = self.shell.user_ns
        extra = {"Err": self.cells.error_mapping()}
        text = cell if args.raw or not self.interpolate else fill(cell, namespace, extra)
        if args.error:
            error = self.cells.last_error
            if error is None:
                raise ConfigError("--error: no cell has raised an exception in this kernel yet; nothing was sent")
            text = f"{text.rstrip()}\n\n{error.describe()}"
        if not args.attach:
            return text, ()
        names = split_names(args.attach)
        if not names:
            raise ConfigError("--attach needs names: --attach df,fig,Out[7]")
        # A resource URI (demo://..., file:///...) is read from the MCP server that offers it.
        resources = {n: session.mcp.read(n) for n in names if _RESOURCE.match(n)}
        values = attach_values([n for n in names if n not in resources], namespace, self.cells.images, extra)
        return text, attach_all({**resources, **values}, threshold=session.options.namespace_threshold)

    def put_code(self, reply: Reply, block: int = 1) -> bool:
        """Put the reply's ``block``-th code block in a new cell below; say so when there is none."""
        assert self.shell is not None
        blocks = code_blocks(reply.text)
        if len(blocks) < block:
            has = f"only {len(blocks)} code block(s)" if blocks else "no code block"
            print(f"turn {reply.turn} of slot {reply.slot} holds {has}: no cell was made")
            return False
        self.shell.set_next_input(blocks[block - 1].rstrip("\n"), replace=False)
        return True

    def explain_turn(self, text: str, args: argparse.Namespace, cell_id: str | None) -> None:
        """``%slot explain``: a turn about an error, shown and bound like a ``%%turn`` cell's."""
        turn_args = parse_turn_line("")
        turn_args.slot, turn_args.model = args.slot, args.model
        reply = run_turn(self.session(), self, turn_args, text, cell_id)
        self._bind(reply)

    @no_var_expand  # natural text: "$1,200" and "{draft}" stay as written
    @line_magic
    def ctx(self, line: str) -> None:
        command, explicit = split_id(strip_comment(line, quotes='"', escape=False))
        try:
            parsed = ctx_commands.dispatch(command)
        except HelpShown:
            return
        if parsed is None:
            return
        session = self.session()
        with user_errors():
            self._run_command("%ctx", command, explicit, parsed, Context(session, self, self.workspace.db_path(self)))

    @no_var_expand  # step names and settings as written
    @line_cell_magic
    def workflow(self, line: str, cell: str | None = None) -> None:
        command, explicit = split_id(strip_comment(line))
        try:
            if cell is not None:  # a definition: its name only on the line
                name = workflow_commands.parse_cell_line(command)
                parsed: Dispatched | None = Dispatched(
                    lambda context, _: workflow_commands.define(context, name, cell), argparse.Namespace(), "changes"
                )
            else:
                parsed = workflow_commands.dispatch(command)
            if parsed is None:
                return
        except HelpShown:
            return
        context = Context(self.session(), self, self.workspace.db_path(self), live_widgets(self.shell))
        text = command if cell is None else f"{command}\n{cell}"
        with user_errors():
            self._run_command("%workflow" if cell is None else "%%workflow", text, explicit, parsed, context)


_RECORD_TRIES = 3  # a cell record written after its turn committed: tries before saying so


def _record_turn(session: Session, key: str, reply: Reply | FanOutResult, outputs: list[CellOutput]) -> None:
    """Keep the ``%%turn`` cell's record (its turn is already stored)."""
    slot, kept = (reply.slot, reply.notes) if isinstance(reply, Reply) else (None, ())
    _keep_record(
        lambda: session.cells.turn(key, _replayed(reply), outputs, slot, kept), lambda exc: _record_lost(reply, exc)
    )


def _keep_record(write: Callable[[], object], lost: Callable[[StoreError], str]) -> None:
    """Write a cell's record after what the cell did is done (a turn stored, a slot made): a
    record that cannot be written (the store's connection lost, a full disk) is tried again,
    then said in one line, never reported as the cell's failure."""
    for attempt in range(1, _RECORD_TRIES + 1):
        try:
            write()
            return
        except StoreError as exc:
            if attempt == _RECORD_TRIES:
                print(lost(exc), file=sys.stderr)
                return
            time.sleep(0.1 * attempt)


def _record_lost(reply: Reply | FanOutResult, exc: StoreError) -> str:
    """The line for a turn stored without its cell record: what is stored, and what a run
    again does (the turn's own plan finds it by its cell; the record held only what the cell
    printed around it)."""
    if isinstance(reply, Reply):
        stored = [f"turn {reply.turn} of slot {reply.slot}"]
    else:
        stored = [f"turn {c.reply.turn} of slot {c.reply.slot}" for c in reply.columns if c.reply is not None]
    if not stored:
        return f"this cell's record was not written ({exc})"
    what = f"the reply ({stored[0]}) is" if len(stored) == 1 else f"the replies ({', '.join(stored)}) are"
    again = "run again, the cell finds its turn but not the lines it printed"
    return f"{what} stored, but this cell's record was not ({exc}): {again}"


def _say_damaged(lines: list[str]) -> None:
    """One line per stored record skipped as unreadable (its cell acts anew), on stderr: not
    part of what the cell shows, so not kept in its new record."""
    for line in lines:
        print(line, file=sys.stderr)


def _replayed(reply: Reply | FanOutResult) -> bool:
    if isinstance(reply, Reply):
        return reply.replayed
    return bool(reply.columns) and all(c.reply is not None and c.reply.replayed for c in reply.columns)


def _document() -> None:
    """Docstrings from the parsers, so ``%slot?``, ``%%turn?``, ``%ctx?`` and ``%workflow?``
    cannot drift from them. Made when first asked: IPython's ``?`` calls an object's
    ``getdoc()`` first, and building every parser at import took ~10 ms of ``%load_ext``;
    ``__doc__`` itself says where the help is."""
    helps: dict[str, Callable[[], str]] = {
        "slot": overview,
        "turn": lambda: turn_parser().format_help(),
        "ctx": ctx_commands.overview,
        "workflow": lambda: workflow_commands.overview() + "\n\n" + workflow_commands.cell_parser().format_help(),
    }
    for name, made in helps.items():
        function = getattr(SlotMagic, name)
        function.__doc__ = f"%{name}: run %{name}? or %{name} --help for what it does and its options."
        function.getdoc = functools.cache(made)


_document()
