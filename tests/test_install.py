"""A clone installs on a machine without Node.js: the JupyterLab sidebar is skipped with one
line (hatch_build.py), everything else is installed. The venv sees this machine's packages
(--system-site-packages), so only slotmagic itself is installed: the build backend comes from
PyPI, as for a user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

NODE = {"node", "nodejs", "npm", "npx", "corepack", "yarn", "jlpm"}


def path_without_node(tmp_path: Path) -> str:
    """A PATH with every command this one has, except Node.js's (and jlpm, which runs it)."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not Path(folder).is_dir():
            continue
        for entry in Path(folder).iterdir():
            target = shadow / entry.name
            if entry.name not in NODE and not target.exists() and not target.is_symlink():
                target.symlink_to(entry)
    return str(shadow)


def clone(tmp_path: Path) -> Path:
    """The tracked files of this checkout, as a fresh clone has them (no built sidebar)."""
    source = tmp_path / "slotmagic-clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


@pytest.mark.slow
def test_a_clone_installs_without_nodejs(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    source = clone(tmp_path)
    assert not (source / "slotmagic" / "labextension").exists()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), path_without_node(tmp_path)])
    assert subprocess.run(["which", "node"], env=env, capture_output=True).returncode != 0
    # -v: pip shows a build's output only when asked (the README says so too).
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-v", "--no-deps", "-e", "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    said = [line.strip() for line in output.splitlines() if "Node.js was not found" in line]
    assert said and said[0] == (
        "slotmagic: Node.js was not found, so the JupyterLab sidebar was not built; everything else "
        "works. To add it, install Node.js 20+ and run pip install -e . again."
    )
    assert not (source / "slotmagic" / "labextension").exists()
    # The clone is what the venv imports, and its magics load.
    check = "import slotmagic, slotmagic._magics; print(slotmagic.__file__)"
    found = subprocess.run([str(python), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(source / "slotmagic" / "__init__.py")
