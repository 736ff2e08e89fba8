"""The ``SlotMagic`` magics class: binds ``%slot`` and ``%%turn`` to the notebook's session.

It only parses (``slot_commands``, ``turn``), calls the session through the workspace and
binds results; its settings are the traitlets of ``SlotMagicOptions``.
"""

from __future__ import annotations

from IPython.core.interactiveshell import ExecutionInfo, InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..session import Session
from ..turns import Reply
from .errors import user_errors
from .options import SlotMagicOptions
from .parsing import HelpShown
from .slot_commands import Context, dispatch, overview
from .turn import run_turn, turn_parser
from .workspace import Workspace


@magics_class
class SlotMagic(Magics, SlotMagicOptions):
    """Context slots for conversations with language models: ``%slot`` and ``%%turn``."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell=shell)
        self.workspace = Workspace(shell)
        self._cell: ExecutionInfo | None = None  # the cell being run, for its id

    # -- plumbing ---------------------------------------------------------------------------

    def session(self) -> Session:
        with user_errors():
            return self.workspace.session(self)

    def remember_cell(self, info: ExecutionInfo) -> None:
        """pre_run_cell hook: JupyterLab sends each cell's id with its execution."""
        self._cell = info

    def _cell_id(self, cell: str) -> str | None:
        info = self._cell
        if info is None or not getattr(info, "cell_id", None):
            return None
        # A %%turn run by hand through run_cell_magic is not the cell being executed.
        return str(info.cell_id) if cell.strip() in (info.raw_cell or "") else None

    def _bind(self, reply: Reply) -> None:
        """Make the reply the cell's value (``_``, ``Out[n]``) without displaying it twice."""
        assert self.shell is not None
        hook = self.shell.displayhook
        hook.update_user_ns(reply)
        hook.fill_exec_result(reply)

    def close(self) -> None:
        self.workspace.close()

    # -- magics -----------------------------------------------------------------------------

    @line_magic
    def slot(self, line: str) -> None:
        try:
            parsed = dispatch(line)
        except HelpShown:
            return
        if parsed is None:
            return
        handler, args = parsed
        session = self.session()
        with user_errors():
            handler(Context(session, self, self.workspace.db_path(self)), args)

    @cell_magic
    def turn(self, line: str, cell: str) -> None:
        session = self.session()
        try:
            with user_errors():
                reply = run_turn(session, self, line, cell, self._cell_id(cell))
        except HelpShown:
            return
        self._bind(reply)


def _document() -> None:
    """Docstrings from the parsers, so ``%slot?`` and ``%%turn?`` cannot drift from them."""
    SlotMagic.slot.__doc__ = overview()
    SlotMagic.turn.__doc__ = turn_parser().format_help()


_document()
