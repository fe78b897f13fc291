"""Kubernetes Events on pods, posted off the caller's thread.

The caller is the pinning path: recording an Event must cost it microseconds
and must never fail or block it, whatever the API server does. So
:meth:`EventRecorder.warning` and :meth:`EventRecorder.normal` only stamp the
time and append to a bounded queue; one background thread posts. When the
queue is full the oldest Event is dropped (the newest says most about the
current state). API failures are logged and counted, never raised.

Repeats are correlated as the kubelet's event logger does: an Event identical to
one posted in the last ``correlation_window`` seconds (same pod, type, reason
and message) becomes a PATCH of that Event's ``count``, ``lastTimestamp`` and
``message``; if that Event has expired from the API server (404), a new one is
created carrying the count. The correlation entries of pods that left the node
are dropped (:meth:`EventRecorder.forget_gone`); the others are bounded by the
kubelet's LRU size.
"""

from __future__ import annotations

import datetime
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from agent.kube.api import CoreCalls

__all__ = ["EventRecorder", "EventStats", "EventOutcome", "PodRef"]

_log = structlog.get_logger("podpin.kube.events")

PodRef = Mapping[str, Any] | tuple[str, str, str]
"""A pod to attach an Event to: its raw dict, or ``(namespace, name, uid)``."""

EventOutcome = Literal["posted", "patched", "failed", "dropped"]
"""What happened to one recorded Event (for metrics)."""

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_CACHE_SIZE = 4096  # the kubelet's event cache size (client-go maxLruCacheEntries)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStats:
    """Counts since the recorder started: created, count-patched, failed and dropped Events."""

    posted: int
    patched: int
    failed: int
    dropped: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pending:
    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    at: datetime.datetime


@dataclass(slots=True, kw_only=True)
class _Posted:
    """What the API server holds for one correlation key."""

    name: str
    count: int
    first: datetime.datetime
    last: datetime.datetime


class EventRecorder:
    """Posts core/v1 Events about pods from a background thread (started by the constructor).

    Args:
        api: the official client's calls (:class:`agent.kube.api.CoreCalls`).
        node_name: ``source.host`` of every Event, and the default ``reportingInstance``.
        component: ``source.component`` and ``reportingComponent``.
        queue_size: Events waiting to be posted before the oldest is dropped.
        instance: ``reportingInstance`` (default ``node_name``).
        correlation_window: seconds within which an identical Event patches the count.
        request_timeout: seconds one API call may take.
        now: the wall clock (timestamps and the correlation window).
        on_outcome: called once per Event with its type (``Normal``/``Warning``) and
            what happened to it, from the recorder's thread (for the agent's
            metrics); :meth:`stats` has the totals.
    """

    def __init__(
        self,
        api: CoreCalls,
        node_name: str,
        *,
        component: str = "podpin",
        queue_size: int = 1000,
        instance: str | None = None,
        correlation_window: float = 600.0,
        request_timeout: float = 10.0,
        now: Callable[[], datetime.datetime] = _utcnow,
        on_outcome: Callable[[str, EventOutcome], None] | None = None,
    ) -> None:
        if queue_size < 1:
            raise ValueError(f"EventRecorder queue_size: must be >= 1, got {queue_size!r}")
        self._api = api
        self._node = node_name
        self._component = component
        self._instance = instance or node_name
        self._window = datetime.timedelta(seconds=correlation_window)
        self._request_timeout = request_timeout
        self._now = now
        self._on_outcome = on_outcome
        self._queue: deque[_Pending] = deque()
        self._queue_size = queue_size
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False
        self._counts = {"posted": 0, "patched": 0, "failed": 0, "dropped": 0}
        self._unreported_drops: list[str] = []
        self._cache: OrderedDict[tuple[str, ...], _Posted] = OrderedDict()
        self._alive: frozenset[str] | None = None
        self._last_alive: frozenset[str] | None = None
        self._last_suffix = 0
        self._thread = threading.Thread(target=self._run, name="podpin-event-recorder", daemon=True)
        self._thread.start()

    def warning(self, pod: PodRef, reason: str, message: str) -> None:
        """Record a Warning Event on ``pod``; returns at once and never raises for API trouble."""
        self._record(pod, "Warning", reason, message)

    def normal(self, pod: PodRef, reason: str, message: str) -> None:
        """Record a Normal Event on ``pod``; returns at once and never raises for API trouble."""
        self._record(pod, "Normal", reason, message)

    def stats(self) -> EventStats:
        """The counts so far."""
        with self._cond:
            return EventStats(**self._counts)

    def close(self, timeout: float = 5.0) -> bool:
        """Post what is queued, then stop the thread; True if everything was delivered in ``timeout``.

        Events still queued after ``timeout`` are counted as dropped; later
        calls of :meth:`warning`/:meth:`normal` are dropped too.
        """
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            left = len(self._queue) + (1 if self._busy else 0)
            abandoned_types = [item.type for item in self._queue]
            abandoned = len(abandoned_types)
            self._queue.clear()
            self._counts["dropped"] += abandoned
        for event_type in abandoned_types:
            self._notify("dropped", event_type)
        if abandoned:
            _log.warning("event.dropped", node=self._node, count=abandoned, why="recorder closed")
        return left == 0

    def _record(self, pod: PodRef, type_: str, reason: str, message: str) -> None:
        at = self._now()
        ref = _pod_ref(pod)
        if ref is None:
            _log.warning("event.skipped", node=self._node, reason=reason, why="the pod has no metadata.name")
            with self._cond:
                self._counts["failed"] += 1
            self._notify("failed", type_)
            return
        item = _Pending(namespace=ref[0], name=ref[1], uid=ref[2], type=type_, reason=reason, message=message, at=at)
        with self._cond:
            closed = self._closing
            if closed:
                self._counts["dropped"] += 1
            else:
                self._enqueue(item)
        if closed:
            self._notify("dropped", type_)

    def _enqueue(self, item: _Pending) -> None:
        """Append under the lock, dropping the oldest when full (reported by the thread, off this path)."""
        if len(self._queue) >= self._queue_size:
            dropped = self._queue.popleft()
            self._counts["dropped"] += 1
            self._unreported_drops.append(dropped.type)
        self._queue.append(item)
        self._cond.notify()

    def forget_gone(self, alive: Set[str]) -> None:
        """Drop the correlation entries of pods whose uid is not in ``alive`` (done by the recorder's thread).

        A gone pod's uid never posts again; without this its entries (0.5-1 KB each) stay until 4,096 newer ones
        push them out: up to ~3 MiB held for pods long gone on a node with churn. Entries of Events without a pod
        uid are left to that bound. The reporter calls this on every pass (``Reporter.forget_gone``).
        """
        alive = frozenset(alive)
        with self._cond:
            if alive != self._last_alive:
                self._alive = self._last_alive = alive
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing and self._alive is None:
                    self._cond.wait()
                drops, self._unreported_drops = self._unreported_drops, []
                alive, self._alive = self._alive, None
                if not self._queue and alive is None:
                    break
                item = self._queue.popleft() if self._queue else None
                self._busy = True
            if alive is not None:
                for key in [key for key in self._cache if key[2] and key[2] not in alive]:
                    del self._cache[key]
            self._report_drops(drops)
            if item is not None:
                try:
                    self._deliver(item)
                except Exception as err:
                    self._fail(item, err)
            with self._cond:
                self._busy = False
        self._report_drops(drops)

    def _report_drops(self, drops: list[str]) -> None:
        if drops:
            _log.warning("event.dropped", node=self._node, count=len(drops), why="queue full")
            for event_type in drops:
                self._notify("dropped", event_type)

    def _deliver(self, item: _Pending) -> None:
        from agent.kube.official import ApiException  # loaded already: the recorder's calls loaded it

        key = (item.namespace, item.name, item.uid, item.type, item.reason, item.message)
        seen = self._cache.get(key)
        if seen is not None and item.at - seen.last <= self._window:
            patch = {"count": seen.count + 1, "lastTimestamp": _seconds(item.at), "message": item.message}
            try:
                self._api.patch_namespaced_event(
                    seen.name, item.namespace, patch, _request_timeout=self._request_timeout
                )
            except ApiException as err:
                if err.status != 404:
                    self._fail(item, err)
                    return
            except Exception as err:
                self._fail(item, err)
                return
            else:
                seen.count += 1
                seen.last = item.at
                self._cache.move_to_end(key)
                self._done("patched", item, seen.count)
                return
            posted = _Posted(name=self._event_name(item), count=seen.count + 1, first=seen.first, last=item.at)
        else:
            posted = _Posted(name=self._event_name(item), count=1, first=item.at, last=item.at)
        try:
            self._api.create_namespaced_event(
                item.namespace,
                self._body(item, posted),
                _request_timeout=self._request_timeout,
            )
        except Exception as err:
            self._fail(item, err)
            return
        self._cache[key] = posted
        self._cache.move_to_end(key)
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        self._done("posted", item, posted.count)

    def _body(self, item: _Pending, posted: _Posted) -> dict[str, Any]:
        involved = {"kind": "Pod", "apiVersion": "v1", "namespace": item.namespace, "name": item.name}
        if item.uid:
            involved["uid"] = item.uid
        return {
            "metadata": {"name": posted.name, "namespace": item.namespace},
            "involvedObject": involved,
            "type": item.type,
            "reason": item.reason,
            "message": item.message,
            "source": {"component": self._component, "host": self._node},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": _seconds(posted.first),
            "lastTimestamp": _seconds(posted.last),
            "count": posted.count,
        }

    def _event_name(self, item: _Pending) -> str:
        """``<pod>.<hex nanoseconds>`` as client-go names Events, kept unique per recorder."""
        suffix = max((item.at - _EPOCH) // datetime.timedelta(microseconds=1) * 1000, self._last_suffix + 1)
        self._last_suffix = suffix
        return f"{item.name}.{suffix:x}"

    def _done(self, outcome: EventOutcome, item: _Pending, count: int) -> None:
        with self._cond:
            self._counts[outcome] += 1
        _log.debug(
            "event." + outcome, node=self._node, pod=f"{item.namespace}/{item.name}", reason=item.reason, count=count
        )
        self._notify(outcome, item.type)

    def _fail(self, item: _Pending, err: Exception) -> None:
        from agent.kube.official import ApiException

        with self._cond:
            self._counts["failed"] += 1
        detail = f"HTTP {err.status} {err.reason}" if isinstance(err, ApiException) else f"{type(err).__name__}: {err}"
        _log.warning(
            "event.failed", node=self._node, pod=f"{item.namespace}/{item.name}", reason=item.reason, error=detail
        )
        self._notify("failed", item.type)

    def _notify(self, outcome: EventOutcome, event_type: str) -> None:
        if self._on_outcome is None:
            return
        try:
            self._on_outcome(event_type, outcome)
        except Exception:
            _log.exception("event.hook_failed", node=self._node, outcome=outcome)


def _pod_ref(pod: PodRef) -> tuple[str, str, str] | None:
    """``(namespace, name, uid)`` of a pod reference; None when it has no name."""
    if isinstance(pod, tuple):
        namespace, name, uid = pod
        return (namespace or "default", name, uid or "") if name else None
    metadata = pod.get("metadata")
    if not isinstance(metadata, Mapping) or not metadata.get("name"):
        return None
    return str(metadata.get("namespace") or "default"), str(metadata["name"]), str(metadata.get("uid") or "")


def _seconds(at: datetime.datetime) -> datetime.datetime:
    """A timestamp at the API's precision for core/v1 Event times (whole seconds, UTC)."""
    return at.astimezone(datetime.UTC).replace(microsecond=0)
