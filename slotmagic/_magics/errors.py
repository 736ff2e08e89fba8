"""The one place slotmagic's own errors become IPython ``UsageError``s.

A ``SlotMagicError`` is a user mistake with a one-line message: IPython shows a
``UsageError`` as that line, without a traceback, and Run All stops there. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from IPython.core.error import UsageError

from .._errors import SlotMagicError


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except SlotMagicError as exc:
        raise UsageError(str(exc)) from None
