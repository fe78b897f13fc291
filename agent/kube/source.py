"""Pod sources: the outside world translated into :class:`PodEvent` values, nothing decided.

A source hands over every pod bound to this node exactly as it was written —
the raw camelCase dict of the API or of a manifest — never a client model: a pod
field newer than the client's models must survive, and judging whether a pod is
well-formed is the consumer's job (``docs/design.md``, "Data flow"). Two sources exist:

- :class:`KubeSource` lists and watches the API server (``spec.nodeName`` field
  selector), the normal DaemonSet mode.
- :class:`~agent.kube.dirsource.DirSource` reads a directory of manifests, for
  nodes without an API server connection and for tests.

Both block in ``run(emit, stop)`` until ``stop`` is set and call ``emit`` from
their own thread.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import structlog

from agent.kube.api import CoreCalls

if TYPE_CHECKING:  # the client is imported where a list or watch is made: agent.kube stays cheap to import
    import urllib3

    from agent.kube.watch_stream import WatchStream

__all__ = ["PodEvent", "PodSource", "KubeSource", "Sleep"]

_log = structlog.get_logger("podpin.kube.source")

Pod = Mapping[str, Any]
"""A raw pod object as the API returned it (camelCase JSON keys)."""

Sleep = Callable[[threading.Event, float], object]
"""Waits the given seconds or until the event is set, whichever comes first."""

_SHORT_WATCH = 1.0
"""A stream that ends cleanly sooner than this without an event counts as a failure (as in client-go)."""


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One change of this node's pod set.

    ``SYNC`` carries the complete current set of the node's pods (anything not
    in it is gone); ``UPSERT`` and ``DELETE`` carry exactly one pod.
    """

    kind: Literal["SYNC", "UPSERT", "DELETE"]
    pods: tuple[Pod, ...]


class PodSource(Protocol):
    """Something that reports this node's pods until told to stop."""

    def run(self, emit: Callable[[PodEvent], None], stop: threading.Event) -> None:
        """Call ``emit`` for every change; block until ``stop`` is set."""


class _End(Enum):
    """How one watch request ended."""

    CLOSED = "closed"  # the server ended the stream (timeoutSeconds or a clean close)
    GONE = "gone"  # 410: the resume version is too old, relist
    FAILED = "failed"  # HTTP error, dropped connection, unreadable stream
    STOPPED = "stopped"  # stop was set


class KubeSource:
    """List and watch this node's pods from the API server.

    The first list is emitted as ``SYNC``; a watch then resumes from the list's
    resourceVersion (bookmarks allowed, ``timeout_seconds`` always set, so a
    watch never outlives a lost stop or a half-open connection by long). Each
    event and BOOKMARK advances the resume version. A stream the server ends is
    re-watched at once; 410 Gone relists (``watch.relisted``); other failures wait
    an exponential backoff with full jitter and re-watch. Every
    ``resync_period`` seconds the pods are listed again and emitted as ``SYNC``,
    which repairs anything a watch could have lost.

    Args:
        node_name: only pods with ``spec.nodeName`` equal to this are reported.
        api: the official client's calls (:class:`agent.kube.api.CoreCalls`) (see :func:`agent.kube.client.load_api`).
        resync_period: seconds between full relists.
        watch_timeout: ``timeoutSeconds`` of each watch request (at least 1).
        backoff: ``(base, cap)`` seconds of the failure backoff; the n-th
            failure in a row waits ``uniform(0, min(cap, base * 2**(n-1)))``.
        request_timeout: connect timeout, and the read timeout of a list; a
            watch's read timeout is its ``timeoutSeconds`` plus this.
        clock: monotonic seconds (injectable for tests).
        sleep: waits between retries; must return early when the event is set.
        jitter: uniform random numbers in [0, 1) for the backoff.
    """

    def __init__(
        self,
        node_name: str,
        api: CoreCalls,
        *,
        resync_period: float = 300.0,
        watch_timeout: int = 60,
        backoff: tuple[float, float] = (0.5, 30.0),
        request_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = threading.Event.wait,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not node_name:
            raise ValueError("KubeSource node_name: must not be empty")
        if resync_period <= 0:
            raise ValueError(f"KubeSource resync_period: must be > 0, got {resync_period!r}")
        if int(watch_timeout) != watch_timeout or watch_timeout < 1:
            raise ValueError(f"KubeSource watch_timeout: must be a whole number of seconds >= 1, got {watch_timeout!r}")
        if not 0 < backoff[0] <= backoff[1]:
            raise ValueError(f"KubeSource backoff: want (base, cap) with 0 < base <= cap, got {backoff!r}")
        self._node = node_name
        self._api = api
        self._resync_period = resync_period
        self._watch_timeout = int(watch_timeout)
        self._backoff = backoff
        self._request_timeout = request_timeout
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._selector = f"spec.nodeName={node_name}"

    def run(self, emit: Callable[[PodEvent], None], stop: threading.Event) -> None:
        """List, emit SYNC, watch and emit UPSERT/DELETE until ``stop`` is set.

        Returns within about a second of ``stop.set()``, also in the middle of a
        watch. Exceptions raised by ``emit`` propagate (a consumer bug is not a
        watch failure to retry).
        """
        interrupter = _Interrupter(stop)
        interrupter.start()
        try:
            self._loop(emit, stop, interrupter)
        finally:
            interrupter.finish()

    def _loop(self, emit: Callable[[PodEvent], None], stop: threading.Event, interrupter: _Interrupter) -> None:
        log = _log.bind(node=self._node)
        version: str | None = None  # None: list before watching
        resync_at = 0.0
        failures = 0
        why = "start"
        while not stop.is_set():
            if version is None or self._clock() >= resync_at:
                if version is not None:
                    why = "resync"
                try:
                    pods, version = self._list()
                except Exception as err:
                    failures += 1
                    version = None
                    self._pause(stop, failures, log, "watch.list_failed", err)
                    continue
                if stop.is_set():
                    return
                emit(PodEvent("SYNC", pods))
                failures = 0
                resync_at = self._clock() + self._resync_period
                event = {"start": "watch.listed", "gone": "watch.relisted", "resync": "watch.resynced"}[why]
                log.info(event, pods=len(pods), resource_version=version, reason=why)
            started = self._clock()
            end, version, delivered, failure = self._watch(version, emit, stop, interrupter, resync_at)
            if end is _End.STOPPED:
                return
            if end is _End.GONE:
                version, why = None, "gone"
                log.info("watch.expired", error=_describe(failure))
                continue
            short = end is _End.CLOSED and not delivered and self._clock() - started < _SHORT_WATCH
            if end is _End.CLOSED and not short:
                failures = 0
                continue
            failures = 1 if delivered else failures + 1
            self._pause(stop, failures, log, "watch.failed", failure or "stream closed without events")

    def list_pods(self) -> tuple[Pod, ...]:
        """This node's pods, listed once (for one-shot commands such as ``podpin reset``); raises on any failure."""
        return self._list()[0]

    def _list(self) -> tuple[tuple[Pod, ...], str]:
        """One list call, parsed from the raw JSON (never the client's models)."""
        response = cast(
            "urllib3.BaseHTTPResponse",
            self._api.list_pod_for_all_namespaces(
                field_selector=self._selector, _preload_content=False, _request_timeout=self._request_timeout
            ),
        )
        try:
            body = response.data
        finally:
            response.release_conn()
        doc = json.loads(body)
        items = doc.get("items") if isinstance(doc, dict) else None
        if not isinstance(items, list | None):
            raise ValueError(f"pod list from the API: 'items' is a {type(items).__name__}, not a list")
        pods = []
        for item in items or ():
            if isinstance(item, dict):
                pods.append(item)
            else:
                _log.warning("watch.bad_item", node=self._node, item_type=type(item).__name__)
        metadata = doc.get("metadata") if isinstance(doc, dict) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        return tuple(pods), str(version or "")

    def _watch(
        self,
        version: str,
        emit: Callable[[PodEvent], None],
        stop: threading.Event,
        interrupter: _Interrupter,
        resync_at: float,
    ) -> tuple[_End, str, bool, Exception | None]:
        """One watch request; returns how it ended, the resume version, whether anything arrived."""
        timeout = max(1, min(self._watch_timeout, math.ceil(resync_at - self._clock())))
        from agent.kube.official import ApiException
        from agent.kube.watch_stream import WatchStream

        kwargs: dict[str, Any] = {
            "field_selector": self._selector,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout,
            "watch": True,
            "_preload_content": False,
            "_request_timeout": (self._request_timeout, timeout + self._request_timeout),
        }
        if version:
            kwargs["resource_version"] = version
        watcher = WatchStream(lambda: self._api.list_pod_for_all_namespaces(**kwargs))
        interrupter.watching(watcher)
        delivered = False
        stream = watcher.events()
        try:
            while True:
                if stop.is_set():
                    return _End.STOPPED, version, delivered, None
                try:
                    event = next(stream)
                except StopIteration:
                    return _End.CLOSED, version, delivered, None
                except Exception as err:
                    if stop.is_set():
                        return _End.STOPPED, version, delivered, None
                    gone = isinstance(err, ApiException) and err.status == 410
                    return (_End.GONE if gone else _End.FAILED), version, delivered, err
                if stop.is_set():
                    return _End.STOPPED, version, delivered, None
                delivered = True
                version = self._handle(event, emit) or version
        finally:
            interrupter.watching(None)
            stream.close()

    def _handle(self, event: Any, emit: Callable[[PodEvent], None]) -> str | None:
        """Emit one watch event; returns the resourceVersion it carries."""
        kind = event.get("type") if isinstance(event, dict) else None
        raw = event.get("raw_object") if isinstance(event, dict) else None
        if not isinstance(raw, dict):
            _log.warning("watch.bad_event", node=self._node, type=kind, object_type=type(raw).__name__)
            return None
        metadata = raw.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if kind in ("ADDED", "MODIFIED"):
            emit(PodEvent("UPSERT", (raw,)))
        elif kind == "DELETED":
            emit(PodEvent("DELETE", (raw,)))
        elif kind != "BOOKMARK":
            _log.warning("watch.bad_event", node=self._node, type=kind, object_type="dict")
            return None
        return str(version) if version else None

    def _pause(self, stop: threading.Event, failures: int, log: Any, event: str, err: object) -> None:
        base, cap = self._backoff
        delay = self._jitter() * min(cap, base * 2 ** (failures - 1))
        log.warning(event, error=_describe(err), attempt=failures, retry_in=round(delay, 3))
        self._sleep(stop, delay)


def _describe(err: object) -> str:
    from agent.kube.official import ApiException

    if isinstance(err, ApiException):
        return f"HTTP {err.status} {err.reason}".strip()
    if isinstance(err, Exception):
        return f"{type(err).__name__}: {err}"
    return str(err)


class _Interrupter:
    """Ends the current watch once ``stop`` is set, retrying until the watching thread has left it.

    A stop can be lost (``docs/design.md``, "Kubernetes client facts"): one before the HTTP response exists
    has no socket to shut down. So after ``stop`` this thread repeats ``stop()``
    on whatever watch is current every 20 ms until :meth:`finish` is called.
    """

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._lock = threading.Lock()
        self._current: WatchStream | None = None
        self._left = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podpin-watch-interrupter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def watching(self, watcher: WatchStream | None) -> None:
        """Set the watch to interrupt (None between watches)."""
        with self._lock:
            self._current = watcher

    def finish(self) -> None:
        """The watching thread has left its loop; end the helper thread."""
        self._left.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._left.is_set():
            if self._stop.wait(0.1):
                break
        while not self._left.wait(0.02):
            with self._lock:
                current = self._current
            if current is not None:
                current.stop()
