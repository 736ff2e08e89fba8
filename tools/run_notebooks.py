"""Execute tutorial notebooks in place (outputs are what nbval compares against).

python tools/run_notebooks.py notebooks/*.ipynb
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def main(paths: list[str]) -> None:
    # Same conditions as under test: this checkout on the path, a throwaway store.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ["SLOTMAGIC_DB"] = str(Path(tempfile.mkdtemp()) / "state.sqlite3")
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        # As JupyterLab tells the kernel: the session is named after the notebook, as a user's is.
        os.environ["JPY_SESSION_NAME"] = str(Path(path).resolve())
        NotebookClient(
            notebook,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(Path(path).parent)}},
            # Widget outputs keep their text and HTML forms (what GitHub shows); the models'
            # state (their ES modules included) would only bloat the file.
            store_widget_state=False,
        ).execute()
        # What JupyterLab writes on save: a notebook saved otherwise shows as changed when opened.
        notebook.metadata["kernelspec"] = KERNELSPEC
        nbformat.write(notebook, path)
        print("executed", path)


if __name__ == "__main__":
    main(sys.argv[1:])
