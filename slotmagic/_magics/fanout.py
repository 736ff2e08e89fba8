"""``%%turn --slots …`` / ``--models …``: one cell sent to several slots or models at once,
the replies streaming into columns side by side.

The columns are the fan-out widget when widgets are on, else one display area holding the
text and HTML forms; either way updated at most once per ``stream_throttle`` seconds, and
shown only once that much time has passed (a fan-out complete sooner is shown once, whole).
"""

from __future__ import annotations

import argparse
import sys
from time import monotonic
from typing import Any

from IPython.core.error import UsageError
from IPython.display import DisplayHandle, display

from .._columns import column_data, columns_html, columns_text
from .._core.attachments import Attached
from .._engine.run.fanout import FanOut, FanOutEvent, FanOutResult
from .._markdown import reply_html
from ..session import FanOutArgs, Session
from .options import SlotMagicOptions

__all__ = ["ColumnsView", "run_fan_out"]


class ColumnsView:
    """The fan-out's columns on screen, fed the events of its run."""

    def __init__(self, fanout: FanOut, *, live: bool, throttle: float, widgets: bool, metadata: dict[str, Any]) -> None:
        self.live = live
        self.throttle = throttle
        self.metadata = metadata
        self._chunks: list[list[str]] = [[] for _ in fanout.columns]
        self._columns = [
            column_data(c.target.key, c.target.slot, c.model, c.status, c.reply.text if c.reply else "")
            for c in fanout.columns
        ]
        for column, planned in zip(self._columns, fanout.columns, strict=True):
            if planned.error is not None:
                column["error"] = " ".join(str(planned.error).split())
        self._summary = f"{len(self._columns)} columns: waiting for the replies…"
        self._widget = _widget() if widgets else None
        self._handle: DisplayHandle | None = None
        self._last = monotonic()

    def event(self, event: FanOutEvent) -> None:
        column = self._columns[event.index]
        if event.kind == "start":
            column["status"] = "streaming"
        elif event.kind == "text":
            self._chunks[event.index].append(event.text)
        elif event.kind == "done":
            column["status"] = "done"
        else:
            column["status"], column["error"] = "failed", event.text
        self.tick()

    def tick(self) -> None:
        """Show the columns if it is time (also while no reply has said anything yet)."""
        if self.live and monotonic() - self._last >= self.throttle:
            self._last = monotonic()
            self._show()

    def finish(self, result: FanOutResult) -> None:
        for index, found in enumerate(result.columns):
            data = column_data(found.key, found.slot, found.model, "done", result=found)  # a replay says so below
            if found.error is not None:
                data["status"], data["error"] = "failed", " ".join(str(found.error).split())
            self._columns[index] = data
        self.metadata = {"slotmagic": {**self.metadata["slotmagic"], **result_metadata(result)}}
        self._chunks = [[] for _ in self._columns]  # the stored replies replace what streamed
        self._summary = result.summary()
        self._show(final=True)

    def interrupted(self, line: str) -> None:
        for column in self._columns:
            if column["status"] in ("waiting", "streaming", "done"):
                column["status"] = "interrupted"
        self._summary = line
        self._show(final=True)

    def _current(self) -> list[dict[str, Any]]:
        """The columns with the text streamed so far (joined and rendered only when shown:
        at most once a throttle interval)."""
        out = []
        for column, chunks in zip(self._columns, self._chunks, strict=True):
            text = "".join(chunks)
            out.append({**column, "text": text, "html": reply_html(text)} if chunks else column)
        return out

    def _show(self, final: bool = False) -> None:
        columns = self._current()
        if self._widget is not None:
            self._widget.show(columns, self._summary)
            if self._handle is None:  # the widget view, then its static form (widgets/_static.py)
                self._handle = self._widget.display_parts(self.metadata)
            elif final:  # the static form is that of the finished columns
                self._widget.update_static(self._handle, self.metadata)
            return
        data = {"text/plain": columns_text(columns, self._summary), "text/html": columns_html(columns, self._summary)}
        if self._handle is None:
            self._handle = display(data, raw=True, metadata=self.metadata, display_id=True)
        else:
            self._handle.update(data, raw=True, metadata=self.metadata)


def result_metadata(result: FanOutResult) -> dict[str, Any]:
    """Provenance for front-end code: each column's stored turn (or its error), and whether
    every column was replayed."""
    columns: list[dict[str, Any]] = []
    for found in result.columns:
        reply = found.reply
        if reply is None:
            columns.append({"key": found.key, "slot": found.slot, "model": found.model, "error": True})
        else:
            columns.append(
                {
                    "key": found.key,
                    "slot": reply.slot,
                    "turn": reply.turn,
                    "model": reply.model,
                    "replayed": reply.replayed,
                }
            )
    replayed = bool(columns) and all(c.get("replayed") for c in columns)
    return {"fan_out": columns, "replayed": replayed}


def _widget() -> Any:
    try:
        from ..widgets._fanout import FanOutWidget
    except ImportError:  # ipywidgets or anywidget missing: the text forms
        return None
    return FanOutWidget()


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def turn_args(args: argparse.Namespace, cell_id: str | None) -> FanOutArgs:
    """The options a ``%%turn`` line sets that one turn and a fan-out both take."""
    return {
        "cell_id": cell_id,
        "rerun": args.rerun,
        "model": args.model,
        "system": args.system,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "tools": () if args.no_tools else _names(args.tools),
        "schema": getattr(args, "schema", None),
    }


def run_fan_out(
    session: Session,
    options: SlotMagicOptions,
    args: argparse.Namespace,
    cell: str,
    cell_id: str | None,
    attachments: tuple[Attached, ...] = (),
) -> FanOutResult:
    """Plan the columns, stream them side by side, return the result (the cell's value);
    ``attachments`` go with the text to every column."""
    if args.slot is not None:
        raise UsageError("%%turn: --slot runs one slot and --slots several; use --slots alone (e.g. --slots a,b)")
    chosen: FanOutArgs = {**turn_args(args, cell_id), "attachments": attachments or None}
    fanout = session.plan_fan_out(cell.strip("\n"), slots=_names(args.slots), models=_names(args.models), **chosen)
    live = options.stream if args.stream is None else args.stream
    view = ColumnsView(
        fanout,
        live=live,
        throttle=options.stream_throttle,
        widgets=options.widgets,
        metadata={
            "slotmagic": {
                "session": session.session_id,
                "fan_out": [{"key": c.target.key, "slot": c.target.slot} for c in fanout.columns],
            }
        },
    )
    try:
        result = fanout.run_sync(view.event, view.tick)
    except KeyboardInterrupt:
        if fanout.result is not None:  # it came after the last reply was stored
            view.finish(fanout.result)
            print("interrupted after every reply was stored", file=sys.stderr)
            raise
        message = "interrupted: every column stopped, nothing was stored, every slot is as it was before the cell"
        view.interrupted(message)
        print(message, file=sys.stderr)
        raise
    view.finish(result)
    return result
