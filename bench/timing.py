"""The one way the benches time a call: milliseconds of wall time, the median of several runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def ms(fn: Callable[[], object]) -> float:
    """Milliseconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def median_ms(fn: Callable[[], object], samples: int) -> float:
    """The median of ``samples`` calls of ``fn``, in milliseconds."""
    return statistics.median(ms(fn) for _ in range(samples))
