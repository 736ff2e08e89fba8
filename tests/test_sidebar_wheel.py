"""The wheel ships the prebuilt JupyterLab extension: built and installed as the README says,
with no Node.js on PATH, ``jupyter labextension list`` shows it enabled."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

BUILT = ROOT / "slotmagic" / "labextension"
SHARE = "share/jupyter/labextensions/slotmagic"


def run(*command: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_the_wheel_installs_the_extension_without_node(tmp_path: Path) -> None:
    if not (BUILT / "static" / "style.js").exists():
        pytest.fail(
            f"the JupyterLab extension is not built in {BUILT}: pip install -e . (or jlpm build in labextension/)"
        )
    # Only Python's own folder on PATH: no node, no npm, no jlpm.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    env.pop("JUPYTER_PATH", None)
    run(sys.executable, "-c", "import shutil, sys; sys.exit(shutil.which('node') is not None)", env=env, cwd=tmp_path)

    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        str(tmp_path / "dist"),
        str(ROOT),
        env=env,
        cwd=tmp_path,
    )
    [wheel] = (tmp_path / "dist").glob("slotmagic-*.whl")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")  # the README's "Installing without Node.js"
    assert "pip wheel --no-deps -w dist ." in readme and f"pip install dist/{wheel.name} " in readme
    names = zipfile.ZipFile(wheel).namelist()
    data = [n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n]
    assert f"{SHARE}/package.json" in data and f"{SHARE}/install.json" in data
    assert f"{SHARE}/schemas/slotmagic/plugin.json" in data
    assert any(re.fullmatch(rf"{SHARE}/static/remoteEntry\.\w+\.js", n) for n in data)
    assert not [n for n in names if "node_modules" in n or n.endswith(".ts")]
    # the widgets' views, sent inline by anywidget: no build, nothing fetched
    for widget in ("tree", "budget", "preview", "workflow"):
        assert {f"slotmagic/widgets/{widget}.js", f"slotmagic/widgets/{widget}.css"} <= set(names), widget
    assert "slotmagic/widgets/common.css" in names

    # A fresh environment of its own (pip install --prefix would uninstall the running one's).
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", str(venv), env=env, cwd=tmp_path)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--no-deps",
        "-q",
        str(wheel),
        env=env,
        cwd=tmp_path,
    )
    data_dir = venv / "share" / "jupyter"
    assert (data_dir / "labextensions" / "slotmagic" / "install.json").is_file()
    # JupyterLab of the running environment, looking at the fresh one's data folder.
    listing = run(
        sys.executable,
        "-m",
        "jupyterlab.labextensions",
        "list",
        env={**env, "JUPYTER_PATH": str(data_dir), "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    plain = re.sub(r"\x1b\[[0-9;]*m", "", listing)
    section = plain.split(str(data_dir / "labextensions"), 1)[1].split("\n\n", 1)[0]
    assert re.search(r"slotmagic v[\d.]+ enabled OK \(python, slotmagic\)", section), plain
