"""The Plugin service podpin serves to the runtime: each NRI request translated into one handler call.

What the runtime calls (containerd/nri ``pkg/adaptation/plugin.go`` and
``adaptation.go``; the plugin side in ``pkg/stub/stub.go``), once the plugin
has registered:

1. ``Configure`` (runtime name and version, its registration and request
   timeouts); the answer is the event mask - bit ``event - 1`` per subscribed
   event; a mask of 0 would subscribe to *all* events;
2. ``Synchronize`` with every pod and container, in chunks flagged ``more``
   when large (each such chunk is answered ``more: true`` with no updates; the
   last one carries the updates);
3. the subscribed events, one at a time: NRI v0.12 and later (containerd 2.3,
   2.4) calls the dedicated methods (RunPodSandbox, StopPodSandbox,
   RemovePodSandbox, RemoveContainer) and falls back to ``StateChange``, with a
   deprecation warning, only for a plugin that answers Unimplemented; earlier
   NRI (v0.6.1 in containerd 1.7.24, v0.8 in 2.0/2.1, v0.10/v0.11 in 2.2) sends
   those four as ``StateChange`` events. Both are served. CreateContainer, UpdateContainer
   and StopContainer are their own calls in both;
4. ``Shutdown`` when the runtime is going away.

Every request is answered, and within the budget (``agent.nri.worker``): a
handler that fails, answers nonsense or is slow gets an empty answer sent for
it, and a :class:`~agent.nri.report.CallOutcome` says so. Answering an event
with an error status would fail the pod or container in the runtime; podpin
never does that (only a Configure it cannot read is refused).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as PBMessage

from agent.nri.convert import (
    ConvertError,
    adjustment_to_pb,
    container_from_pb,
    pod_from_pb,
    resources_from_pb,
    updates_to_pb,
)
from agent.nri.handler import NRIHandler
from agent.nri.model import Container, CreateResult, PodSandbox
from agent.nri.proto import nri_pb2 as pb
from agent.nri.report import CallOutcome, CallResult, NRIMethod, PluginState, SessionFacts
from agent.nri.ttrpc import Method, RPCStatusError, StatusCode
from agent.nri.worker import Calls, Job, WorkResult, WorkStatus

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "EVENT_MASK",
    "PLUGIN_SERVICE",
    "RUNTIME_SERVICE",
    "SUBSCRIBED_EVENTS",
    "PluginService",
    "OutcomeSink",
    "late_outcome",
]

_log = structlog.get_logger("podpin.nri.service")

PLUGIN_SERVICE = pb.DESCRIPTOR.services_by_name["Plugin"].full_name
"""``nri.pkg.api.v1alpha1.Plugin``: the service podpin serves."""

RUNTIME_SERVICE = pb.DESCRIPTOR.services_by_name["Runtime"].full_name
"""``nri.pkg.api.v1alpha1.Runtime``: the service the runtime serves."""

SUBSCRIBED_EVENTS = (
    pb.RUN_POD_SANDBOX,
    pb.STOP_POD_SANDBOX,
    pb.REMOVE_POD_SANDBOX,
    pb.CREATE_CONTAINER,
    pb.UPDATE_CONTAINER,
    pb.STOP_CONTAINER,
    pb.REMOVE_CONTAINER,
)
"""The events podpin handles - all of them exist in NRI v0.6.1 (containerd 1.7.24) and later."""

EVENT_MASK = sum(1 << (event - 1) for event in SUBSCRIBED_EVENTS)
"""The ConfigureResponse ``events`` value: bit ``event - 1`` per subscribed event."""

DEFAULT_REQUEST_TIMEOUT = 2.0
"""The runtime's request timeout when it does not say (``DefaultPluginRequestTimeout``)."""

MAX_SYNC_CONTAINERS = 10_000
"""The most containers (and, separately, pods) one Synchronize hands to the handler. A node runs at most a few
hundred pods (110 by default); 100,000 containers took 446 MB and missed the runtime's 2 s deadline."""

MAX_SYNC_BYTES = 32 << 20
"""The most request bytes one Synchronize accumulates over its chunks (a runtime that never ends it grew the
agent to 578 MB in 3.3 s). Beyond either bound the rest is counted, not kept, and the last chunk is answered for
what was kept (``truncated``): those containers are pinned from their cgroups instead, as without NRI."""

_BUDGET_SHARE = 0.75
"""The share of the runtime's request timeout the plugin waits for its handler before answering empty."""

_STATE_EVENTS = {
    pb.RUN_POD_SANDBOX: NRIMethod.RUN_POD_SANDBOX,
    pb.STOP_POD_SANDBOX: NRIMethod.STOP_POD_SANDBOX,
    pb.REMOVE_POD_SANDBOX: NRIMethod.REMOVE_POD_SANDBOX,
    pb.REMOVE_CONTAINER: NRIMethod.REMOVE_CONTAINER,
}
"""StateChange events podpin handles, by the name of their dedicated method."""

OutcomeSink = Callable[[CallOutcome], None]
"""Receives one outcome per answered request."""

_EMPTY = b""
"""The encoding of every empty reply message (Empty, RunPodSandboxResponse, ...): protobuf writes no bytes."""


class _InvalidRequestError(Exception):
    """A request podpin cannot read (answered empty, reported ``invalid``)."""


class _SyncAccumulator:
    """One Synchronize's pods and containers over its chunks, converted as each chunk arrives (the raw messages
    are not kept) and bounded by :data:`MAX_SYNC_CONTAINERS` and :data:`MAX_SYNC_BYTES`."""

    def __init__(self) -> None:
        self.pods: list[PodSandbox] = []
        self.containers: list[Container] = []
        self.bytes = 0
        self.chunks = 0
        self.dropped_pods = 0
        self.dropped_containers = 0

    def take(self, request: Any, size: int) -> list[tuple[str, str, str]]:
        """Keep what fits of one chunk; the containers that could not be read (id, name, error)."""
        self.bytes += size
        self.chunks += 1
        full = self.bytes > MAX_SYNC_BYTES
        bad: list[tuple[str, str, str]] = []
        for pod in request.pods:
            if full or len(self.pods) >= MAX_SYNC_CONTAINERS:
                self.dropped_pods += 1
            else:
                self.pods.append(pod_from_pb(pod))
        for raw in request.containers:
            if full or len(self.containers) >= MAX_SYNC_CONTAINERS:
                self.dropped_containers += 1
                continue
            try:
                self.containers.append(container_from_pb(raw))
            except ConvertError as err:
                bad.append((raw.id, raw.name, str(err)))
        return bad

    def left_out(self) -> str:
        """What the bounds left out, in words ('' when nothing)."""
        if not (self.dropped_pods or self.dropped_containers):
            return ""
        return (
            f"Synchronize beyond podpin's bounds ({MAX_SYNC_CONTAINERS} pods, {MAX_SYNC_CONTAINERS} containers, "
            f"{MAX_SYNC_BYTES} bytes; {self.bytes} bytes sent): answered for the first {len(self.pods)} pods and "
            f"{len(self.containers)} containers, {self.dropped_pods} pods and {self.dropped_containers} containers "
            "left out (they are pinned from their cgroups)"
        )


class PluginService:
    """The methods of ``nri.pkg.api.v1alpha1.Plugin`` for one connection.

    Args:
        handler: the decisions.
        worker: runs handler calls.
        handler_timeout: the longest the service waits for the handler (capped
            at 75 % of the runtime's request timeout).
        report: receives one :class:`CallOutcome` per request.
        on_state: called with :attr:`PluginState.CONFIGURED` or
            :attr:`PluginState.SYNCHRONIZED` and what the session knows then
            (:class:`SessionFacts`), as each first happens.
        cancel: set when the connection ends (waiting for the handler stops).
    """

    def __init__(
        self,
        *,
        handler: NRIHandler,
        worker: Calls,
        handler_timeout: float,
        report: OutcomeSink,
        on_state: Callable[[PluginState, SessionFacts], None],
        cancel: threading.Event,
    ) -> None:
        self._handler = handler
        self._worker = worker
        self._handler_timeout = handler_timeout
        self._report = report
        self._on_state = on_state
        self._ended = cancel
        self.configured = threading.Event()
        self.synchronized = threading.Event()
        self.runtime_name = ""
        self.runtime_version = ""
        self._told_timeout: float | None = None  # the runtime's plugin_request_timeout, where its NRI tells it
        self._sync = _SyncAccumulator()

    def methods(self) -> dict[str, Method]:
        """The served methods by name."""
        return {
            NRIMethod.CONFIGURE: self._configure,
            NRIMethod.SYNCHRONIZE: self._synchronize,
            NRIMethod.SHUTDOWN: self._shutdown,
            NRIMethod.RUN_POD_SANDBOX: self._run_pod_sandbox,
            NRIMethod.STOP_POD_SANDBOX: self._stop_pod_sandbox,
            NRIMethod.REMOVE_POD_SANDBOX: self._remove_pod_sandbox,
            NRIMethod.CREATE_CONTAINER: self._create_container,
            NRIMethod.UPDATE_CONTAINER: self._update_container,
            NRIMethod.STOP_CONTAINER: self._stop_container,
            NRIMethod.REMOVE_CONTAINER: self._remove_container,
            NRIMethod.STATE_CHANGE: self._state_change,
        }

    def _configure(self, payload: bytes, _timeout: float | None) -> bytes:
        try:
            request = _decode(pb.ConfigureRequest, payload)
        except _InvalidRequestError as err:
            raise RPCStatusError(StatusCode.INVALID_ARGUMENT, str(err)) from err
        self.runtime_name, self.runtime_version = request.runtime_name, request.runtime_version
        if request.request_timeout > 0:  # NRI v0.7+; v0.6 (containerd 1.7) has no such field
            self._told_timeout = request.request_timeout / 1000
        self.configured.set()
        self._on_state(PluginState.CONFIGURED, self._facts())
        return pb.ConfigureResponse(events=EVENT_MASK).SerializeToString()

    def _synchronize(self, payload: bytes, timeout: float | None) -> bytes:
        try:
            request = _decode(pb.SynchronizeRequest, payload)
        except _InvalidRequestError as err:
            self._outcome(NRIMethod.SYNCHRONIZE, CallResult.INVALID, error=str(err))
            done, self._sync = self._sync, _SyncAccumulator()
            return self._synced(pb.SynchronizeResponse(), done)
        for raw in self._sync.take(request, len(payload)):
            self._outcome(
                NRIMethod.SYNCHRONIZE, CallResult.INVALID, error=raw[2], container_id=raw[0], container_name=raw[1]
            )
        if request.more:
            return pb.SynchronizeResponse(more=True).SerializeToString()
        done, self._sync = self._sync, _SyncAccumulator()
        pods, containers = done.pods, done.containers
        if done.left_out():
            self._outcome(NRIMethod.SYNCHRONIZE, CallResult.TRUNCATED, error=done.left_out())
        response = pb.SynchronizeResponse()
        updates = self._call(
            NRIMethod.SYNCHRONIZE,
            lambda: self._handler.synchronize(tuple(pods), tuple(containers)),
            timeout,
            None,
            None,
        )
        if updates is not None:
            response.update.extend(updates)
        return self._synced(response, done)

    def _synced(self, response: pb.SynchronizeResponse, received: _SyncAccumulator) -> bytes:
        data = response.SerializeToString()
        if not self.synchronized.is_set():
            self.synchronized.set()
            self._on_state(
                PluginState.SYNCHRONIZED,
                self._facts(
                    sync_pods=len(received.pods) + received.dropped_pods,
                    sync_containers=len(received.containers) + received.dropped_containers,
                    sync_chunks=received.chunks,
                    sync_bytes=received.bytes,
                ),
            )
        return data

    def _facts(self, **sync: int) -> SessionFacts:
        return SessionFacts(
            runtime_name=self.runtime_name,
            runtime_version=self.runtime_version,
            request_timeout=self._told_timeout,
            **sync,
        )

    def _shutdown(self, _payload: bytes, _timeout: float | None) -> bytes:
        _log.info("nri.shutdown", runtime=self.runtime_name, runtime_version=self.runtime_version)
        self._outcome(NRIMethod.SHUTDOWN, CallResult.OK)
        return _EMPTY

    def _pod_call(
        self,
        event: NRIMethod,
        request_type: type[PBMessage],
        payload: bytes,
        timeout: float | None,
        call: Callable[[PodSandbox], object],
    ) -> bytes:
        try:
            pod = pod_from_pb(_decode(request_type, payload).pod)
        except _InvalidRequestError as err:
            self._outcome(event, CallResult.INVALID, error=str(err))
            return _EMPTY
        self._call(event, lambda: call(pod), timeout, pod, None, check=_none)
        return _EMPTY

    def _run_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call(
            NRIMethod.RUN_POD_SANDBOX, pb.RunPodSandboxRequest, payload, timeout, self._handler.run_pod_sandbox
        )

    def _stop_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call(
            NRIMethod.STOP_POD_SANDBOX, pb.StopPodSandboxRequest, payload, timeout, self._handler.stop_pod_sandbox
        )

    def _remove_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call(
            NRIMethod.REMOVE_POD_SANDBOX, pb.RemovePodSandboxRequest, payload, timeout, self._handler.remove_pod_sandbox
        )

    def _read_pod_container(
        self, event: NRIMethod, request_type: type[PBMessage], payload: bytes
    ) -> tuple[Any, PodSandbox, Container] | None:
        try:
            request: Any = _decode(request_type, payload)
            return request, pod_from_pb(request.pod), container_from_pb(request.container)
        except (_InvalidRequestError, ConvertError) as err:
            self._outcome(event, CallResult.INVALID, error=str(err))
            return None

    def _create_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container(NRIMethod.CREATE_CONTAINER, pb.CreateContainerRequest, payload)
        response = pb.CreateContainerResponse()
        if read is None:
            return response.SerializeToString()
        _, pod, container = read

        def answer(result: object) -> pb.CreateContainerResponse:
            if not isinstance(result, CreateResult):
                raise TypeError(f"create_container returned {type(result).__name__}, not CreateResult")
            built = pb.CreateContainerResponse()
            adjust = adjustment_to_pb(result.adjustment)
            if adjust is not None:
                built.adjust.CopyFrom(adjust)
            built.update.extend(updates_to_pb(result.updates))
            return built

        built = self._call(
            NRIMethod.CREATE_CONTAINER,
            lambda: self._handler.create_container(pod, container),
            timeout,
            pod,
            container,
            check=answer,
        )
        return (built or response).SerializeToString()

    def _update_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container(NRIMethod.UPDATE_CONTAINER, pb.UpdateContainerRequest, payload)
        if read is None:
            return _EMPTY
        request, pod, container = read
        try:
            requested = (
                resources_from_pb("UpdateContainerRequest.linux_resources", request.linux_resources)
                if request.HasField("linux_resources")
                else None
            )
        except ConvertError as err:
            self._outcome(NRIMethod.UPDATE_CONTAINER, CallResult.INVALID, error=str(err), container_id=container.id)
            return _EMPTY
        updates = self._call(
            NRIMethod.UPDATE_CONTAINER,
            lambda: self._handler.update_container(pod, container, requested),
            timeout,
            pod,
            container,
        )
        return pb.UpdateContainerResponse(update=updates or []).SerializeToString()

    def _stop_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container(NRIMethod.STOP_CONTAINER, pb.StopContainerRequest, payload)
        if read is None:
            return _EMPTY
        _, pod, container = read
        updates = self._call(
            NRIMethod.STOP_CONTAINER, lambda: self._handler.stop_container(pod, container), timeout, pod, container
        )
        return pb.StopContainerResponse(update=updates or []).SerializeToString()

    def _remove_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container(NRIMethod.REMOVE_CONTAINER, pb.RemoveContainerRequest, payload)
        if read is not None:
            _, pod, container = read
            self._call(
                NRIMethod.REMOVE_CONTAINER,
                lambda: self._handler.remove_container(pod, container),
                timeout,
                pod,
                container,
                check=_none,
            )
        return _EMPTY

    def _state_change(self, payload: bytes, timeout: float | None) -> bytes:
        empty = _EMPTY
        try:
            request = _decode(pb.StateChangeEvent, payload)
        except _InvalidRequestError as err:
            self._outcome(NRIMethod.STATE_CHANGE, CallResult.INVALID, error=str(err))
            return empty
        event = _STATE_EVENTS.get(request.event)
        if event is None:
            name = pb.Event.Name(request.event) if request.event in pb.Event.values() else str(request.event)
            self._outcome(NRIMethod.STATE_CHANGE, CallResult.IGNORED, error=f"event {name} is not subscribed")
            return empty
        try:
            pod = pod_from_pb(request.pod)
            container = container_from_pb(request.container) if request.HasField("container") else None
        except ConvertError as err:
            self._outcome(event, CallResult.INVALID, error=str(err))
            return empty
        calls: dict[NRIMethod, Callable[[], object]] = {
            NRIMethod.RUN_POD_SANDBOX: lambda: self._handler.run_pod_sandbox(pod),
            NRIMethod.STOP_POD_SANDBOX: lambda: self._handler.stop_pod_sandbox(pod),
            NRIMethod.REMOVE_POD_SANDBOX: lambda: self._handler.remove_pod_sandbox(pod),
        }
        if container is not None:
            calls[NRIMethod.REMOVE_CONTAINER] = lambda: self._handler.remove_container(pod, container)
        call = calls.get(event)
        if call is None:
            self._outcome(event, CallResult.INVALID, error=f"StateChange {event} without a container")
            return empty
        self._call(event, call, timeout, pod, container, check=_none)
        return empty

    # -- handler calls ---------------------------------------------------------------------
    def _budget(self, timeout: float | None) -> float:
        # the request's own deadline (ttrpc timeout_nano) first, then what Configure told, then NRI's default
        runtime = timeout if timeout is not None and timeout > 0 else self._told_timeout or DEFAULT_REQUEST_TIMEOUT
        return max(0.0, min(self._handler_timeout, _BUDGET_SHARE * runtime))

    def _call(
        self,
        event: NRIMethod,
        fn: Callable[[], object],
        timeout: float | None,
        pod: PodSandbox | None,
        container: Container | None,
        *,
        check: Callable[[object], Any] | None = None,
    ) -> Any:
        """Run one handler call; return its checked answer, or None when the runtime must get an empty one."""
        where = _where(pod, container)
        budget = self._budget(timeout)
        tag = _CallTag(event=event, where=where)
        result: WorkResult = self._worker.call(fn, budget, tag=tag, cancel=self._ended)
        check = check or _updates
        if result.kind is WorkStatus.OK:
            try:
                answer = check(result.value)
            except (TypeError, ValueError) as err:
                self._outcome(event, CallResult.ERROR, seconds=result.seconds, error=f"invalid answer: {err}", **where)
                return None
            self._outcome(event, CallResult.OK, seconds=result.seconds, **where)
            return answer
        if result.kind is WorkStatus.ERROR:
            error = f"{type(result.error).__name__}: {result.error}"
            self._outcome(event, CallResult.ERROR, seconds=result.seconds, error=error, **where)
        elif result.kind is WorkStatus.BUSY:
            self._outcome(event, CallResult.ERROR, error="handler busy: too many calls already waiting", **where)
        elif result.kind is WorkStatus.TIMEOUT:
            error = f"no answer within {budget:.3g}s; answered without adjustment"
            self._outcome(event, CallResult.TIMEOUT, seconds=budget, error=error, **where)
        else:
            error = "connection closed while waiting"
            self._outcome(event, CallResult.ERROR, seconds=result.seconds, error=error, **where)
        return None

    def _outcome(self, event: NRIMethod, result: CallResult, **fields: Any) -> None:
        self._report(CallOutcome(event=event, result=result, **fields))


@dataclass(frozen=True, slots=True, kw_only=True)
class _CallTag:
    """What a handler job is about: the request and its pod and container fields (for a late report)."""

    event: NRIMethod
    where: Mapping[str, str]


def late_outcome(job: Job) -> CallOutcome:
    """The report of an abandoned handler call that has now finished.

    Raises:
        TypeError: the job was not submitted by :class:`PluginService`.
    """
    tag = job.tag
    if not isinstance(tag, _CallTag):
        raise TypeError(f"a handler job without the service's tag: {tag!r}")
    error = None if job.error is None else f"{type(job.error).__name__}: {job.error}"
    return CallOutcome(event=tag.event, result=CallResult.LATE, seconds=job.seconds, error=error, **tag.where)


def _decode(message_type: type[Any], payload: bytes) -> Any:
    try:
        return message_type.FromString(payload)
    except DecodeError as err:
        raise _InvalidRequestError(f"undecodable {message_type.__name__}: {err}") from err


def _none(_value: object) -> None:
    return None


def _updates(value: object) -> list[pb.ContainerUpdate]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"expected a sequence of ContainerUpdate, got {type(value).__name__}")
    return updates_to_pb(value)


def _where(pod: PodSandbox | None, container: Container | None) -> dict[str, str]:
    fields: dict[str, str] = {}
    if pod is not None:
        fields.update(pod_uid=pod.uid, namespace=pod.namespace, pod_name=pod.name)
    if container is not None:
        fields.update(container_id=container.id, container_name=container.name)
    return fields
