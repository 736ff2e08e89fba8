"""Keeping secrets out of text: an API key out of a server's words, a URL's credentials out of
anything shown. Plain functions, below every layer that shows text it did not write (providers,
stores, the magics)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACT_WINDOW", "environment_secrets", "masked_url", "redact", "redact_all"]

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


# Environment variables whose values are secrets by their names: OPENAI_API_KEY,
# ANTHROPIC_API_KEY, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD, HF_TOKEN, …
_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(?:_|$)|PGPASSWORD")
_SHORTEST = 8  # a shorter value (a "1", a "true") is no secret worth a word of text


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the environment variables named as secrets are (``*_API_KEY``,
    ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, …): what a third party's text (a plugin's error,
    a server's) must never be shown with."""
    found = (os.environ if environ is None else environ).items()
    return tuple(v for k, v in found if len(v) >= _SHORTEST and _SECRET_NAME.search(k.upper()))


def redact_all(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and of :func:`environment_secrets` redacted: a line
    that quotes a third party's words passes here before it is shown, logged or stored."""
    for secret in (*secrets, *environment_secrets()):
        text = redact(text, secret)
    return text


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
