"""What the documentation generates from the code, so that it cannot drift from it:

- ``tutorials/``: the notebooks of ``notebooks/`` as they were committed, less each widget's view
  (which needs a widget manager): its static form, the output after it, is what the page shows
  (MyST-NB renders the stored outputs);
- ``reference/_settings.md``: every ``%config SlotMagic`` setting from the traitlets, with its
  kind, default, environment variable and help text.

Both are written at each build and ignored by git.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import nbformat
from sphinx.application import Sphinx

from tools.tutorials import committed_text, tutorials

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def copy_tutorials() -> None:
    target = DOCS / "tutorials"
    target.mkdir(exist_ok=True)
    wanted = {p.name: p for p in tutorials()}  # as git tracks and holds them: not a run's autosave
    for old in target.glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    for name, path in sorted(wanted.items()):
        notebook = nbformat.reads(committed_text(path), as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})]
        text = nbformat.writes(notebook) + "\n"
        copy = target / name
        if not copy.exists() or copy.read_text(encoding="utf-8") != text:
            copy.write_text(text, encoding="utf-8")  # unchanged files keep their time: Sphinx rebuilds less


def _cell(text: str) -> str:
    return " ".join(text.split())


def _default(value: Any) -> str:
    if value in ("", None, {}):
        return "(empty)" if value == "" else "(none)" if value is None else "{}"
    return f"`{value!r}`"


KINDS = {"Unicode": "text", "Bool": "True or False", "CInt": "a whole number", "CFloat": "a number", "Dict": "a dict"}


def settings_table() -> str:
    """The settings, as a Markdown definition list, with their defaults where no variable is
    set."""
    from slotmagic._magics.options import ENVIRONMENT, SlotMagicOptions

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SLOTMAGIC_")}
    try:
        options = SlotMagicOptions()
        entries = []
        for name, trait in sorted(SlotMagicOptions.class_traits(config=True).items()):
            help_text = trait.help or ""
            env = ENVIRONMENT.get(name)
            if " Env: " in help_text:  # the numeric settings' help names their variable last
                help_text, _, named = help_text.rpartition(" Env: ")
                env = env or named.rstrip(".")
            kind = KINDS.get(type(trait).__name__, type(trait).__name__.lower())
            facts = [kind, f"default {_default(getattr(options, name))}"]
            if env:
                facts.append(f"environment variable `{env}`")
            entries.append(f"`{name}`\n: {' · '.join(facts)}\n\n  {_cell(help_text)}\n")
    finally:
        os.environ.update(saved)
    return "\n".join(entries)


def generate(app: Sphinx, config: Any) -> None:
    copy_tutorials()
    table = DOCS / "reference" / "_settings.md"
    text = settings_table()
    if not table.exists() or table.read_text(encoding="utf-8") != text:
        table.write_text(text, encoding="utf-8")


def tables_as_text(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """A docstring may hold a Markdown table (ProviderSettings' is the registry's settings
    table, as ``help()`` shows it): shown as the text it is. Its settings' help quotes
    ``'provider:*'``, which reST would take for emphasis."""
    out: list[str] = []
    for line in lines:
        if line.startswith("|") and not (out and out[-1].startswith("    |")):
            out.extend(["::", ""])
        if line.startswith("|"):
            out.append("    " + line)
            continue
        if out and out[-1].startswith("    |") and line.strip():
            out.append("")
        out.append(re.sub(r":\*'", r":\\*'", line))  # a quoted 'provider:*' is no emphasis
    lines[:] = out


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", generate)
    app.connect("autodoc-process-docstring", tables_as_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
