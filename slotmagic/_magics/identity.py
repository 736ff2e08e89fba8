"""Who a magic is, for replay: the key of its cell record (_engine/plan/cells.py) and of a turn.

A magic is named by its *scope* and its own text:

- ``--id NAME`` on the line: the scope is that name (any magic);
- the cell id the front end sends (JupyterLab, Notebook 7, VS Code): that cell;
- no cell id (nbclient: ``jupyter nbconvert --execute``, papermill): the notebook, named by
  ``%config SlotMagic.notebook`` or ``$SLOTMAGIC_NOTEBOOK``, else the path the front end or
  the runner tells, else the texts of the cells run before it in this kernel (so two
  unnamed notebooks on one session never share a key);
- outside a kernel (a terminal IPython) a magic has no identity: it always acts.

Within a scope, a command's key is its text and which of the scope's identical texts it is
(the first ``%slot compact``, the second...), so lines added or moved around it keep their
keys. A ``%%turn`` cell without a cell id keeps a position among the notebook's turn cells,
which is what lets an edited turn be recognised (and forked) in a headless run.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CellIdentity", "split_id", "text_digest"]

_ID = re.compile(r"(?:^\s*--id[ =](?P<a>\S+)(?:\s+|$))|(?:\s+--id[ =](?P<b>\S+)\s*$)")
NOTEBOOK_VARIABLE = "SLOTMAGIC_NOTEBOOK"


def split_id(line: str) -> tuple[str, str | None]:
    """A line without its ``--id NAME`` (first or last on the line), and that name."""
    found = _ID.search(line)
    if found is None:
        return line, None
    return line[: found.start()] + " " * bool(found.start() and found.end() < len(line)) + line[found.end() :], (
        found.group("a") or found.group("b")
    )


def text_digest(text: str) -> str:
    """A short digest of a cell's text, for keys."""
    return _digest(text)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass
class CellIdentity:
    """The identities of the magics run in one kernel (kept on the shell across %reload_ext)."""

    turn_cells: int = 0  # %%turn cells run without a cell id so far
    seen: dict[tuple[str, str], int] = field(default_factory=dict)  # (scope, text) -> times run
    cell: str | None = None  # the cell running now, as the front end named it
    cell_text: str = ""  # its text
    texts: list[str] = field(default_factory=list)  # the texts of the cells run so far, this one last

    def start_cell(self, cell_id: str | None, raw: str) -> None:
        """A cell starts: identical lines are counted again within it (within a headless
        notebook's whole run, whose cells have no identity of their own)."""
        self.cell, self.cell_text = cell_id, raw
        self.texts.append(raw)
        self.seen = {k: v for k, v in self.seen.items() if k[0].startswith("notebook:")}

    def sent_cell(self, text: str) -> str | None:
        """The cell id the front end sent, if ``text`` is in that cell (a magic called from
        code by ``run_line_magic`` in another cell is not that cell)."""
        return self.cell if self.cell and text.strip() in self.cell_text else None

    def scope(self, explicit: str | None, text: str, notebook: str | None, history: Sequence[str]) -> str:
        if explicit:
            return f"name:{explicit}"
        sent = self.sent_cell(text)
        if sent:
            return f"cell:{sent}"
        if notebook:
            return f"notebook:{notebook}"
        return f"texts:{_digest(*history)}"

    def key(self, scope: str, magic: str, text: str) -> str:
        """The key of a command's cell record: its scope, text and occurrence."""
        count = self.seen.get((scope, text), 0) + 1
        self.seen[(scope, text)] = count
        return f"{scope}|{magic}|{_digest(text)}|{count}"

    def turn_key(self, scope: str) -> str:
        """The identity of a ``%%turn`` cell: the cell's (or its name), else its position
        among the notebook's turn cells."""
        self.turn_cells += 1
        if scope.startswith("name:"):
            return scope
        if scope.startswith("cell:"):
            return scope.removeprefix("cell:")
        return f"position:{self.turn_cells}@{scope.removeprefix('notebook:')}"


def notebook_name(setting: str, user_ns: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str | None:
    """The notebook's own name for headless runs: the setting, else ``$SLOTMAGIC_NOTEBOOK``,
    else the path the front end sent (see ``workspace.notebook_path``)."""
    from .workspace import notebook_path, runner_notebook

    return setting or environ.get(NOTEBOOK_VARIABLE) or notebook_path(user_ns, environ) or runner_notebook(environ)
