"""What a magic shows, kept and shown again: the outputs of a cell record (_engine/plan/cells.py).

While a command runs, what it prints and displays goes to the notebook as usual and is kept
too. A widget is kept as its class and state, and its static form (the output after its view,
``widgets/_static.py``): a replayed cell rebuilds it as of its cell
(``widgets/_snapshot_widget.py``), with a way to follow the session live.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .._core.cells import CellOutput, CellRecord
from .._errors import DamagedRecord
from .._sanitize import clean_bundle, clean_metadata
from .publishing import publishing_through

__all__ = ["capture", "cell_count", "check_record", "emit"]

Follow = Callable[[], Any]  # runs a read again, quietly; returns the live widget it made

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_ID = re.compile(r"slotmagic-static-([0-9a-f]{32})")


class _Tee:
    """A stream that writes through and keeps what was written, a piece a write (``capture``
    joins neighbouring pieces at its end: joining at every write copied all the text so far,
    quadratic in a long printout)."""

    def __init__(self, stream: Any, kept: list[CellOutput]) -> None:
        self._stream = stream
        self._kept = kept

    def write(self, text: str) -> int:
        self._kept.append(CellOutput("stream", text))
        return int(self._stream.write(text) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def cell_count(shell: Any) -> int | None:
    """The execution count of the cell running now, as its prompt shows it (``In [n]``).

    ``shell.execution_count`` is the *next* count under IPython 9, which advances it before it
    runs the cell (8 advances it after), so the count is read from the result IPython fills
    for the cell while it runs; the shell's count only outside ``run_cell``."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(result, "execution_count", None)
    if isinstance(count, int):
        return count
    found = getattr(shell, "execution_count", None)
    return found if isinstance(found, int) else None


@contextmanager
def capture(shell: Any) -> Iterator[list[CellOutput]]:
    """Keep the outputs of the block (printed text, displayed mimebundles) as they are shown."""
    kept: list[CellOutput] = []
    ids: dict[str, int] = {}  # display id -> where its output is kept (an update replaces it)
    widgets: set[str] = set()  # the static ids of the widgets kept

    def keep_widget(found: Any) -> None:
        saved = _state(found)
        if saved is not None:
            count = cell_count(shell)
            pin = getattr(found, "pin", None)
            if callable(pin):  # a widget shows the session as of its cell, first run included
                pin(count)
            widgets.add(str(saved["static_id"]))
            kept.append(CellOutput("widget", data={**saved, "count": count}))

    def keep(data: Mapping[str, Any], metadata: Mapping[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        teed, sys.stdout = sys.stdout, stdout  # a terminal's publisher prints: kept once, as a display
        try:
            done = forward(data, metadata, *args, **kwargs)
        finally:
            sys.stdout = teed
        if WIDGET_VIEW in data:  # a live widget: kept as its state; its static form follows
            view = data[WIDGET_VIEW]
            keep_widget(_widget(view.get("model_id") if isinstance(view, Mapping) else None, None))
            return done
        static = STATIC_ID.search(str(data.get("text/html", "")))
        if static is not None and static.group(1) not in widgets:  # no view was shown (a terminal)
            keep_widget(_widget(None, static.group(1)))
        output = CellOutput("display", data=dict(data), metadata=dict(metadata or {}))  # cleaned at the end
        display_id = (kwargs.get("transient") or {}).get("display_id")
        if kwargs.get("update") and display_id in ids:
            kept[ids[display_id]] = output
        else:
            if display_id:
                ids[display_id] = len(kept)
            kept.append(output)
        return done

    stdout = sys.stdout
    with publishing_through(shell, keep) as forward:
        sys.stdout = _Tee(stdout, kept)
        try:
            yield kept
        finally:
            sys.stdout = stdout
            # kept as they will be shown again: through the same cleaning (_sanitize.py), once
            # each (a streamed reply's display is updated many times; its last form is kept)
            kept[:] = [_cleaned(o) for o in _joined(kept)]


def _joined(outputs: list[CellOutput]) -> list[CellOutput]:
    """The outputs with each run of printed pieces as one stream output, as it was shown."""
    joined: list[CellOutput] = []
    pieces: list[str] = []
    for output in outputs:
        if output.kind == "stream":
            pieces.append(output.text)
            continue
        if pieces:
            joined.append(CellOutput("stream", "".join(pieces)))
            pieces = []
        joined.append(output)
    if pieces:
        joined.append(CellOutput("stream", "".join(pieces)))
    return joined


def _cleaned(output: CellOutput) -> CellOutput:
    if output.kind != "display":
        return output
    return CellOutput("display", data=clean_bundle(output.data), metadata=clean_metadata(output.metadata))


def _widget(model_id: Any, static_id: str | None) -> Any:
    """The widget with this model id (or static form), if any."""
    try:
        from ipywidgets.widgets.widget import _instances  # type: ignore[import-untyped]
    except ImportError:
        return None
    found = _instances.get(model_id) if model_id is not None else None
    if found is None and static_id is not None:
        found = next((w for w in _instances.values() if getattr(w, "static_id", None) == static_id), None)
    return found


def _state(widget: Any) -> dict[str, Any] | None:
    """The class and state of a slotmagic widget, to rebuild it from (None: not one)."""
    if widget is None:
        return None
    try:
        from ..widgets._snapshot_widget import widget_state
    except ImportError:
        return None
    return widget_state(widget)


def check_record(record: CellRecord) -> None:
    """Raise :class:`DamagedRecord` when ``record`` holds what cannot be shown again as data (a
    widget this slotmagic cannot rebuild, or state not its own): the cell then acts anew."""
    for output in record.outputs:
        if output.kind == "widget":
            try:
                from ..widgets._snapshot_widget import checked_widget
            except ImportError:  # no widgets here: the static form that follows shows
                continue
            count = output.data.get("count")
            if count is not None and not isinstance(count, int):
                raise DamagedRecord("a stored widget's cell count is not a number", "cell")
            checked_widget(output.data)


def emit(shell: Any, outputs: tuple[CellOutput, ...], *, changed: bool = True, follow: Follow | None = None) -> None:
    """Show kept outputs again, in order; a widget as of its cell (``follow`` makes it live:
    at once when the session has not ``changed`` since)."""
    for output in outputs:
        if output.kind == "stream":
            sys.stdout.write(output.text)
            continue
        sys.stdout.flush()
        if output.kind == "widget":
            _show_snapshot(output, cell_count(shell), changed, follow)
            continue
        data = clean_bundle(output.data)  # a record is data: never markup or code (_sanitize.py)
        if data:
            shell.display_pub.publish(data=data, metadata=clean_metadata(output.metadata))


def _show_snapshot(output: CellOutput, count: int | None, changed: bool, follow: Follow | None) -> None:
    """A widget as of its cell (the cell running it again: ``count``, its prompt's number): a
    read's can follow the session live; a change's (the summary editor) stays as it was, since
    running its command again would act again."""
    from IPython.display import display

    from ..widgets._snapshot_widget import SnapshotWidget

    where = f"cell [{count}]" if isinstance(count, int) else "its cell"
    if follow is None:
        as_of = f"as of {where} · replayed: edit the cell to run it again"
    else:
        as_of = f"as of {where} · the session has changed since" if changed else ""
    # A widget from another slotmagic cannot be rebuilt: its static form, which follows, shows.
    with contextlib.suppress(ImportError, AttributeError, KeyError, TypeError, ValueError, DamagedRecord):
        display(SnapshotWidget(output.data, as_of, follow, count))
