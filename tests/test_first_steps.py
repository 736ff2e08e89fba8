"""What a newcomer meets first: the README's "try it" installs everything the tutorials import,
and the README and the docs are written for users (no run history: commit hashes, dates, load
figures), the README's speed section short."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import nbformat
import pytest
from docs_examples import FENCE, pages
from IPython.core.inputtransformer2 import TransformerManager

from conftest import ROOT
from tools.tutorials import committed_text, tutorials

README = ROOT / "README.md"


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def tutorial_imports() -> dict[str, set[str]]:
    """Top-level modules each tutorial imports, read from its code cells as IPython runs them."""
    found: dict[str, set[str]] = {}
    transform = TransformerManager().transform_cell
    for notebook in tutorials():
        for cell in nbformat.reads(committed_text(notebook), as_version=4).cells:
            if cell.cell_type != "code" or cell.source.lstrip().startswith("%%"):
                continue  # a cell magic's body is not Python
            for node in ast.walk(ast.parse(transform(cell.source))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(notebook.name)
    return found


def test_try_it_installs_what_the_tutorials_import() -> None:
    readme = README.read_text(encoding="utf-8")
    assert "pip install -e '.[tutorials]' && jupyter lab notebooks/01-getting-started.ipynb" in readme
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    installed = {_requirement_name(r) for r in project["dependencies"] + project["optional-dependencies"]["tutorials"]}
    assert "jupyterlab" in installed
    distributions = packages_distributions()
    missing = []
    for module, notebooks in sorted(tutorial_imports().items()):
        if module == "slotmagic" or module in sys.stdlib_module_names:
            continue
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & installed:
            missing.append(f"{module} (imported by {', '.join(sorted(notebooks))})")
    assert not missing, "the 'tutorials' extra does not install: " + ", ".join(missing)


def test_the_tutorials_import_what_the_check_reads() -> None:
    imports = tutorial_imports()  # the check above reads something: 07's DataFrame and figure
    assert imports["pandas"] == {"07-the-notebook-as-context.ipynb"}
    assert imports["matplotlib"] == {"07-the-notebook-as-context.ipynb"}


# -- docs for users ----------------------------------------------------------------------------

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
HISTORY = {
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "a date": re.compile(rf"\b\d{{1,2}} (?:{MONTHS})\b|\b(?:{MONTHS}) \d{{1,2}}\b|\b20\d\d-\d\d-\d\d\b"),
    "a time of day": re.compile(r"\b(?:at|,) \d{1,2}:\d\d\b"),
    "a load figure": re.compile(r"\bload \d|\bload averages?(?: of)? \d|\[\d\.\d\]"),
    "a run's history": re.compile(r"\b(?:an? )?earlier run|\bthe last run\b", re.I),
    "a development note": re.compile(r"\bthe issue\b|\bissue \d+", re.I),
}


def prose(page: Path) -> list[tuple[int, str]]:
    """A page's paragraphs outside code blocks (inline code may span lines), each with the
    number of its first line."""
    lines, out, fence = page.read_text(encoding="utf-8").splitlines(), [], ""
    paragraph: list[str] = []
    start = 0
    for number, line in enumerate(lines, 1):
        opening = FENCE.match(line)
        if fence:
            if line.strip() == fence:
                fence = ""
            continue
        if opening is not None:
            fence = opening["fence"]
        if opening is not None or not line.strip() or line.lstrip().startswith("|"):
            if paragraph:
                out.append((start, " ".join(paragraph)))
            paragraph = []
            if line.lstrip().startswith("|"):
                out.append((number, line))  # a table's row is a paragraph of its own
            continue
        if not paragraph:
            start = number
        paragraph.append(line.strip())
    if paragraph:
        out.append((start, " ".join(paragraph)))
    return out


def history_in(text: str) -> list[str]:
    """What in a line of prose is run history; inline code (an API's dated name, a file's
    published checksum) is an identifier, not history."""
    text = re.sub(r"`[^`]*`", "`…`", text)
    return [f"{what} ({found.group(0)!r})" for what, pattern in HISTORY.items() if (found := pattern.search(text))]


def test_the_docs_hold_no_run_history() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{number}: {', '.join(kinds)}"
        for page in pages()
        for number, line in prose(page)
        if (kinds := history_in(line))
    ]
    assert not found, (
        "run history in the docs (state a figure with its command and the kind of machine; "
        "keep history in bench/runs.json):\n" + "\n".join(found)
    )


def test_the_history_check_catches_what_it_should() -> None:
    for text in (
        "a run of commit b354ccc read 2 lines over",
        "on 6 December at 12:46",
        "December 6",
        "(7f2c9fd: the same code)",
        "2026-12-06",
        "load average 3.3 falling to 1.0",
        "| first turn [2.6] | 7 ms |",
        "an earlier run measured 484 µs",
        "not a target of the issue",
    ):
        assert history_in(text), text
    for text in (
        "`import slotmagic` adds about 65 ms",
        "128k → 8k / 80k",
        "`namespace://3f2a` references",
        "a SHA-256 of every message",
        "on a 2-core x86_64 Linux machine",
        "the load on the server grows",
        "a cold load of 10,000 messages",
        '`"compact-2026-01-12"` and `446a9538…1a2d`',
    ):
        assert not history_in(text), text


def test_the_readme_speed_section_is_short() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Speed and scale\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.strip()]
    assert 0 < len(lines) <= 8, f"the README's speed section has {len(lines)} lines (at most 8)"
    assert "python bench/run_all.py --full" in section and "2-core" in section


def test_run_history_is_kept_as_data() -> None:
    import json

    runs = json.loads((ROOT / "bench" / "runs.json").read_text(encoding="utf-8"))["runs"]
    assert runs and all(run["command"].startswith(("python bench/", "README")) for run in runs)


def test_the_guide_lists_every_tutorial_and_01_shows_the_session_a_user_gets() -> None:
    guide = (ROOT / "docs" / "guide" / "notebook.md").read_text(encoding="utf-8")
    missing = [p.stem for p in tutorials() if f"(../tutorials/{p.name})" not in guide]
    assert not missing, f"docs/guide/notebook.md does not list {missing}"
    first = ROOT / "notebooks" / "01-getting-started.ipynb"
    shown = "".join(
        "".join(o.get("text", ""))
        for c in nbformat.reads(committed_text(first), as_version=4).cells
        for o in c.get("outputs", [])
    )
    assert "session 01-getting-started.ipynb · " in shown and "session session-" not in shown
    for notebook in tutorials():  # no tutorial sends a reader to the README for what it does not hold
        assert "see the README" not in committed_text(notebook), notebook.name
