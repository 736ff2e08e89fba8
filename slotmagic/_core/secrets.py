"""Keeping secrets out of text: an API key out of a server's words, a URL's credentials out of
anything shown. Plain functions, below every layer that shows text it did not write (providers,
stores, the magics); the old places (:mod:`slotmagic.providers._transport`,
:mod:`slotmagic.providers._endpoint`) re-export them."""

from __future__ import annotations

import re

__all__ = ["REDACT_WINDOW", "masked_url", "redact"]

REDACT_WINDOW = 12  # a run this long of a secret's characters counts as (part of) the secret


def redact(text: str, secret: str) -> str:
    """``text`` with ``secret`` replaced, and every word holding a long piece of it too (a
    server that echoes part of a key, or text cut in the middle of one)."""
    if not secret:
        return text
    text = text.replace(secret, "[redacted]")
    if len(secret) < REDACT_WINDOW:
        return text
    pieces = {secret[i : i + REDACT_WINDOW] for i in range(len(secret) - REDACT_WINDOW + 1)}
    return re.sub(r"\S+", lambda m: "[redacted]" if any(p in m[0] for p in pieces) else m[0], text)


def masked_url(text: str) -> str:
    """``text`` with whatever stands where a URL's credentials would be replaced by ``***``.

    Works on anything a user may have typed, URL or not: everything between the scheme's
    ``//`` (or the start) and the last ``@`` goes, so a password holding ``/`` or ``@``
    cannot survive either.
    """
    if "@" not in text:
        return text
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    return (scheme + sep if sep else "") + "***@" + rest.rpartition("@")[2]
