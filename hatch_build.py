"""Build hook run before jupyter-builder's: an editable install on a machine without Node.js
skips the JupyterLab sidebar with one clear line, instead of failing (as JupyterLab's extension
template allows with an optional editable build). Everything else works without it: the
magics, the widgets (shipped as ES modules, no build) and the stores.

A wheel or sdist still needs the built sidebar: it is built here when Node.js is found, else the
build fails (jupyter-builder's ``ensured-targets``), unless it was built before.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SKIPPED = (
    "slotmagic: Node.js was not found, so the JupyterLab sidebar was not built; everything else "
    "works. To add it, install Node.js 20+ and run pip install -e . again."
)


class SidebarHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        built = Path(self.root, "slotmagic", "labextension", "static", "style.js").exists()
        if version != "editable" or built or shutil.which("node") is not None:
            return
        os.environ["SKIP_JUPYTER_BUILDER"] = "1"  # jupyter-builder's hook runs next and skips
        # pip shows a build's output only with -v; the same line is said on %load_ext slotmagic.
        print(SKIPPED, file=sys.stderr)
