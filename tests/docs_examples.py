"""The code blocks of the README and the docs, as a reader pastes them into a notebook.

- A fenced block marked ``python``, ``ipython`` or with no language is an example that runs: the
  blocks of a page run in order in one new notebook, as cells. Within a block, a line that
  starts with ``%%`` (a cell magic: ``%%turn``, ``%%workflow``) begins a cell of its own, which
  ends at the next blank line; the other lines run together between them.
- Any other language (``bash``, ``text``, ``sql``, ``toml``, ``console``) is not Python and
  never runs; such a block must hold no magic line (a line starting with ``%``), which would
  be an example left out of the test.
- A block that shows Python or magics not meant to run (a module of one's own, a call that needs
  a real model) is marked on the line before its fence, with why:
  ``<!-- not run: needs an API key -->`` (an HTML comment: GitHub and the docs site show
  nothing of it).
- MyST directives (```` ```{toctree} ````, ```` ```{eval-rst} ````) are not examples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = frozenset({"", "python", "ipython"})
MARKER = re.compile(r"^\s*<!--\s*not run:\s*(?P<why>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # the fence's line, 1-based
    info: str  # the fence's info string
    text: str  # the block's lines, its indent removed
    not_run: str | None  # why, when marked not to run

    @property
    def language(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def directive(self) -> bool:
        return self.info.startswith("{")

    @property
    def runs(self) -> bool:
        return not self.directive and self.language in RUN and self.not_run is None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and the docs' own pages (not the build, the copied tutorials or generated files)."""
    docs = ROOT / "docs"
    found = [
        p
        for p in docs.rglob("*.md")
        if not {"_build", "tutorials"} & set(p.relative_to(docs).parts) and not p.name.startswith("_")
    ]
    return [ROOT / "README.md", *sorted(found)]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = index + 1
        while end < len(lines) and not re.match(rf"^\s*{re.escape(fence)}\s*$", lines[end]):
            end += 1
        body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[index + 1 : end]]
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marked = MARKER.match(before)
        found.append(
            Block(
                page=page.relative_to(ROOT).as_posix(),
                line=index + 1,
                info=opening["info"].strip(),
                text="\n".join(body),
                not_run=marked["why"] if marked else None,
            )
        )
        index = end + 1
    return found


def stray_markers(page: Path) -> list[int]:
    """Lines of markers that do not stand just before a fence (blank lines aside)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    stray = []
    for number, line in enumerate(lines):
        if MARKER.match(line):
            after = next((lines[i] for i in range(number + 1, len(lines)) if lines[i].strip()), "")
            if not FENCE.match(after):
                stray.append(number + 1)
    return stray


def cells(block: Block) -> list[str]:
    """The notebook cells a block is pasted as (see the module's docstring)."""
    out: list[list[str]] = []
    in_cell_magic = False
    for line in block.text.splitlines():
        if line.startswith("%%"):
            out.append([line])
            in_cell_magic = True
        elif in_cell_magic and not line.strip():
            in_cell_magic = False
            out.append([])
        elif not out:
            out.append([line])
        else:
            out[-1].append(line)
    return [text for text in ("\n".join(cell).strip("\n") for cell in out) if text.strip()]
