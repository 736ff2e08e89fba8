"""The sidebar's pure TypeScript helpers (state → tree rows, number formats, state diffs,
kernel-status hints, message validation) have unit tests run by node's own test runner:
``jlpm test`` in ``labextension/``. This runs them with the Python suite.

Without Node.js they skip, except where SLOTMAGIC_REQUIRE_BROWSER is set (CI sets it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

LABEXTENSION = ROOT / "labextension"
# jlpm (the yarn that JupyterLab ships) comes with jupyter_builder, a JupyterLab dependency.
JLPM = [sys.executable, "-c", "import sys; from jupyter_builder.jlpm import main; sys.exit(main())"]


def jlpm(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JLPM, *args], cwd=LABEXTENSION, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_typescript_helpers() -> None:
    if shutil.which("node") is None:
        if os.environ.get("SLOTMAGIC_REQUIRE_BROWSER"):
            pytest.fail("Node.js is required here (SLOTMAGIC_REQUIRE_BROWSER is set)")
        pytest.skip("Node.js is not installed")
    if not (LABEXTENSION / "node_modules" / "typescript").is_dir():
        # A wheel installed from PyPI holds the built extension but not its node_modules.
        done = jlpm("install", "--immutable", timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = jlpm("test", timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    passed = re.search(r"^# pass (\d+)$", output, re.M)
    failed = re.search(r"^# fail (\d+)$", output, re.M)
    assert passed and failed, output[-2000:]
    assert int(failed.group(1)) == 0 and int(passed.group(1)) >= 20, output[-2000:]
