"""Sphinx configuration of slotmagic's documentation: MyST Markdown pages, the tutorials from
notebooks/ rendered with their stored outputs (MyST-NB, nothing executed), the API reference
from docstrings (autodoc) and the configuration reference from the traitlets (_ext/).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (tests/test_docs.py
runs it, warnings as errors, and checks every link offline).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]

project = "slotmagic"
author = "The slotmagic developers"
copyright = "the slotmagic developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "slotmagic_docs"]
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "**/.slotmagic", "**/_*.md"]
html_theme = "furo"
html_title = "slotmagic"
html_static_path = ["_static"]
html_css_files = ["slotmagic.css"]  # the tutorials' outputs wrap at the column
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The tutorials as they were saved (tools/run_notebooks.py ran them): no kernel at build time.
nb_execution_mode = "off"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
suppress_warnings = ["myst.header"]
