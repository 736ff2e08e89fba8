"""What the kernel's cells did, by execution count: the exception each raised (``Err[n]``,
``%slot explain``) and the images each displayed (``--attach Out[n]`` for a plot shown, not
returned).

Exceptions are taken from ``post_run_cell``'s ``ExecutionResult`` (``error_in_exec`` /
``error_before_exec``), which IPython fills for every cell whatever shows the traceback; images
from the display publisher, whose ``publish`` is wrapped while the extension is loaded.
"""

from __future__ import annotations

import base64
import functools
import io
import keyword
import linecache
import re
import sys
import time
import tokenize
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell

from .._attach import summarize_within
from .publishing import publishing_through

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_IPYTHON = str(Path(sys.modules["IPython"].__file__ or "").parent)
MAX_TRACEBACK = 4000  # characters: the end of a longer one is kept (where the error is)
MAX_FRAMES = 12
MAX_VARIABLES = 10
REPR_CHARS = 300  # of each variable's summary
REPR_SECONDS = 2.0  # for all the summaries of one error: a slower repr is replaced by a note
_KEPT_ERRORS = 100  # the latest errors kept; older ones are dropped
_KEPT_VALUES = 20  # the latest errors that keep the objects their lines name (memory: a frame's big locals)
_IMAGE_TYPES = ("image/png", "image/jpeg")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class CellError:
    """An exception a cell raised: the cell, the traceback (no ANSI, bounded) and the
    variables its failing lines name.

    The variables are kept as objects (as ``Out[n]`` keeps a cell's value) and summarized only
    when the error is read (``Err[n]``, ``--error``, ``%slot explain``), each ``repr`` bounded
    in time and size: a failing cell nobody asks about calls no ``repr`` at all."""

    count: int | None
    cell: str
    kind: str
    message: str
    traceback: str
    named: tuple[tuple[str, object], ...] = field(default=(), repr=False, compare=False)
    let_go: tuple[str, ...] = ()  # the names whose objects were let go (an older error's) unsummarized

    def __str__(self) -> str:
        return self.describe()

    @functools.cached_property
    def variables(self) -> tuple[tuple[str, str], ...]:
        """(name, summary) of each variable named, made once, when first asked: within
        :data:`REPR_SECONDS` in all (a repr that takes longer is replaced by a short note)."""
        deadline = time.monotonic() + REPR_SECONDS
        out = []
        for name, value in self.named:
            left = deadline - time.monotonic()
            if left <= 0:
                out.append((name, f"{type(value).__name__}: (not shown: the time for summaries ran out)"))
            else:
                out.append((name, summarize_within(value, chars=REPR_CHARS, seconds=left)))
        return tuple(out)

    def describe(self) -> str:
        """The error as the model reads it (``Err[n]``, ``%%turn --error``, ``%slot explain``)."""
        where = f"In[{self.count if self.count is not None else '?'}]"
        lines = [f"{self.kind}: {self.message}" if self.message else self.kind, "", f"Cell {where}:", "```python"]
        lines += [self.cell.rstrip(), "```", "", "Traceback:", "```", self.traceback.rstrip(), "```"]
        if self.variables:
            lines += ["", "Variables it names:"]
            lines += [f"- {name}: {summary}" for name, summary in self.variables]
        elif self.let_go:
            kept = f"only the latest {_KEPT_VALUES} errors keep the variables they name"
            lines += ["", f"Variables it names: {', '.join(self.let_go)} (not shown: {kept})"]
        return "\n".join(lines)

    def letting_go(self) -> CellError:
        """This error without the objects its lines name (their summaries kept, if made)."""
        if not self.named:
            return self
        kept = replace(self, named=(), let_go=tuple(name for name, _ in self.named))
        if "variables" in self.__dict__:  # summarized already: what was shown stays
            kept.__dict__["variables"] = self.__dict__["variables"]
        return kept


def _frames(shell: InteractiveShell, exc: BaseException) -> list[tuple[str, traceback.FrameSummary, Any]]:
    """(where, frame summary, frame) of the traceback, IPython's own frames left out."""
    out = []
    tb = exc.__traceback__
    for frame, _ in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith(_IPYTHON):
            continue
        named = shell.compile.format_code_name(filename) if hasattr(shell.compile, "format_code_name") else None
        where = f"{named[0]} {named[1]}" if named else f'File "{filename}"'
        summary = traceback.FrameSummary(filename, frame.f_lineno, frame.f_code.co_name, lookup_line=False)
        out.append((where, summary, frame))
    return out


def _line(frame: Any) -> str:
    """The source line a frame was at (IPython puts each cell's text in linecache)."""
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()


def _names(line: str) -> Iterator[str]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.NAME:
                yield token.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return


def describe_exception(
    shell: InteractiveShell, exc: BaseException, cell: str, count: int | None, namespace: Mapping[str, Any]
) -> CellError:
    """An exception as a :class:`CellError`: frames in IPython left out, the last
    :data:`MAX_FRAMES` kept, ANSI stripped, the text bounded to :data:`MAX_TRACEBACK`."""
    frames = _frames(shell, exc)
    lines: list[str] = []
    if len(frames) > MAX_FRAMES:
        lines.append(f"  … {len(frames) - MAX_FRAMES} earlier frames")
    wanted: dict[str, object] = {}
    for where, summary, frame in frames[-MAX_FRAMES:]:
        source = _line(frame)
        lines.append(f"  {where}, line {summary.lineno}, in {summary.name}")
        if source:
            lines.append(f"    {source}")
        for name in _names(source):
            if name in wanted or len(wanted) >= MAX_VARIABLES or name in _KEYWORDS:
                continue
            scope = frame.f_locals if name in frame.f_locals else namespace
            if name in scope and not _boring(scope[name]):
                wanted[name] = scope[name]  # summarized when the error is read, if ever
    if isinstance(exc, SyntaxError) and not frames:
        lines += [s.rstrip("\n") for s in traceback.format_exception_only(type(exc), exc)[:-1]]
    text = strip_ansi("\n".join(lines))
    if len(text) > MAX_TRACEBACK:
        text = "…" + text[-MAX_TRACEBACK:]
    try:
        message = strip_ansi(str(exc))
    except Exception as failed:  # an exception whose __str__ fails still has a kind
        message = f"(its message could not be read: {type(failed).__name__})"
    if len(message) > 1000:
        message = message[:1000] + "…"
    return CellError(count, cell, type(exc).__name__, message, text, tuple(wanted.items()))


_KEYWORDS = frozenset(keyword.kwlist) | {"print", "len", "range", "str", "int", "float", "list", "dict"}


def _boring(value: object) -> bool:
    """Modules, classes and functions say nothing about what went wrong with the data."""
    import types

    return isinstance(value, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType))


@dataclass
class KernelCells:
    """The errors and images of this kernel's cells, by execution count."""

    shell: InteractiveShell
    errors: dict[int, CellError] = field(default_factory=dict)
    images: dict[int, list[bytes]] = field(default_factory=dict)
    last_error: CellError | None = None
    # Images the cell running now showed, kept under its execution count when it ends (the
    # count a cell runs under is known for sure only then: IPython 9 moves it on earlier than 8).
    _shown: list[bytes] | None = None
    _hook: ExitStack = field(default_factory=ExitStack)  # our display hook while attached
    _forward: Callable[..., Any] | None = None  # the publish our hook stands in front of

    def attach(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self._forward = self._hook.enter_context(publishing_through(self.shell, self.publish))

    def detach(self) -> None:
        for event, hook in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            with suppress(ValueError):  # already gone
                self.shell.events.unregister(event, hook)
        self._hook.close()  # what was installed before ours, again

    def publish(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        """Every display of the shell passes here: its images are kept for ``Out[n]``."""
        self.record_display(data)
        assert self._forward is not None
        return self._forward(data, *args, **kwargs)

    def pre_run_cell(self, info: ExecutionInfo) -> None:
        self._shown = [] if info.store_history else None

    def post_run_cell(self, result: ExecutionResult) -> None:
        exc = result.error_in_exec or result.error_before_exec
        count = result.execution_count  # None when run without history (nbval): no Err[n] then
        if self._shown and count is not None:
            self.images[count] = self._shown
        self._shown = None
        if exc is None or isinstance(exc, UsageError):
            return  # a magic's one-line usage message (this extension's too) is no error to explain
        cell = (result.info.raw_cell if result.info is not None else "") or ""
        error = describe_exception(self.shell, exc, cell, count, self.shell.user_ns)
        self.last_error = error
        if count is None:
            return
        self.errors[count] = error
        while len(self.errors) > _KEPT_ERRORS:
            del self.errors[min(self.errors)]
        for old in sorted(self.errors)[:-_KEPT_VALUES]:
            self.errors[old] = self.errors[old].letting_go()

    def record_display(self, data: Any) -> None:
        if self._shown is None or not isinstance(data, Mapping):
            return
        for kind in _IMAGE_TYPES:
            found = data.get(kind)
            if isinstance(found, str):
                with suppress(ValueError):  # not base64: not an image to keep
                    self._shown.append(base64.b64decode(found))
                break
            if isinstance(found, bytes):
                self._shown.append(found)
                break

    def error_mapping(self) -> ErrMapping:
        return ErrMapping(self.errors)


class ErrMapping(Mapping[int, str]):
    """``Err[n]``: the error cell ``n`` raised, as the model reads it, described when it is
    read; a KeyError names the cells that raised one."""

    def __init__(self, errors: Mapping[int, CellError]) -> None:
        self._errors = dict(errors)

    def __getitem__(self, key: object) -> str:
        error = self._errors.get(key) if isinstance(key, int) else None
        if error is None:
            known = ", ".join(str(n) for n in sorted(self._errors)) or "none so far"
            raise KeyError(f"cell {key} raised no error (cells that did: {known})")
        return error.describe()

    def __iter__(self) -> Iterator[int]:
        return iter(self._errors)

    def __len__(self) -> int:
        return len(self._errors)

    def __repr__(self) -> str:
        return f"<Err: the errors of cells {', '.join(str(n) for n in sorted(self._errors)) or '(none so far)'}>"
