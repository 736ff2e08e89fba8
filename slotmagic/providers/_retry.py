"""When to retry a failed request and how long to wait; shared by every HTTP provider.

Retried: HTTP 429 and 5xx, which a server may answer differently a moment later. Not retried:
other 4xx (the request itself is wrong, sending it again cannot help), timeouts (the timeout
already was the wait the user chose) and connections dropped mid-reply (part of the reply was
shown and may have been billed). Only a request that has not started streaming is repeated.

The wait doubles from ``base`` up to ``cap`` with jitter, so many clients throttled at once do
not come back in step, and is never shorter than the server's ``Retry-After``. A server that
asks for more than ``max_wait`` seconds is not waited for: the user hears about it at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


def is_retryable(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base: float = 0.5  # seconds before the first retry (before jitter)
    cap: float = 8.0  # longest computed backoff
    max_wait: float = 60.0  # longest Retry-After honoured; beyond it, give up

    def delay(self, attempt: int, retry_after: float | None = None, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        backoff = min(self.cap, self.base * 2.0**attempt)
        jittered = backoff * (0.5 + rand() / 2)  # "equal jitter": between half and all of it
        return max(jittered, retry_after or 0.0)

    def gives_up(self, status: int, attempt: int, retry_after: float | None = None) -> str | None:
        """Why the request that failed with ``status`` on ``attempt`` is not retried, or None."""
        if not is_retryable(status):
            return "not retried"
        if attempt >= self.max_retries:
            if attempt == 0:
                return "not retried (max_retries is 0)"
            return f"gave up after {attempt} {'retry' if attempt == 1 else 'retries'}"
        if retry_after is not None and retry_after > self.max_wait:
            return f"the server asks to wait {retry_after:.0f} s, longer than the {self.max_wait:.0f} s slotmagic waits"
        return None


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms`` (OpenAI), else ``Retry-After`` given as
    seconds or as an HTTP date. None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a naive parse result means the zone was missing
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
