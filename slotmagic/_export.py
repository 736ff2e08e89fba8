"""Writing a slot's whole branch history to a file: Markdown to read, JSON to process."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._core.checks import check_text
from ._core.images import Image, parts
from ._core.messages import Message
from ._errors import ConfigError
from ._namespace import Namespace
from ._store.base import Store

FORMATS = (".md", ".json")


def branch_record(store: Store, session_id: str, slot: str) -> dict[str, Any]:
    """The slot's config and every message of its history (inherited ones included), with
    the turns that added them."""
    found = store.slot(session_id, slot)
    history = store.history(session_id, found.id)
    namespace = Namespace(store, session_id)  # large tool results are exported whole
    return {
        "session": session_id,
        "slot": found.id,
        "parent": found.meta.parent_id,
        "config": found.config.to_dict(),
        "messages": [_message(m) for m in namespace.expand(history.messages())],
        "turns": [
            {
                "number": t.number,
                "start": t.start,
                "count": t.count,
                "info": t.info.to_dict(),
                "created_at": t.created_at,
            }
            for t in history.turns()
        ],
    }


def _message(message: Message) -> dict[str, Any]:
    """A message as exported: an image as a ``data:`` URL (what a browser or an API reads)."""
    out = {**message.to_dict(), "tokens": message.tokens}
    if message.images:
        out["images"] = [
            {"url": i.data_url(), "media_type": i.media_type, "width": i.width, "height": i.height, "at": i.at,
             **({"label": i.label} if i.label else {})}
            for i in message.images
        ]  # fmt: skip
    return out


def _image(data: Mapping[str, Any]) -> Image:
    payload = str(data["url"]).partition(",")[2]
    return Image(str(data["media_type"]), payload, int(data["width"]), int(data["height"]), int(data.get("at") or 0),
                 str(data.get("label") or ""))  # fmt: skip


def _content(message: Mapping[str, Any], files: dict[str, bytes], folder: str) -> str:
    """A message's text with each image as a Markdown image of a file in ``folder`` (whose
    bytes go into ``files``), where it sits in the text."""
    text = str(message["content"])
    if not message.get("images"):
        return text.rstrip()
    pieces: list[str] = []
    for part in parts(text, [_image(i) for i in message["images"]]):
        if isinstance(part, Image):
            name = f"{folder}/image-{part.digest}{part.suffix}"
            files[name] = part.raw
            label = (part.label or "image").replace("]", "")
            pieces.append(f"\n\n![{label}]({name.replace(' ', '%20')})\n\n")
        else:
            pieces.append(part.text)
    return "".join(pieces).rstrip()


def to_markdown(record: dict[str, Any], folder: str = "images", files: dict[str, bytes] | None = None) -> str:
    """The record as Markdown; images are written as files (their bytes put in ``files``,
    under ``folder``, a path relative to the Markdown file) and shown where they were sent."""
    files = {} if files is None else files
    lines = [
        f"# Slot `{record['slot']}`",
        "",
        f"Session `{record['session']}`, mode {record['config']['mode']}"
        + (f", derived from `{record['parent']}`" if record["parent"] else "")
        + f", {len(record['messages'])} messages.",
        "",
    ]
    # Who made each turn (a team's store records it): named on the turn's first message where
    # more than one person made the slot's turns (one person's export reads as it always did).
    made_by = {t["start"]: t["info"]["user"] for t in record["turns"] if t["info"].get("user")}
    if len(set(made_by.values())) < 2:
        made_by = {}
    for position, message in enumerate(record["messages"]):
        title = message["role"] + (f" ({message['name']})" if message.get("name") else "")
        if position in made_by:
            title += f" · {made_by[position]}"
        lines += [f"## {title}", "", _content(message, files, folder), ""]
        for call in message.get("tool_calls") or ():
            lines += [f"Tool call `{call['name']}`: `{call['arguments']}`", ""]
    return "\n".join(lines)


def export_slot(store: Store, session_id: str, path: str | os.PathLike[str], slot: str) -> Path:
    """Write the slot's history to ``path``: ``.md`` or ``.json``, chosen by the suffix."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"export needs a file path ending in .md or .json, not {type(path).__name__}")
    text = check_text(os.fspath(path), "the export path")
    if "\x00" in text or not text.strip():
        raise ConfigError(f"cannot export to {text!r:.80}: name a file ending in .md or .json")
    target = Path(text)
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"cannot export to {target.name!r}: name a file ending in .md or .json")
    if not target.parent.is_dir():  # a typo in a folder's name makes no folder: say so
        raise ConfigError(
            f"cannot export to {target}: there is no folder {target.parent}; make it first, or name another"
        )
    record = branch_record(store, session_id, slot)
    files: dict[str, bytes] = {}
    if suffix == ".json":
        text = json.dumps(record, ensure_ascii=False, indent=2) + "\n"
    else:
        text = to_markdown(record, f"{target.stem}_files", files)  # images beside the Markdown file
    try:
        for name, raw in files.items():
            (target.parent / name).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            (target.parent / name).write_bytes(raw)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
