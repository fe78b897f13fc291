"""What the NRI plugin tells the agent: one typed outcome per request and a status snapshot (pure values).

The plugin never logs alone what the agent should count: each answered runtime
request becomes a :class:`CallOutcome`, each connection change a
:class:`ConnectionEvent`, handed to the integrator's ``on_report`` callback as
they happen (log, meter, Event), and :class:`NRIStatus` is a snapshot the agent
can read at any time (``/readyz``, ``/state``, a Prometheus collector), as
``agent.kube.events.EventStats`` is for Events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "CallOutcome",
    "CallResult",
    "ConnectionEvent",
    "ConnectionKind",
    "NRIMethod",
    "NRIStatus",
    "PluginState",
    "Report",
    "SessionFacts",
]


class NRIMethod(StrEnum):
    """The methods of NRI's Plugin service the runtime calls, spelled as on the wire (``ttrpc`` method names).

    The same words name the requests in :class:`CallOutcome`, in log lines and in metric labels.
    """

    CONFIGURE = "Configure"
    SYNCHRONIZE = "Synchronize"
    SHUTDOWN = "Shutdown"
    RUN_POD_SANDBOX = "RunPodSandbox"
    STOP_POD_SANDBOX = "StopPodSandbox"
    REMOVE_POD_SANDBOX = "RemovePodSandbox"
    CREATE_CONTAINER = "CreateContainer"
    UPDATE_CONTAINER = "UpdateContainer"
    STOP_CONTAINER = "StopContainer"
    REMOVE_CONTAINER = "RemoveContainer"
    STATE_CHANGE = "StateChange"


class CallResult(StrEnum):
    """How one runtime request went.

    ``ok``
        the handler answered in time; the runtime got its answer.
    ``error``
        the handler raised or returned something that is not a valid answer; the
        runtime got an empty answer (no adjustment, no update).
    ``timeout``
        the handler did not answer within the plugin's budget; the runtime got an
        empty answer, the handler call goes on.
    ``late``
        a call that timed out has now finished (``error`` says how); its answer was
        dropped. Whatever it decided must reach the container another way.
    ``invalid``
        the request could not be read (its payload or a field such as a cpuset is
        malformed); the runtime got an empty answer and the handler was not called.
    ``ignored``
        an event podpin does not handle (a StateChange it did not subscribe to).
    ``truncated``
        a Synchronize larger than podpin's bounds (``agent/nri/service.py``): the
        handler got the pods and containers up to the bounds and answered for
        them; ``error`` says how many were left out.
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    LATE = "late"
    INVALID = "invalid"
    IGNORED = "ignored"
    TRUNCATED = "truncated"


class ConnectionKind(StrEnum):
    """A change of the plugin's connection to the runtime.

    ``connected`` the runtime configured the plugin (registration accepted);
    ``synchronized`` the first Synchronize was answered: events flow from now on;
    ``disconnected`` a connection that was configured ended (runtime restart,
    Shutdown, socket error); ``refused`` the runtime would not take the plugin
    (registration error, no Configure in time, closed during the handshake);
    ``dial_failed`` the socket could not be connected (missing, no listener).
    """

    CONNECTED = "connected"
    SYNCHRONIZED = "synchronized"
    DISCONNECTED = "disconnected"
    REFUSED = "refused"
    DIAL_FAILED = "dial_failed"


class PluginState(StrEnum):
    """Where the plugin is: not running, dialling, waiting for Configure, configured, or serving events."""

    STOPPED = "stopped"
    CONNECTING = "connecting"
    REGISTERING = "registering"
    CONFIGURED = "configured"
    SYNCHRONIZED = "synchronized"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    """One runtime request and how it was answered.

    ``event`` is the NRI method the runtime called (a StateChange event podpin
    handles is reported as its dedicated method: ``RunPodSandbox`` ...);
    ``seconds`` how long the handler took (for ``timeout``: the budget it
    exceeded); ``error`` what went wrong (for ``ignored``: which event). The pod
    and container fields are empty where the request has none.
    """

    event: NRIMethod
    result: CallResult
    seconds: float = 0.0
    error: str | None = None
    pod_uid: str = ""
    namespace: str = ""
    pod_name: str = ""
    container_id: str = ""
    container_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFacts:
    """What one connection's runtime said of itself and sent, as the session learns it.

    From Configure: the runtime's name and version and its ``request_timeout`` in seconds (the budget of every
    call; podpin answers within 75 % of it), None where the runtime's NRI does not tell it (v0.6, containerd 1.7:
    each request then carries its deadline alone). From the end of Synchronize: how many pods and containers it named,
    in how many ``more`` chunks and how many bytes (NRI v0.10+ splits a Synchronize past ttrpc's 4 MiB message
    limit; older runtimes fail to synchronize instead). The sync fields stay None until it is complete.
    """

    runtime_name: str = ""
    runtime_version: str = ""
    request_timeout: float | None = None
    sync_pods: int | None = None
    sync_containers: int | None = None
    sync_chunks: int | None = None
    sync_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionEvent:
    """A change of the connection.

    ``retry_in`` is the backoff before the next attempt, if one follows, and
    ``failures`` the failed attempts in a row it was computed from. ``connected``
    carries the runtime's request timeout, ``synchronized`` also the size of its
    Synchronize (:class:`SessionFacts`).
    """

    kind: ConnectionKind
    socket_path: str
    error: str | None = None
    retry_in: float | None = None
    failures: int = 0
    runtime_name: str = ""
    runtime_version: str = ""
    request_timeout: float | None = None
    sync_pods: int | None = None
    sync_containers: int | None = None
    sync_chunks: int | None = None
    sync_bytes: int | None = None


Report = CallOutcome | ConnectionEvent
"""Anything the plugin reports through ``on_report``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NRIStatus:
    """A snapshot of the plugin for the agent's health, state and metrics.

    ``connected`` is true while events flow (state ``synchronized``).
    ``sessions`` counts connections that reached ``synchronized``;
    ``failures`` the attempts in a row that failed (0 while connected; a
    connection that drops soon after synchronizing keeps counting).
    ``calls`` counts answered requests by ``(event, result)``.
    """

    socket_path: str
    state: PluginState
    runtime_name: str = ""
    runtime_version: str = ""
    last_error: str | None = None
    sessions: int = 0
    failures: int = 0
    calls: Mapping[tuple[NRIMethod, CallResult], int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def connected(self) -> bool:
        """True while the runtime sends events to the plugin."""
        return self.state is PluginState.SYNCHRONIZED
