"""Whether installed packages may register providers: a quick look before the slow one."""

from __future__ import annotations

import os

__all__ = ["group_may_be_named"]


def group_may_be_named(group: str) -> bool:
    """Whether any installed distribution may name ``group`` among its entry points: the
    entry_points.txt files on ``sys.path`` are searched for the name (~2 ms), so that
    ``importlib.metadata.entry_points`` (which parses every distribution's, ~20 ms at each
    ``import slotmagic``) runs only when one does. Anything this search cannot see (a zip on
    the path, an import hook that finds distributions) answers True: the full look decides."""
    import importlib.machinery
    import sys

    needle = group.encode()
    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder:
            return True
    for entry in sys.path:
        folder = entry or "."
        try:
            found = os.scandir(folder)
        except NotADirectoryError:
            return True  # a zip file: its distributions are read by importlib only
        except OSError:
            continue  # not there: nothing installed in it
        with found:
            for item in found:
                if not item.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(item.path, "entry_points.txt"), "rb") as f:
                        if needle in f.read():
                            return True
                except OSError:
                    continue
    return False
