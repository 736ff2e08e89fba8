"""Writing a slot's whole branch history to a file: Markdown to read, JSON to process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .core.checks import check_text
from .errors import ConfigError
from .namespace import Namespace
from .store.base import Store

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
        "messages": [{**m.to_dict(), "tokens": m.tokens} for m in namespace.expand(history.messages())],
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


def to_markdown(record: dict[str, Any]) -> str:
    lines = [
        f"# Slot `{record['slot']}`",
        "",
        f"Session `{record['session']}`, mode {record['config']['mode']}"
        + (f", derived from `{record['parent']}`" if record["parent"] else "")
        + f", {len(record['messages'])} messages.",
        "",
    ]
    # Who made each turn (a team's store records it): named on the turn's first message.
    made_by = {t["start"]: t["info"]["user"] for t in record["turns"] if t["info"].get("user")}
    for position, message in enumerate(record["messages"]):
        title = message["role"] + (f" ({message['name']})" if message.get("name") else "")
        if position in made_by:
            title += f" · {made_by[position]}"
        lines += [f"## {title}", "", message["content"].rstrip(), ""]
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
    record = branch_record(store, session_id, slot)
    text = json.dumps(record, ensure_ascii=False, indent=2) + "\n" if suffix == ".json" else to_markdown(record)
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
