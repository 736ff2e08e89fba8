"""What a magic shows, kept and shown again: the outputs of a cell record (engine/cells.py).

While a command runs, what it prints and displays goes to the notebook as usual and is kept
too. A widget is kept as its static form (the output after its view, ``widgets/static.py``):
a replayed cell shows the widget as of its cell, and ``%slot tree`` (or any command) run by
hand shows it live again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..core.cells import CellOutput

__all__ = ["capture", "emit"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class _Tee:
    """A stream that writes through and keeps what was written."""

    def __init__(self, stream: Any, kept: list[CellOutput]) -> None:
        self._stream = stream
        self._kept = kept

    def write(self, text: str) -> int:
        if self._kept and self._kept[-1].kind == "stream":
            self._kept[-1] = CellOutput("stream", self._kept[-1].text + text)
        else:
            self._kept.append(CellOutput("stream", text))
        return int(self._stream.write(text) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def capture(shell: Any) -> Iterator[list[CellOutput]]:
    """Keep the outputs of the block (printed text, displayed mimebundles) as they are shown."""
    kept: list[CellOutput] = []
    publisher = shell.display_pub
    publish = publisher.publish
    ids: dict[str, int] = {}  # display id -> where its output is kept (an update replaces it)

    def keep(data: Mapping[str, Any], metadata: Mapping[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        teed, sys.stdout = sys.stdout, stdout  # a terminal's publisher prints: kept once, as a display
        try:
            done = publish(data, metadata, *args, **kwargs)
        finally:
            sys.stdout = teed
        if WIDGET_VIEW in data:  # the view of a live widget: its static form follows
            return done
        output = CellOutput("display", data=dict(data), metadata=dict(metadata or {}))
        display_id = (kwargs.get("transient") or {}).get("display_id")
        if kwargs.get("update") and display_id in ids:
            kept[ids[display_id]] = output
        else:
            if display_id:
                ids[display_id] = len(kept)
            kept.append(output)
        return done

    stdout = sys.stdout
    publisher.publish = keep
    sys.stdout = _Tee(stdout, kept)
    try:
        yield kept
    finally:
        sys.stdout = stdout
        if publisher.__dict__.get("publish") is keep:
            del publisher.publish


def emit(shell: Any, outputs: tuple[CellOutput, ...]) -> None:
    """Show kept outputs again, in order."""
    for output in outputs:
        if output.kind == "stream":
            sys.stdout.write(output.text)
        else:
            sys.stdout.flush()
            shell.display_pub.publish(data=dict(output.data), metadata=dict(output.metadata))
