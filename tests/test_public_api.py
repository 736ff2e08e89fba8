"""The public surface: what `import slotmagic` exports, and what it does not drag in."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import slotmagic
from tools.tutorials import committed_text, tutorials


def test_all_names_exist_and_are_sorted() -> None:
    for name in slotmagic.__all__:
        assert hasattr(slotmagic, name), name
    public = {n for n in dir(slotmagic) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(slotmagic.__all__), public - set(slotmagic.__all__)


def test_errors_form_one_hierarchy() -> None:
    for name in slotmagic.__all__:
        obj = getattr(slotmagic, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, slotmagic.SlotMagicError), name


def every_error() -> dict[str, type[Exception]]:
    """Every SlotMagicError class slotmagic defines, by name (all its modules imported first)."""
    for name in module_names():
        importlib.import_module(name)
    found: dict[str, type[Exception]] = {}
    pending: list[type[Exception]] = [slotmagic.SlotMagicError]
    while pending:
        cls = pending.pop()
        if not cls.__name__.startswith("_"):
            found[cls.__name__] = cls
        pending += cls.__subclasses__()
    return found


def drawn_tree() -> dict[str, str | None]:
    """The tree in slotmagic/_errors.py's docstring: each class's parent as drawn."""
    from slotmagic import _errors

    assert _errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in _errors.__doc__.splitlines():
        drawn = re.match(r"^    ((?:[│ ]   )*)(?:[├└]── )?([A-Z]\w+)(?:\s|$)", line)
        if drawn is None or not (line.startswith("    SlotMagicError") or "── " in line):
            continue
        depth = len(drawn.group(1)) // 4 + (1 if "── " in line else 0)
        assert depth <= len(path), f"drawn deeper than its parent: {line.strip()}"
        del path[depth:]
        parents[drawn.group(2)] = path[-1] if path else None
        path.append(drawn.group(2))
    return parents


def test_the_docstring_draws_every_error_under_its_parent() -> None:
    errors, drawn = every_error(), drawn_tree()
    assert set(drawn) == set(errors)
    for name, cls in errors.items():
        parent = next((b.__name__ for b in cls.__bases__ if issubclass(b, slotmagic.SlotMagicError)), None)
        assert drawn[name] == parent, (name, drawn[name], parent)


def test_every_error_a_user_can_catch_is_exported() -> None:
    """Each error of slotmagic._errors from ``slotmagic``; RankFileError from slotmagic.tokens,
    ServerDown from slotmagic.tools; the magics' and the widgets' own are caught and shown where
    they are raised."""
    import slotmagic.tokens
    import slotmagic.tools

    caught_inside = {"ReferenceFailed", "NotLoaded", "SlotGone"}
    for name, cls in every_error().items():
        if name in caught_inside:
            continue
        exported_by = next(
            (m for m in (slotmagic.tokens, slotmagic.tools) if cls.__module__.startswith(m.__name__)), slotmagic
        )
        assert name in exported_by.__all__ and getattr(exported_by, name) is cls, name


def test_importing_the_package_stays_light() -> None:
    code = "import sys, slotmagic; print(sorted(m for m in ('IPython', 'ipywidgets', 'httpx') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# The public modules and the names each promises: a name may be added here, never taken away.
# Every other module is private by name (a leading underscore on it or on a package above it).
PUBLIC: dict[str, set[str]] = {
    "slotmagic": {
        "Session",
        "SQLiteStore",
        "Message",
        "ContextBudget",
        "current_session",
        "recover",
        "tool",
        "CompactionNeeded",
        "DamagedRecord",
        "OverBudget",
        "ReplyTooLarge",
    },
    "slotmagic.session": {
        "Compactions",
        "Options",
        "Session",
        "SessionContext",
        "SessionHistory",
        "Workflows",
    },
    "slotmagic.providers": {
        "ChatRequest",
        "Completion",
        "FixedWindow",
        "KeyedEndpoint",
        "Message",
        "Provider",
        "ProviderSettings",
        "ProviderSpec",
        "SettingSpec",
        "TextDelta",
        "ToolSpec",
        "Usage",
        "cache_savings_of",
        "cost_of",
        "price_of",
        "window_for",
    },
    "slotmagic.tokens": {"Calibration", "TokenCounter", "image_tokens"},
    "slotmagic.tools": {"Tool", "ToolRegistry", "ToolResult", "default_registry", "tool"},
    "slotmagic.widgets": {
        "FanOutWidget",
        "SlotBudgetWidget",
        "SlotPreviewWidget",
        "SlotTreeWidget",
        "WorkflowWidget",
        "workflow_widget",
    },
}


def module_names() -> list[str]:
    package = Path(slotmagic.__file__).parent
    names = []
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_every_module_is_public_by_list_or_private_by_name() -> None:
    names = module_names()
    assert len(names) > 100 and "slotmagic._store.sqlite" in names  # the walk found the tree
    exposed = [n for n in names if n not in PUBLIC and not any(p.startswith("_") for p in n.split(".")[1:])]
    assert exposed == [], f"name these private (a leading underscore) or add them to PUBLIC: {exposed}"


def test_public_modules_keep_their_names_in_all() -> None:
    for name, promised in PUBLIC.items():
        module = importlib.import_module(name)
        exported = list(module.__all__)
        assert promised <= set(exported), (name, promised - set(exported))
        for attribute in exported:
            assert hasattr(module, attribute), (name, attribute)


def test_documentation_names_no_private_module() -> None:
    # what a user is told to import must be public: the guides, the reference, the tutorials
    root = Path(__file__).resolve().parent.parent
    private = re.compile(r"\bslotmagic(?:\.\w+)*\._\w+")
    found = []
    for path in [root / "README.md", *(root / "docs").rglob("*.md"), *tutorials()]:
        for line in (committed_text(path) if path.suffix == ".ipynb" else path.read_text()).splitlines():
            if re.search(r"\bimport\b|autoclass|autofunction|automodule", line) and private.search(line):
                found.append(f"{path.name}: {line.strip()}")
    assert found == []
