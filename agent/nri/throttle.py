"""One warning per cause per interval, with a count of the ones held back (issue 22, finding 8).

A runtime (or anything on its socket) can send thousands of requests podpin refuses or answers empty: 5,000
malformed CreateContainer requests made 5,000 warning lines. Like the rejection logs (a rejection is logged once
per change of its reason), a refused NRI request is a warning the first time its cause is met in an interval;
the same cause again within the interval is a debug line, and the next warning for it says how many were held
back (``suppressed``). The metric ``podpin_nri_requests_total{method,result}`` still counts every one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["WARNING_INTERVAL", "WarningThrottle"]

WARNING_INTERVAL = 60.0
"""Seconds between two warnings of one cause."""

_CAUSES = 256
"""Causes remembered (method x result is a few dozen; the oldest is dropped beyond this)."""


class WarningThrottle:
    """Decides which warnings are written; thread-safe (the plugin reports from its connection threads)."""

    def __init__(self, interval: float = WARNING_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._causes: dict[Hashable, tuple[float, int]] = {}

    def admit(self, cause: Hashable) -> int | None:
        """None: hold this one back; else write it, and this many of its cause were held back since the last."""
        now = self._clock()
        with self._lock:
            last = self._causes.get(cause)
            if last is not None and now - last[0] < self.interval:
                self._causes[cause] = (last[0], last[1] + 1)
                return None
            self._causes.pop(cause, None)
            self._causes[cause] = (now, 0)
            while len(self._causes) > _CAUSES:
                del self._causes[next(iter(self._causes))]
            return 0 if last is None else last[1]
