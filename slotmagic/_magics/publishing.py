"""Routing the shell's displays through a function of ours for a block.

Several parts of the extension hook ``shell.display_pub.publish``: the image recorder for a
session's lifetime (``Out[n]`` of a cell that showed a plot), a cell's capture while a magic
runs, a silent re-run that rebuilds a live widget. A block's hook must put back what was there
before it — deleting the attribute would drop a longer-lived hook along with its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_NONE = object()


@contextmanager
def publishing_through(shell: Any, publish: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """Displays in the block go to ``publish``; yields the publish it stands in front of (to
    forward to). Whatever was installed before is restored afterwards."""
    publisher = shell.display_pub
    installed = publisher.__dict__.get("publish", _NONE)
    forward = publisher.publish
    publisher.publish = publish
    try:
        yield forward
    finally:
        if publisher.__dict__.get("publish") is publish:  # not replaced meanwhile by someone else
            if installed is _NONE:
                del publisher.publish
            else:
                publisher.publish = installed
