"""The public surface: what `import slotmagic` exports, and what it does not drag in."""

from __future__ import annotations

import subprocess
import sys

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
