"""Writing a slot's whole branch history to a file: Markdown to read, JSON to process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    import os

    from .session import Session

FORMATS = (".md", ".json")


def branch_record(session: Session, slot: str | None = None) -> dict[str, Any]:
    """The slot's config and every message of its history (inherited ones included), with
    the turns that added them."""
    slot_obj = session.slot(slot)
    messages = session.messages(slot_obj.id)
    return {
        "session": session.session_id,
        "slot": slot_obj.id,
        "parent": slot_obj.meta.parent_id,
        "config": slot_obj.config.to_dict(),
        "messages": [{**m.to_dict(), "tokens": m.tokens} for m in messages],
        "turns": [
            {"number": t.number, "start": t.start, "count": t.count, "info": t.info, "created_at": t.created_at}
            for t in session.turns(slot_obj.id)
        ],
    }


def to_markdown(session: Session, slot: str | None = None) -> str:
    record = branch_record(session, slot)
    lines = [
        f"# Slot `{record['slot']}`",
        "",
        f"Session `{record['session']}`, mode {record['config']['mode']}"
        + (f", derived from `{record['parent']}`" if record["parent"] else "")
        + f", {len(record['messages'])} messages.",
        "",
    ]
    for message in record["messages"]:
        title = message["role"] + (f" ({message['name']})" if message.get("name") else "")
        lines += [f"## {title}", "", message["content"].rstrip(), ""]
        for call in message.get("tool_calls") or ():
            lines += [f"Tool call `{call['name']}`: `{call['arguments']}`", ""]
    return "\n".join(lines)


def export_slot(session: Session, path: str | os.PathLike[str], slot: str | None = None) -> Path:
    """Write the slot's history to ``path``: ``.md`` or ``.json``, chosen by the suffix."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"cannot export to {target.name!r}: name a file ending in .md or .json")
    if suffix == ".json":
        text = json.dumps(branch_record(session, slot), ensure_ascii=False, indent=2) + "\n"
    else:
        text = to_markdown(session, slot)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
