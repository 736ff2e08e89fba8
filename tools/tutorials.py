"""The tutorials as git holds them.

The tests and the docs build read the tutorials of ``notebooks/`` as they were committed, never
the working copy: JupyterLab autosaves a tutorial a user ran (its outputs, its counts, an edited
cell), and a notebook of one's own beside them is no tutorial. Outside a git checkout (an sdist)
the files are what there is.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _git(*args: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def in_git() -> bool:
    done = _git("rev-parse", "--is-inside-work-tree")
    return done is not None and done.returncode == 0 and done.stdout.strip() == b"true"


@functools.cache
def tracked_files() -> tuple[str, ...]:
    """Every file git tracks, relative to the checkout (empty outside git)."""
    done = _git("ls-files", "-z") if in_git() else None
    if done is None or done.returncode != 0:
        return ()
    return tuple(name for name in done.stdout.decode().split("\0") if name)


def tutorials() -> list[Path]:
    """The tutorial notebooks: those git tracks (every ``notebooks/*.ipynb`` outside git)."""
    if not in_git():
        return sorted(NOTEBOOKS.glob("*.ipynb"))
    names = [n for n in tracked_files() if n.startswith("notebooks/") and n.count("/") == 1 and n.endswith(".ipynb")]
    return sorted(ROOT / n for n in names)


def is_tutorial(path: Path) -> bool:
    return path.resolve() in {p.resolve() for p in tutorials()}


@functools.cache
def _committed(relative: str) -> str | None:
    done = _git("show", f"HEAD:{relative}") if in_git() else None
    if done is None or done.returncode != 0:
        return None
    return done.stdout.decode("utf-8")


def committed_text(path: Path) -> str:
    """A tutorial's text as committed (the file's own text outside git, or when it is new)."""
    found = _committed(path.resolve().relative_to(ROOT).as_posix())
    return found if found is not None else path.read_text(encoding="utf-8")


def changed(path: Path) -> bool:
    """Whether the working copy of a tutorial differs from its committed text."""
    return path.read_text(encoding="utf-8") != committed_text(path)


def changed_note(path: Path) -> str:
    """One line for a failure about a tutorial whose working copy was changed."""
    name = path.resolve().relative_to(ROOT).as_posix()
    return (
        f"{name} differs from its committed version (run or edited in JupyterLab?): the tests ran "
        f"the committed one; commit yours to test it, or `git checkout -- {name}` to drop it"
    )


def copy_committed(path: Path, folder: Path) -> Path:
    """The committed tutorial written into ``folder`` under its own name; the copy's path."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    target.write_text(committed_text(path), encoding="utf-8")
    return target
