"""How often a container whose files something rewrote is re-applied: a token bucket per container.

The watcher reports every write to a container's ``cpuset.cpus``, ``cpuset.mems`` or ``cpu.max``
(``agent/cgroups/watch.py``), podpin's own included. Re-applying on each would be a write fight with anything
that insists on its own value (a kubelet whose CPU manager pins too, a controller, an operator's loop): podpin
writes, the other writes back, each write wakes the other. So each container gets a small bucket: ``burst``
re-applies at once (the start of a container's life brings podpin's own writes and runc's rewrite within a
second), then one per ``interval``. A change that finds the bucket empty is not dropped: the container is due
when a token is back (:meth:`RepairThrottle.next_due`, :meth:`RepairThrottle.due`), once however many changes
came meanwhile, so the last writer never keeps the container for longer than ``interval``. Against a writer that
never stops, podpin re-applies once per ``interval`` and the periodic full pass does the rest, as before.

Pure: no clock and no I/O, the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["RepairThrottle"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RepairThrottle(Generic[K]):
    """Token buckets of re-applies, one per key (the reconciler's: pod key and container cgroup path).

    Args:
        burst: re-applies allowed at once (at least 1).
        interval: seconds to regain one (more than 0).

    Raises:
        ValueError: ``burst`` or ``interval`` out of range.
    """

    def __init__(self, *, burst: int = 4, interval: float = 1.0) -> None:
        if burst < 1 or not interval > 0:
            raise ValueError(f"RepairThrottle: want burst >= 1 and interval > 0, got {burst!r} and {interval!r}")
        self.burst = burst
        self.interval = interval
        self._buckets: dict[K, _Bucket] = {}
        self._deferred: dict[K, float] = {}

    def offer(self, key: K, now: float) -> bool:
        """A file of ``key`` changed at ``now``: True to re-apply it now (a token taken); False when it is
        deferred (already, or now: it is due at :meth:`next_due`)."""
        if key in self._deferred:
            return False
        bucket = self._refilled(key, now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return True
        self._deferred[key] = now + (1.0 - bucket.tokens) * self.interval
        return False

    def next_due(self) -> float | None:
        """When the first deferred key is due (None: none is)."""
        return min(self._deferred.values(), default=None)

    def due(self, now: float) -> list[K]:
        """The deferred keys due at ``now``, earliest first, each taking its token (re-apply them now)."""
        ready = sorted((at, n, key) for n, (key, at) in enumerate(self._deferred.items()) if at <= now)
        for _, _, key in ready:
            del self._deferred[key]
            bucket = self._refilled(key, now)
            bucket.tokens = max(0.0, bucket.tokens - 1.0)
        return [key for _, _, key in ready]

    def forget(self, gone: Callable[[K], bool]) -> None:
        """Drop the keys ``gone`` says went (their cgroup was removed)."""
        for key in [k for k in self._buckets if gone(k)]:
            del self._buckets[key]
        for key in [k for k in self._deferred if gone(k)]:
            del self._deferred[key]

    def __len__(self) -> int:
        """The keys with a bucket (what :meth:`forget` keeps bounded)."""
        return len(self._buckets)

    def _refilled(self, key: K, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), at=now)
        elif now > bucket.at:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.interval)
            bucket.at = now
        return bucket
