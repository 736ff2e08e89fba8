"""The ``slotmagic`` command: ``slotmagic copy SRC DST`` moves sessions between stores.

A mistake is one line on stderr (exit status 2), never a traceback; credentials in a URL are
never printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._errors import SlotMagicError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slotmagic", description="slotmagic's command-line tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser(
        "copy",
        help="copy sessions between a SQLite file and PostgreSQL (either way), checking every message",
        description="Copy sessions from SRC to DST (state-file paths or postgresql://USER@HOST/DB?schema=NAME "
        "URLs), each verified by a checksum of every message. Sessions already in DST are never overwritten.",
    )
    copy.add_argument("source", metavar="SRC", help="where the sessions are")
    copy.add_argument("destination", metavar="DST", help="where they go (created if new)")
    copy.add_argument("--session", action="append", metavar="ID", help="copy only this session (repeatable)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ._copy import copy_sessions

    try:
        report = copy_sessions(args.source, args.destination, args.session)
    except SlotMagicError as exc:
        print(f"slotmagic copy: {exc}", file=sys.stderr)
        return 2
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
