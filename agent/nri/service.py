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
3. the subscribed events, one at a time: a runtime with NRI after v0.8.0 calls
   the dedicated methods (RunPodSandbox, StopPodSandbox, RemovePodSandbox,
   RemoveContainer); NRI v0.8.0 (containerd 1.7) sends those four as
   ``StateChange`` events. Both are served. CreateContainer, UpdateContainer
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
from collections.abc import Callable, Sequence
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
from agent.nri.report import CallOutcome, CallResult
from agent.nri.ttrpc import Method, RPCStatus, StatusCode
from agent.nri.worker import HandlerWorker, Job, WorkResult

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "EVENT_MASK",
    "PLUGIN_SERVICE",
    "RUNTIME_SERVICE",
    "SUBSCRIBED_EVENTS",
    "PluginService",
    "Report",
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
"""The events podpin handles - all of them exist in NRI v0.8.0 (containerd 1.7)."""

EVENT_MASK = sum(1 << (event - 1) for event in SUBSCRIBED_EVENTS)
"""The ConfigureResponse ``events`` value: bit ``event - 1`` per subscribed event."""

DEFAULT_REQUEST_TIMEOUT = 2.0
"""The runtime's request timeout when it does not say (``DefaultPluginRequestTimeout``)."""

_BUDGET_SHARE = 0.75
"""The share of the runtime's request timeout the plugin waits for its handler before answering empty."""

_STATE_EVENTS = {
    pb.RUN_POD_SANDBOX: "RunPodSandbox",
    pb.STOP_POD_SANDBOX: "StopPodSandbox",
    pb.REMOVE_POD_SANDBOX: "RemovePodSandbox",
    pb.REMOVE_CONTAINER: "RemoveContainer",
}
"""StateChange events podpin handles, by the name of their dedicated method."""

Report = Callable[[CallOutcome], None]
"""Receives one outcome per answered request."""

_EMPTY = b""
"""The encoding of every empty reply message (Empty, RunPodSandboxResponse, ...): protobuf writes no bytes."""


class _Invalid(Exception):
    """A request podpin cannot read (answered empty, reported ``invalid``)."""


class PluginService:
    """The methods of ``nri.pkg.api.v1alpha1.Plugin`` for one connection.

    Args:
        handler: the decisions.
        worker: runs handler calls.
        handler_timeout: the longest the service waits for the handler (capped
            at 75 % of the runtime's request timeout).
        report: receives one :class:`CallOutcome` per request.
        on_state: called with ``"configured"`` or ``"synchronized"``, the
            runtime's name and version, as each first happens.
        cancel: set when the connection ends (waiting for the handler stops).
    """

    def __init__(
        self,
        *,
        handler: NRIHandler,
        worker: HandlerWorker,
        handler_timeout: float,
        report: Report,
        on_state: Callable[[str, str, str], None],
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
        self._request_timeout = DEFAULT_REQUEST_TIMEOUT
        self._sync_pods: list[pb.PodSandbox] = []
        self._sync_containers: list[pb.Container] = []

    def methods(self) -> dict[str, Method]:
        """The served methods by name."""
        return {
            "Configure": self._configure,
            "Synchronize": self._synchronize,
            "Shutdown": self._shutdown,
            "RunPodSandbox": self._run_pod_sandbox,
            "StopPodSandbox": self._stop_pod_sandbox,
            "RemovePodSandbox": self._remove_pod_sandbox,
            "CreateContainer": self._create_container,
            "UpdateContainer": self._update_container,
            "StopContainer": self._stop_container,
            "RemoveContainer": self._remove_container,
            "StateChange": self._state_change,
        }

    def _configure(self, payload: bytes, timeout: float | None) -> bytes:
        try:
            request = _decode(pb.ConfigureRequest, payload)
        except _Invalid as err:
            raise RPCStatus(StatusCode.INVALID_ARGUMENT, str(err)) from err
        self.runtime_name, self.runtime_version = request.runtime_name, request.runtime_version
        if request.request_timeout > 0:
            self._request_timeout = request.request_timeout / 1000
        self.configured.set()
        self._on_state("configured", self.runtime_name, self.runtime_version)
        return pb.ConfigureResponse(events=EVENT_MASK).SerializeToString()

    def _synchronize(self, payload: bytes, timeout: float | None) -> bytes:
        try:
            request = _decode(pb.SynchronizeRequest, payload)
        except _Invalid as err:
            self._outcome("Synchronize", "invalid", error=str(err))
            self._sync_pods, self._sync_containers = [], []
            return self._synced(pb.SynchronizeResponse())
        self._sync_pods.extend(request.pods)
        self._sync_containers.extend(request.containers)
        if request.more:
            return pb.SynchronizeResponse(more=True).SerializeToString()
        raw_pods, raw_containers = self._sync_pods, self._sync_containers
        self._sync_pods, self._sync_containers = [], []
        pods = [pod_from_pb(pod) for pod in raw_pods]
        containers: list[Container] = []
        for raw in raw_containers:
            try:
                containers.append(container_from_pb(raw))
            except ConvertError as err:
                self._outcome("Synchronize", "invalid", error=str(err), container_id=raw.id, container_name=raw.name)
        response = pb.SynchronizeResponse()
        updates = self._call(
            "Synchronize",
            lambda: self._handler.synchronize(tuple(pods), tuple(containers)),
            timeout,
            None,
            None,
        )
        if updates is not None:
            response.update.extend(updates)
        return self._synced(response)

    def _synced(self, response: pb.SynchronizeResponse) -> bytes:
        data = response.SerializeToString()
        if not self.synchronized.is_set():
            self.synchronized.set()
            self._on_state("synchronized", self.runtime_name, self.runtime_version)
        return data

    def _shutdown(self, payload: bytes, timeout: float | None) -> bytes:
        _log.info("nri.shutdown", runtime=self.runtime_name, runtime_version=self.runtime_version)
        self._outcome("Shutdown", "ok")
        return _EMPTY

    def _pod_call(
        self,
        event: str,
        request_type: type[PBMessage],
        payload: bytes,
        timeout: float | None,
        call: Callable[[PodSandbox], object],
    ) -> bytes:
        try:
            pod = pod_from_pb(_decode(request_type, payload).pod)
        except _Invalid as err:
            self._outcome(event, "invalid", error=str(err))
            return _EMPTY
        self._call(event, lambda: call(pod), timeout, pod, None, check=_none)
        return _EMPTY

    def _run_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call("RunPodSandbox", pb.RunPodSandboxRequest, payload, timeout, self._handler.run_pod_sandbox)

    def _stop_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call(
            "StopPodSandbox", pb.StopPodSandboxRequest, payload, timeout, self._handler.stop_pod_sandbox
        )

    def _remove_pod_sandbox(self, payload: bytes, timeout: float | None) -> bytes:
        return self._pod_call(
            "RemovePodSandbox", pb.RemovePodSandboxRequest, payload, timeout, self._handler.remove_pod_sandbox
        )

    def _read_pod_container(
        self, event: str, request_type: type[PBMessage], payload: bytes
    ) -> tuple[Any, PodSandbox, Container] | None:
        try:
            request: Any = _decode(request_type, payload)
            return request, pod_from_pb(request.pod), container_from_pb(request.container)
        except (_Invalid, ConvertError) as err:
            self._outcome(event, "invalid", error=str(err))
            return None

    def _create_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container("CreateContainer", pb.CreateContainerRequest, payload)
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
            "CreateContainer",
            lambda: self._handler.create_container(pod, container),
            timeout,
            pod,
            container,
            check=answer,
        )
        return (built or response).SerializeToString()

    def _update_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container("UpdateContainer", pb.UpdateContainerRequest, payload)
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
            self._outcome("UpdateContainer", "invalid", error=str(err), container_id=container.id)
            return _EMPTY
        updates = self._call(
            "UpdateContainer",
            lambda: self._handler.update_container(pod, container, requested),
            timeout,
            pod,
            container,
        )
        return pb.UpdateContainerResponse(update=updates or []).SerializeToString()

    def _stop_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container("StopContainer", pb.StopContainerRequest, payload)
        if read is None:
            return _EMPTY
        _, pod, container = read
        updates = self._call(
            "StopContainer", lambda: self._handler.stop_container(pod, container), timeout, pod, container
        )
        return pb.StopContainerResponse(update=updates or []).SerializeToString()

    def _remove_container(self, payload: bytes, timeout: float | None) -> bytes:
        read = self._read_pod_container("RemoveContainer", pb.RemoveContainerRequest, payload)
        if read is not None:
            _, pod, container = read
            self._call(
                "RemoveContainer",
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
        except _Invalid as err:
            self._outcome("StateChange", "invalid", error=str(err))
            return empty
        event = _STATE_EVENTS.get(request.event)
        if event is None:
            name = pb.Event.Name(request.event) if request.event in pb.Event.values() else str(request.event)
            self._outcome(f"StateChange({name})", "ignored")
            return empty
        try:
            pod = pod_from_pb(request.pod)
            container = container_from_pb(request.container) if request.HasField("container") else None
        except ConvertError as err:
            self._outcome(event, "invalid", error=str(err))
            return empty
        calls: dict[str, Callable[[], object]] = {
            "RunPodSandbox": lambda: self._handler.run_pod_sandbox(pod),
            "StopPodSandbox": lambda: self._handler.stop_pod_sandbox(pod),
            "RemovePodSandbox": lambda: self._handler.remove_pod_sandbox(pod),
        }
        if container is not None:
            calls["RemoveContainer"] = lambda: self._handler.remove_container(pod, container)
        call = calls.get(event)
        if call is None:
            self._outcome(event, "invalid", error=f"StateChange {event} without a container")
            return empty
        self._call(event, call, timeout, pod, container, check=_none)
        return empty

    # -- handler calls ---------------------------------------------------------------------
    def _budget(self, timeout: float | None) -> float:
        runtime = timeout if timeout is not None and timeout > 0 else self._request_timeout
        return max(0.0, min(self._handler_timeout, _BUDGET_SHARE * runtime))

    def _call(
        self,
        event: str,
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
        result: WorkResult = self._worker.call(fn, budget, tag=(event, where), cancel=self._ended)
        check = check or _updates
        if result.kind == "ok":
            try:
                answer = check(result.value)
            except (TypeError, ValueError) as err:
                self._outcome(event, "error", seconds=result.seconds, error=f"invalid answer: {err}", **where)
                return None
            self._outcome(event, "ok", seconds=result.seconds, **where)
            return answer
        if result.kind == "error":
            error = f"{type(result.error).__name__}: {result.error}"
            self._outcome(event, "error", seconds=result.seconds, error=error, **where)
        elif result.kind == "busy":
            self._outcome(event, "error", error="handler busy: too many calls already waiting", **where)
        elif result.kind == "timeout":
            error = f"no answer within {budget:.3g}s; answered without adjustment"
            self._outcome(event, "timeout", seconds=budget, error=error, **where)
        else:
            self._outcome(event, "error", seconds=result.seconds, error="connection closed while waiting", **where)
        return None

    def _outcome(self, event: str, result: CallResult, **fields: Any) -> None:
        self._report(CallOutcome(event=event, result=result, **fields))


def late_outcome(job: Job) -> CallOutcome:
    """The report of an abandoned handler call that has now finished."""
    event, where = job.tag if isinstance(job.tag, tuple) else ("unknown", {})
    error = None if job.error is None else f"{type(job.error).__name__}: {job.error}"
    return CallOutcome(event=event, result="late", seconds=job.seconds, error=error, **where)


def _decode(message_type: type[Any], payload: bytes) -> Any:
    try:
        return message_type.FromString(payload)
    except DecodeError as err:
        raise _Invalid(f"undecodable {message_type.__name__}: {err}") from err


def _none(value: object) -> None:
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
