"""Every example of the README and the docs runs as printed: each page's code blocks, in order,
in one new notebook in a real kernel on the echo model, fail on any error. Which blocks run,
and how a block not meant to run is marked: tests/docs_examples.py.

A page whose first example does not load the extension is read as the guide says: after
``%load_ext slotmagic``, with ``session`` the notebook's session."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from docs_examples import ROOT, Block, blocks, cells, pages, stray_markers
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

PRELUDE = "%load_ext slotmagic\nimport slotmagic\nsession = slotmagic.current_session()"
PAGES = [p.relative_to(ROOT).as_posix() for p in pages()]


def test_every_block_runs_or_says_why_not() -> None:
    problems = []
    for page in pages():
        name = page.relative_to(ROOT).as_posix()
        problems += [f"{name}:{line}: a 'not run' marker with no code block after it" for line in stray_markers(page)]
        for block in blocks(page):
            if block.not_run is not None and not block.not_run:
                problems.append(f"{block.where}: say why the block does not run: <!-- not run: why -->")
            elif (
                not block.directive
                and block.language not in ("", "python", "ipython")
                and block.not_run is None
                and any(line.lstrip().startswith("%") for line in block.text.splitlines())
            ):
                problems.append(
                    f"{block.where}: a {block.language} block holds magics: fence it as ipython to run it, "
                    "or mark it <!-- not run: why -->"
                )
            problems += [
                f"{block.where}: %load_ext is IPython's own magic and takes no comment: put it on a line of its own"
                for line in block.text.splitlines()
                if re.match(r"\s*%load_ext\s+\S+\s+#", line)
            ]
    assert not problems, "\n".join(problems)


def test_the_markdown_is_read_as_expected(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```\n%load_ext slotmagic\n%%turn\nHello\n\n%slot list\nx = 1\n```\n\n"
        "<!-- not run: needs an API key -->\n\n```python\nimport openai\n```\n\n"
        "- item\n\n  ```bash\n  ls\n  ```\n\n```{toctree}\nx\n```\n",
        encoding="utf-8",
    )
    got = [(b.line, b.language, b.runs, b.not_run) for b in _blocks_of(page, tmp_path)]
    assert got == [
        (3, "", True, None),
        (14, "python", False, "needs an API key"),
        (20, "bash", False, None),
        (24, "{toctree}", False, None),
    ]
    assert cells(_blocks_of(page, tmp_path)[0]) == ["%load_ext slotmagic", "%%turn\nHello", "%slot list\nx = 1"]


def _blocks_of(page: Path, root: Path) -> list[Block]:
    import docs_examples

    saved = docs_examples.ROOT
    docs_examples.ROOT = root
    try:
        return blocks(page)
    finally:
        docs_examples.ROOT = saved


def _kernel_env(tmp_path: Path, notebook: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # offline: no key reaches it
    env.update(
        SLOTMAGIC_DB=str(tmp_path / ".slotmagic" / "state.sqlite3"),
        SLOTMAGIC_MODEL="echo",
        JPY_SESSION_NAME=str(notebook),  # as JupyterLab tells the kernel
    )
    return env


@pytest.mark.slow
@pytest.mark.parametrize("name", [p for p in PAGES if any(b.runs for b in blocks(ROOT / p))])
def test_a_pages_examples_run(name: str, tmp_path: Path) -> None:
    runs = [block for block in blocks(ROOT / name) if block.runs]
    sources: list[tuple[Block | None, str]] = [(block, cell) for block in runs for cell in cells(block)]
    if not sources[0][1].startswith("%load_ext slotmagic"):
        sources.insert(0, (None, PRELUDE))
    notebook = tmp_path / (Path(name).stem + ".ipynb")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for _, source in sources]
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel(env=_kernel_env(tmp_path, notebook)):
        for index, (block, source) in enumerate(sources):
            where = block.where if block is not None else f"{name} (the prelude)"
            try:
                client.execute_cell(nb.cells[index], index)
            except CellExecutionError as exc:
                pytest.fail(f"{where}: {exc.ename}: {exc.evalue}\n--- the cell:\n{source}", pytrace=False)
            errors = [
                o.text
                for o in nb.cells[index].outputs
                if o.output_type == "stream" and o.name == "stderr" and "Error" in o.text
            ]
            assert not errors, f"{where}: the cell wrote an error:\n{''.join(errors)}\n--- the cell:\n{source}"


COLUMN = 86  # characters of code in the docs site's column at 1280 px (measured: tests/test_docs.py)


def test_code_lines_fit_the_column() -> None:
    """The README's and the guide's blocks read without scrolling sideways (development.md
    holds code of the package's own, at its own width)."""
    long = [
        f"{block.page}:{block.line + 1 + number}: {len(line)} characters (at most {COLUMN})"
        for page in pages()
        if page.name != "development.md"
        for block in blocks(page)
        if not block.directive
        for number, line in enumerate(block.text.splitlines())
        if len(line) > COLUMN
    ]
    assert not long, "\n".join(long)
