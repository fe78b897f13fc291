"""podpin as an NRI plugin: connect to the runtime, stay connected, translate its requests for a handler.

:class:`NRIPlugin` dials the runtime's NRI socket (``nri.socketPath``, default
``/var/run/nri/nri.sock``), registers as ``podpin`` with index ``90``, and
serves the runtime's requests through an :class:`~agent.nri.handler.NRIHandler`
until told to stop (``agent.nri.session`` has the protocol). It decides
nothing: every answer comes from the handler.

**Index 90.** The runtime calls plugins in ascending index order for each
event and hands each one the container as the earlier ones adjusted it
(containerd/nri ``pkg/adaptation/adaptation.go`` ``CreateContainer``,
``result.go``). A late index lets podpin see a container after plugins that
inject devices or annotations. Two plugins setting the same field (two CPU
policies) is a conflict the runtime fails the container for, whatever their
indices; podpin must be the node's only CPU policy plugin.

**NRI updates versus direct cgroup writes.** When podpin's pools change
(a new exclusive container shrinks a shared pool), running containers need new
cpusets. Two ways exist, and the integrator chooses:

* NRI updates - :class:`~agent.nri.model.ContainerUpdate` values returned from
  CreateContainer, UpdateContainer, StopContainer or Synchronize, or sent any
  time with :meth:`NRIPlugin.update_containers`. The runtime applies them
  (containerd updates the container's OCI spec and cgroup, so a later
  ``crictl update`` or a runtime restart keeps them). They cover containers
  only, and each update fails alone if its container is exiting
  (``ignore_failure``).
* Direct cgroup writes - what podpin does without NRI (``agent.cgroups``). They
  also reach pod and QoS cgroups, which NRI cannot adjust, and follow podpin's
  widen-then-narrow order across levels; but the runtime's record of the
  container keeps the old values.

Both are implemented correctly here; the plugin only transports what the
handler returns. The pod cgroup, which must hold the new container's set before
it starts, can only be written directly (at RunPodSandbox and before answering
CreateContainer).

**Reconnecting.** A runtime restart, a Shutdown, a socket error or a refused
registration ends the connection; the plugin dials again after a jittered,
capped exponential backoff (:func:`backoff_delay`: the n-th failure in a row
waits ``min(cap, base * 2**(n-1))`` scaled by a uniform factor in [0.5, 1], so
never less than ``base / 2``: no busy loop, even when the runtime accepts and
drops the plugin at once). A connection that served events for
``stable_after`` seconds resets the count, so after a runtime restart the first
retry comes within ``base``. A missing socket is retried the same way (NRI
switched on later, the runtime starting): while it is missing, podpin behaves
as without NRI.

**Reporting.** Every answered request yields a
:class:`~agent.nri.report.CallOutcome`, every connection change a
:class:`~agent.nri.report.ConnectionEvent`, both to ``on_report``;
:meth:`NRIPlugin.status` is a snapshot. The plugin logs them too, one line
each: ``nri.connected`` (info, with the runtime's ``request_timeout``, null where its
NRI does not tell it: v0.6 in containerd 1.7) and
``nri.synchronized`` (info, also with the size of the runtime's Synchronize:
``sync_pods``, ``sync_containers``, ``sync_chunks``, ``sync_bytes``); ``nri.disconnected``,
``nri.refused`` and ``nri.dial_failed`` (warning, with ``error``, ``retry_in``
and ``failures``; a dial error that repeats unchanged drops to debug, so a node
without NRI logs it once); ``nri.call`` (warning for ``error``, ``timeout``,
``late``, ``invalid`` and ``truncated``, debug otherwise, with ``method``,
``result``, ``seconds`` and the pod and container; a warning's cause, method
and result, warns once per minute and then says how many were held back,
``suppressed``: ``agent/nri/throttle.py``); ``nri.shutdown`` (info).

Run :meth:`NRIPlugin.run` on one thread at a time; the agent's runner owns
that thread, as it owns its pod source's.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import structlog

from agent.nri.config import DEFAULT_SOCKET_PATH, NRIConfig
from agent.nri.conn import dial
from agent.nri.handler import NRIHandler
from agent.nri.model import ContainerUpdate
from agent.nri.report import (
    CallOutcome,
    CallResult,
    ConnectionEvent,
    ConnectionKind,
    NRIMethod,
    NRIStatus,
    PluginState,
    Report,
    SessionFacts,
)
from agent.nri.service import late_outcome
from agent.nri.session import Session
from agent.nri.throttle import WarningThrottle
from agent.nri.worker import Calls, HandlerWorker, Job

__all__ = [
    "DEFAULT_PLUGIN_INDEX",
    "DEFAULT_PLUGIN_NAME",
    "NRINotConnectedError",
    "NRIPlugin",
    "Sleep",
    "backoff_delay",
]

_log = structlog.get_logger("podpin.nri")

DEFAULT_PLUGIN_NAME = "podpin"
"""The name podpin registers with (``[a-zA-Z0-9_.+-]``, ``pkg/api/plugin.go`` ``CheckPluginName``)."""

DEFAULT_PLUGIN_INDEX = "90"
"""The registration index: two digits (``CheckPluginIndex``); late, see the module docstring."""

_GOOD_NEWS = frozenset({ConnectionKind.CONNECTED, ConnectionKind.SYNCHRONIZED})
"""Connection changes logged at info; the others are warnings."""

_ROUTINE = frozenset({CallResult.OK, CallResult.IGNORED})
"""Request outcomes logged at debug; the others are warnings."""

Sleep = Callable[[threading.Event, float], object]
"""Waits the given seconds or until the event is set, whichever comes first."""


class NRINotConnectedError(RuntimeError):
    """The plugin has no synchronized connection to the runtime right now."""


def backoff_delay(failures: int, base: float, cap: float, uniform: float) -> float:
    """Seconds to wait before attempt ``failures + 1``: ``min(cap, base * 2**(failures-1)) * (0.5 + uniform / 2)``.

    Args:
        failures: failed attempts in a row, at least 1.
        base, cap: the first and the largest delay.
        uniform: a random number in [0, 1).
    """
    step = min(cap, base * 2.0 ** min(max(failures, 1) - 1, 62))
    return step * (0.5 + min(max(uniform, 0.0), 1.0) / 2)


class NRIPlugin:
    """podpin's NRI plugin; :meth:`run` blocks until ``stop`` is set.

    Args:
        handler: answers every runtime request.
        socket_path: the runtime's NRI socket.
        plugin_name, plugin_index: the registration.
        handler_timeout: the longest the plugin waits for one handler call; the
            effective budget is also capped at 75 % of the runtime's request
            timeout (2 s unless the runtime says otherwise), so the answer is
            never late.
        registration_timeout: how long to wait for the runtime's answer to
            RegisterPlugin and then for Configure.
        dial_timeout: the connect timeout of the socket.
        backoff: ``(base, cap)`` seconds, see :func:`backoff_delay`.
        stable_after: seconds of serving events after which a lost connection
            counts as the first failure again.
        on_report: receives every :class:`~agent.nri.report.Report`, on plugin
            threads; it must be quick, and what it raises is logged and ignored.
        sleep, jitter: injectable waiting and randomness.
        calls: makes what runs the handler calls, given the late-answer reporter (default: a
            :class:`~agent.nri.worker.HandlerWorker`, the plugin's own thread; the agent passes its loop).
    """

    def __init__(
        self,
        handler: NRIHandler,
        *,
        socket_path: Path = DEFAULT_SOCKET_PATH,
        plugin_name: str = DEFAULT_PLUGIN_NAME,
        plugin_index: str = DEFAULT_PLUGIN_INDEX,
        handler_timeout: float = 1.0,
        registration_timeout: float = 5.0,
        dial_timeout: float = 1.0,
        backoff: tuple[float, float] = (0.2, 5.0),
        stable_after: float = 10.0,
        on_report: Callable[[Report], None] | None = None,
        sleep: Sleep = threading.Event.wait,
        jitter: Callable[[], float] = random.random,
        calls: Callable[[Callable[[Job], None]], Calls] | None = None,
    ) -> None:
        if not plugin_name or any(not (c.isascii() and (c.isalnum() or c in "-_.+")) for c in plugin_name):
            raise ValueError(f"NRIPlugin plugin_name: {plugin_name!r} must be non-empty [a-zA-Z0-9_.+-]")
        if len(plugin_index) != 2 or not plugin_index.isdigit() or not plugin_index.isascii():
            raise ValueError(f"NRIPlugin plugin_index: {plugin_index!r} must be two digits")
        if not 0 < backoff[0] <= backoff[1]:
            raise ValueError(f"NRIPlugin backoff: want (base, cap) with 0 < base <= cap, got {backoff!r}")
        for name, value in (
            ("handler_timeout", handler_timeout),
            ("registration_timeout", registration_timeout),
            ("dial_timeout", dial_timeout),
        ):
            if not value > 0:
                raise ValueError(f"NRIPlugin {name}: must be > 0, got {value!r}")
        self._handler = handler
        self._make_calls = calls if calls is not None else _own_thread
        self._socket_path = Path(socket_path)
        self._name = plugin_name
        self._index = plugin_index
        self._handler_timeout = handler_timeout
        self._registration_timeout = registration_timeout
        self._dial_timeout = dial_timeout
        self._backoff = backoff
        self._stable_after = stable_after
        self._on_report = on_report
        self._sleep = sleep
        self._jitter = jitter
        self._throttle = WarningThrottle()
        self._lock = threading.Lock()
        self._state = PluginState.STOPPED
        self._session: Session | None = None
        self._last_error: str | None = None
        self._sessions = 0
        self._failures = 0
        self._runtime = ("", "")
        self._calls: Counter[tuple[NRIMethod, CallResult]] = Counter()

    @classmethod
    def from_config(cls, config: NRIConfig, handler: NRIHandler, **options: Any) -> NRIPlugin:
        """A plugin for the ``nri`` configuration section (``options`` as for the constructor)."""
        return cls(handler, socket_path=config.socket_path, **options)

    # -- what the agent reads and calls ------------------------------------------------------
    def status(self) -> NRIStatus:
        """A snapshot of the connection and the request counts."""
        with self._lock:
            return NRIStatus(
                socket_path=str(self._socket_path),
                state=self._state,
                runtime_name=self._runtime[0],
                runtime_version=self._runtime[1],
                last_error=self._last_error,
                sessions=self._sessions,
                failures=self._failures,
                calls=MappingProxyType(dict(self._calls)),
            )

    def update_containers(
        self, updates: Sequence[ContainerUpdate], timeout: float = 2.0
    ) -> tuple[ContainerUpdate, ...]:
        """Ask the runtime to update running containers now; returns the updates it could not apply.

        Raises:
            NRINotConnectedError: no synchronized connection.
            ConnectionClosedError, CallTimeoutError, RPCError (``agent.nri.ttrpc``): the call failed.
        """
        with self._lock:
            session = self._session if self._state is PluginState.SYNCHRONIZED else None
        if session is None:
            raise NRINotConnectedError(f"not connected to the NRI runtime at {self._socket_path}")
        return session.update_containers(updates, timeout)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Connect, serve, reconnect, until ``stop`` is set; returns within about a second of it."""
        worker = self._make_calls(self._late)
        worker.start()
        failures = 0
        try:
            while not stop.is_set():
                self._set_state(PluginState.CONNECTING)
                try:
                    sock = dial(str(self._socket_path), self._dial_timeout)
                except OSError as err:
                    failures += 1
                    error = f"cannot connect to {self._socket_path}: {err.strerror or err}"
                    self._retry(stop, failures, ConnectionKind.DIAL_FAILED, error)
                    continue
                self._set_state(PluginState.REGISTERING)
                session = Session(
                    sock,
                    handler=self._handler,
                    worker=worker,
                    plugin_name=self._name,
                    plugin_index=self._index,
                    handler_timeout=self._handler_timeout,
                    registration_timeout=self._registration_timeout,
                    report=self._report,
                    on_state=self._session_state,
                )
                with self._lock:
                    self._session = session
                end = session.run(stop)
                with self._lock:
                    self._session = None
                if stop.is_set():
                    break
                if end.synchronized and end.seconds >= self._stable_after:
                    failures = 0
                failures += 1
                kind = ConnectionKind.REFUSED if end.refused else ConnectionKind.DISCONNECTED
                self._retry(stop, failures, kind, end.reason)
        finally:
            self._set_state(PluginState.STOPPED)
            if not worker.stop(0.2):
                _log.warning("nri.handler_still_running", socket=str(self._socket_path))

    def _session_state(self, state: PluginState, facts: SessionFacts) -> None:
        """The session was configured or synchronized."""
        synchronized = state is PluginState.SYNCHRONIZED
        with self._lock:
            self._runtime = (facts.runtime_name, facts.runtime_version)
            if synchronized:
                self._sessions += 1
                self._failures = 0
                self._last_error = None
            self._state = PluginState.SYNCHRONIZED if synchronized else PluginState.CONFIGURED
        kind = ConnectionKind.SYNCHRONIZED if synchronized else ConnectionKind.CONNECTED
        event = replace(
            self._event(kind),
            request_timeout=facts.request_timeout,
            sync_pods=facts.sync_pods,
            sync_containers=facts.sync_containers,
            sync_chunks=facts.sync_chunks,
            sync_bytes=facts.sync_bytes,
        )
        self._emit(event)

    def _retry(self, stop: threading.Event, failures: int, kind: ConnectionKind, error: str) -> None:
        delay = backoff_delay(failures, self._backoff[0], self._backoff[1], self._jitter())
        with self._lock:
            repeated = self._last_error == error
            self._failures = failures
            self._last_error = error
            self._state = PluginState.CONNECTING
        event = self._event(kind, error=error, retry_in=round(delay, 3), failures=failures)
        self._emit(event, quiet=repeated and kind is ConnectionKind.DIAL_FAILED)
        self._sleep(stop, delay)

    # -- reporting ---------------------------------------------------------------------------
    def _event(
        self, kind: ConnectionKind, *, error: str | None = None, retry_in: float | None = None, failures: int = 0
    ) -> ConnectionEvent:
        with self._lock:
            name, version = self._runtime
        return ConnectionEvent(
            kind=kind,
            socket_path=str(self._socket_path),
            error=error,
            retry_in=retry_in,
            failures=failures,
            runtime_name=name,
            runtime_version=version,
        )

    def _set_state(self, state: PluginState) -> None:
        with self._lock:
            self._state = state

    def _late(self, job: Job) -> None:
        self._report(late_outcome(job))

    def _report(self, outcome: CallOutcome) -> None:
        with self._lock:
            self._calls[(outcome.event, outcome.result)] += 1
        self._emit(outcome)

    def _emit(self, report: Report, *, quiet: bool = False) -> None:
        fields = {k: v for k, v in _fields(report).items() if v not in (None, "")}
        if isinstance(report, ConnectionEvent):
            level = "info" if report.kind in _GOOD_NEWS else "warning"
            getattr(_log, "debug" if quiet else level)(f"nri.{report.kind}", **fields)
        elif report.result in _ROUTINE:
            _log.debug("nri.call", **fields)
        else:
            held_back = self._throttle.admit((report.event, report.result))
            if held_back is None:
                _log.debug("nri.call", throttled=True, **fields)
            else:
                _log.warning("nri.call", **({"suppressed": held_back} if held_back else {}), **fields)
        if self._on_report is not None:
            try:
                self._on_report(report)
            except Exception:  # the integrator's callback must not break the plugin
                _log.exception("nri.on_report_failed")


def _fields(report: Report) -> dict[str, object]:
    """The report as log fields (``event`` is structlog's own key: the NRI event is logged as ``method``)."""
    fields = {name: getattr(report, name) for name in report.__dataclass_fields__ if name not in ("kind", "event")}
    if isinstance(report, CallOutcome):
        fields["method"] = report.event
    return fields


def _own_thread(on_late: Callable[[Job], None]) -> Calls:
    """The plugin's own handler thread (:class:`~agent.nri.worker.HandlerWorker`)."""
    return HandlerWorker(on_late=on_late)
