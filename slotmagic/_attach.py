"""Attachments: Python objects in a form a model reads well and the budget can afford.

- a pandas or polars DataFrame: its shape, the dtype of each column and a bounded Markdown
  excerpt (the first and last rows), the whole table (CSV) in the namespace store for the model
  to page through with ``read_namespace``;
- a matplotlib figure, a PIL image, an object with ``_repr_png_`` / ``_repr_jpeg_`` (IPython's
  ``Image``) or the bytes of a PNG, JPEG, GIF or WebP file: an image part;
- text, or any other object's ``repr``: as is when short, else its beginning and the whole in
  the namespace store.

Libraries are only imported when an object of theirs is attached (by the type's module name),
so none of them is needed to use slotmagic.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ._core.attachments import Attached
from ._core.image_check import check_image_file, is_svg
from ._core.images import MAX_IMAGE_BYTES, Image
from ._errors import ConfigError, exception_text
from ._namespace import DEFAULT_THRESHOLD, PREFIX, content_key

__all__ = ["attach", "attach_all", "summarize", "summarize_within"]

HEAD_ROWS = TAIL_ROWS = 5
MAX_COLUMNS = 20
CELL_CHARS = 40
EXCERPT_CHARS = 1500
TOOL = "attachment"  # the namespace "tool" attachments are kept under


def attach_all(attachments: object, *, threshold: int = DEFAULT_THRESHOLD) -> tuple[Attached, ...]:
    """``attachments=`` of a turn: a mapping of label to object, or a list of objects
    (labelled ``attachment 1``, …). ConfigError for an object that cannot be sent."""
    if attachments is None:
        return ()
    if isinstance(attachments, Attached):
        return (attachments,)
    if isinstance(attachments, Mapping):
        items = [(_label(label), value) for label, value in attachments.items()]
    elif isinstance(attachments, Sequence) and not isinstance(attachments, (str, bytes, bytearray)):
        items = [(f"attachment {n}", value) for n, value in enumerate(attachments, 1)]
    else:
        raise ConfigError(
            "attachments= takes a dict of label -> object ({'df': df}) or a list of objects, "
            f"not {type(attachments).__name__}"
        )
    return tuple(v if isinstance(v, Attached) else attach(v, label, threshold=threshold) for label, v in items)


def _label(label: object) -> str:
    """A label as text: one line when its ``str()`` fails or it is no valid Unicode."""
    try:
        text = str.__str__(str(label))
        text.encode("utf-8")
    except Exception as exc:
        raise ConfigError(
            f"an attachment's label ({type(label).__name__}) cannot be used as text ({type(exc).__name__}); "
            "label attachments with plain strings"
        ) from None
    return text


def attach(value: object, label: str, *, threshold: int = DEFAULT_THRESHOLD) -> Attached:
    """One object as an attachment named ``label``; ConfigError in one line, naming it, when
    it cannot be sent (text that is no valid Unicode, an empty or broken image, an SVG drawing,
    an object whose own rendering raises)."""
    try:
        made = _attach(value, label, threshold)
        made.text.encode("utf-8")
        for _, content in made.kept:
            content.encode("utf-8")
    except UnicodeEncodeError as exc:
        found = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else "?"
        raise ConfigError(
            f"{label}: its text holds {found!r}, a lone surrogate, which is not valid Unicode and cannot be sent; "
            "replace it (text.encode('utf-8', 'replace').decode()) and attach again"
        ) from None
    return made


def _attach(value: object, label: str, threshold: int) -> Attached:
    kind = _kind(value)
    if kind in ("pandas", "polars"):
        try:
            return _pandas(value, label, threshold) if kind == "pandas" else _polars(value, label, threshold)
        except UnicodeEncodeError:
            raise
        except Exception as exc:  # a column whose values' str() raises, say
            raise ConfigError(f"{label}: the {kind} DataFrame cannot be read ({_failure(exc)})") from None
    if is_svg_value(value):
        raise ConfigError(
            f"{label}: an SVG drawing; models take PNG, JPEG, GIF or WebP images: convert it first "
            "(cairosvg.svg2png(bytestring=svg), or save the figure as PNG) and attach that"
        )
    raw = _image_bytes(value, label)
    if raw is not None:
        if len(raw) <= MAX_IMAGE_BYTES:  # (a larger one is refused as such, unread)
            check_image_file(raw, label)
        image = Image.from_bytes(raw, label=label)
        text = f"Attached `{label}` ({_type_name(value)}): an image, {image.describe()}."
        return Attached(label, text, (image,))
    if isinstance(value, str):
        return _long_text(label, "text", str.__str__(value), threshold)
    return _long_text(label, _type_name(value), _repr(value), threshold)


def is_svg_value(value: object) -> bool:
    """SVG bytes, or an object that renders only as SVG (IPython's ``SVG``): an image no
    model takes. SVG *text* (a ``str``) is attached as the text it is."""
    if isinstance(value, (bytes, bytearray)):
        return is_svg(bytes(value))
    if isinstance(value, type) or not callable(getattr(value, "_repr_svg_", None)):
        return False
    return not any(callable(getattr(value, m, None)) for m in ("_repr_png_", "_repr_jpeg_", "savefig"))


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exception_text(exc, 160)}"


def summarize(value: object, *, chars: int = 600) -> str:
    """A variable's summary for a person or a model: type, shape or length, a bounded repr.
    Nothing is evaluated but the object's own ``repr`` (and ``shape`` / ``len``)."""
    parts = [_type_name(value)]
    try:
        shape = getattr(value, "shape", None)
    except Exception:  # a property that raises: no shape to tell
        shape = None
    if isinstance(shape, tuple):
        parts.append("shape " + "x".join(str(n) for n in shape))
    elif isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        parts.append(f"length {len(value):,}")
    text = _repr(value)
    cut = text if len(text) <= chars else text[:chars] + f"… ({len(text):,} characters in all)"
    return f"{', '.join(parts)}: {cut}"


def summarize_within(value: object, *, chars: int = 600, seconds: float = 1.0) -> str:
    """:func:`summarize` bounded in time: it runs in a thread of its own, and when it has not
    returned within ``seconds`` (a lazy frame's repr fetching its rows, a remote object, a
    ``__repr__`` that never returns) the caller gets a short note instead and goes on; the
    thread is left to finish on its own, holding nothing the caller waits for."""
    done: list[str] = []

    def run() -> None:
        try:
            done.append(summarize(value, chars=chars))
        except BaseException as exc:  # whatever a user's object raises is its own
            done.append(f"{_type_name(value)}: (could not be described: {type(exc).__name__})")

    thread = threading.Thread(target=run, name="slotmagic-summary", daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    if done:
        return done[0]
    return f"{_type_name(value)}: (not shown: its repr took over {seconds:.2g} s)"


# -- kinds ------------------------------------------------------------------------------------------


def _kind(value: object) -> str | None:
    module = type(value).__module__.split(".")[0]
    name = type(value).__name__
    if module == "pandas" and name == "DataFrame":
        return "pandas"
    if module == "polars" and name == "DataFrame":
        return "polars"
    return None


def _type_name(value: object) -> str:
    cls = type(value)
    module = cls.__module__.split(".")[0]
    return cls.__name__ if module == "builtins" else f"{module} {cls.__name__}"


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a broken __repr__ is the object's problem, not the turn's
        return f"<{_type_name(value)}: repr failed: {type(exc).__name__}>"


def _image_bytes(value: object, label: str) -> bytes | None:
    """The PNG/JPEG bytes of an image-like object, or None when it is not one; ConfigError
    when its own rendering raises or it is an empty image."""
    if isinstance(value, (bytes, bytearray)):
        if value[:4] in (b"\x89PNG", b"GIF8", b"RIFF") or value[:2] == b"\xff\xd8":
            return bytes(value)
        return None
    module = type(value).__module__.split(".")[0]
    try:
        if module == "matplotlib":
            figure: Any = value if hasattr(value, "savefig") else getattr(value, "figure", None)  # an Axes: its figure
            if figure is not None and hasattr(figure, "savefig"):
                buffer = io.BytesIO()
                figure.savefig(buffer, format="png")
                return buffer.getvalue()
        if module == "PIL" and hasattr(value, "save") and hasattr(value, "size"):
            pil: Any = value
            if 0 in tuple(pil.size):
                raise ConfigError(f"{label}: an empty image ({pil.size[0]}x{pil.size[1]} pixels); nothing to send")
            buffer = io.BytesIO()
            image = pil if pil.mode in ("RGB", "RGBA", "L", "LA", "P") else pil.convert("RGBA")
            image.save(buffer, format="PNG")
            return buffer.getvalue()
        for method in ("_repr_png_", "_repr_jpeg_"):
            found = getattr(value, method, None)
            if callable(found) and not isinstance(value, type):
                data = found()
                if isinstance(data, tuple) and data:  # (data, metadata)
                    data = data[0]
                if isinstance(data, str):
                    import base64

                    data = base64.b64decode(data, validate=True)
                if isinstance(data, (bytes, bytearray)) and data:
                    return bytes(data)
    except ConfigError:
        raise
    except Exception as exc:  # its own rendering (savefig, save, _repr_png_) raised
        raise ConfigError(f"{label}: making its image raised {_failure(exc)}; nothing was sent") from None
    return None


# -- text ------------------------------------------------------------------------------------------


def _kept(label: str, what: str, content: str) -> tuple[str, tuple[str, str]]:
    """The line that points the model to ``content`` in the namespace store, and the entry."""
    ref = f"{PREFIX}{TOOL}/{content_key(content)}"
    line = (
        f"The whole {what} ({len(content):,} characters) is kept at {ref}; "
        "read it with read_namespace(ref, offset, length)."
    )
    return line, (TOOL, content)


def _long_text(label: str, what: str, text: str, threshold: int) -> Attached:
    head = f"Attached `{label}` ({what}"
    if len(text.encode("utf-8")) <= threshold:
        return Attached(label, f"{head}):\n```\n{text}\n```")
    line, entry = _kept(label, "text" if what == "text" else "repr", text)
    excerpt = text[:EXCERPT_CHARS]
    return Attached(
        label, f"{head}, {len(text):,} characters; its beginning):\n```\n{excerpt}\n```\n{line}", (), (entry,)
    )


# -- tables ----------------------------------------------------------------------------------------


def _cell(value: object) -> str:
    text = " ".join(str(value).split()).replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[object]], index: Sequence[object] | None) -> list[str]:
    head = ([""] if index is not None else []) + [_cell(c) for c in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, row in enumerate(rows):
        cells = ([_cell(index[n])] if index is not None else []) + [_cell(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _table(
    label: str, kind: str, shape: tuple[int, int], dtypes: list[tuple[str, str]], excerpt: list[str], csv: str,
    threshold: int,
) -> Attached:  # fmt: skip
    rows, cols = shape
    shown = ", ".join(f"{name} ({dtype})" for name, dtype in dtypes[:MAX_COLUMNS])
    more = f", and {cols - MAX_COLUMNS} more" if cols > MAX_COLUMNS else ""
    lines = [
        f"Attached `{label}` ({kind} DataFrame): {rows:,} rows x {cols:,} columns.",
        f"Columns: {shown}{more}.",
        "",
        *excerpt,
    ]
    kept: tuple[tuple[str, str], ...] = ()
    if rows > HEAD_ROWS + TAIL_ROWS or cols > MAX_COLUMNS or len(csv.encode("utf-8")) > threshold:
        line, entry = _kept(label, "table as CSV", csv)
        lines += ["", line]
        kept = (entry,)
    return Attached(label, "\n".join(lines), (), kept)


def _rows(df: Any) -> list[tuple[object, ...]]:
    return [tuple(row) for row in df.itertuples(index=False, name=None)]  # each column its own type


def _pandas(df: Any, label: str, threshold: int) -> Attached:
    rows, cols = df.shape
    part = df.iloc[:, :MAX_COLUMNS]
    names = [str(c) for c in part.columns]
    if rows > HEAD_ROWS + TAIL_ROWS:
        head, tail = part.head(HEAD_ROWS), part.tail(TAIL_ROWS)
        excerpt = _markdown(names, _rows(head), list(head.index))
        excerpt.append(f"| … {rows - HEAD_ROWS - TAIL_ROWS:,} more rows … |")
        excerpt += _markdown(names, _rows(tail), list(tail.index))[2:]
    else:
        excerpt = _markdown(names, _rows(part), list(part.index))
    dtypes = [(str(c), str(t)) for c, t in df.dtypes.items()]
    return _table(label, "pandas", (rows, cols), dtypes, excerpt, df.to_csv(), threshold)


def _polars(df: Any, label: str, threshold: int) -> Attached:
    rows, cols = df.shape
    part = df.select(df.columns[:MAX_COLUMNS])
    names = list(part.columns)
    if rows > HEAD_ROWS + TAIL_ROWS:
        excerpt = _markdown(names, part.head(HEAD_ROWS).rows(), None)
        excerpt.append(f"| … {rows - HEAD_ROWS - TAIL_ROWS:,} more rows … |")
        excerpt += _markdown(names, part.tail(TAIL_ROWS).rows(), None)[2:]
    else:
        excerpt = _markdown(names, part.rows(), None)
    dtypes = [(name, str(dtype)) for name, dtype in df.schema.items()]
    return _table(label, "polars", (rows, cols), dtypes, excerpt, df.write_csv(), threshold)
