"""The public surface: what `import slotmagic` exports, and what it does not drag in."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import slotmagic


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


def test_importing_the_package_stays_light() -> None:
    code = "import sys, slotmagic; print(sorted(m for m in ('IPython', 'ipywidgets', 'httpx') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# The public modules and the names each promises: a name may be added here, never taken away.
# Every other module is private by name (a leading underscore on it or on a package above it).
PUBLIC: dict[str, set[str]] = {
    "slotmagic": {"Session", "SQLiteStore", "Message", "ContextBudget", "current_session", "recover", "tool"},
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
    for path in [root / "README.md", *(root / "docs").rglob("*.md"), *(root / "notebooks").glob("*.ipynb")]:
        for line in path.read_text().splitlines():
            if re.search(r"\bimport\b|autoclass|autofunction|automodule", line) and private.search(line):
                found.append(f"{path.name}: {line.strip()}")
    assert found == []
