"""A client of the kubelet's PodResources gRPC service (the imperative shell around :mod:`.translate`).

The kubelet serves ``v1.PodResourcesLister`` on a unix socket, by default
``/var/lib/kubelet/pod-resources/kubelet.sock`` (config key
``podResourcesSocket``). podpin calls:

* ``GetAllocatableResources``: the node's devices and their NUMA nodes;
* ``Get`` for one pod when the kubelet serves it (gate ``KubeletPodResourcesGet``:
  alpha 1.27, beta and on since 1.34), else ``List`` filtered to that pod. A
  kubelet without the method answers ``UNIMPLEMENTED``; one with the gate off
  answers ``UNKNOWN`` "PodResources API Get method disabled"
  (``pkg/kubelet/apis/podresources/server_v1.go``); either way the client
  falls back to ``List`` and remembers it;
* ``List``: every pod's devices.

gRPC is loaded on the first call, never at import: ``podpin plan`` and
``podpin topology`` must not pay for it, and neither does an agent that never
needs devices (importing ``grpc`` costs about 20 MiB of resident memory).
Every call has a deadline (``timeout``), so a slow or hung kubelet cannot stall
the caller for longer. A missing socket raises :class:`PodResourcesError` with
kind ``missing`` before any gRPC code runs: without the socket podpin
behaves as it did before it knew about devices. After ``UNAVAILABLE`` (the
kubelet restarting) the channel is dropped and the next call dials afresh.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.podresources.model import AllocatableDevices, DeviceAssignments
from agent.podresources.translate import allocatable_from_response, assignments_from_list, assignments_from_pod

if TYPE_CHECKING:
    import grpc
    from google.protobuf.message import Message

__all__ = ["DEFAULT_SOCKET", "ErrorKind", "PodResourcesClient", "PodResourcesError"]

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
"""Where the kubelet serves the PodResources API."""

#: The kubelet's own limit for a PodResources answer (``podresources.DefaultMaxMsgSize``), 16 MiB.
_MAX_MESSAGE = 16 * 1024 * 1024
#: The service's wire name: a method's path is ``/<service>/<method>``.
_SERVICE = "v1.PodResourcesLister"


class ErrorKind(StrEnum):
    """Why a PodResources call gave no answer."""

    MISSING = "missing"
    """No socket: the kubelet does not serve the API on this node."""
    TIMEOUT = "timeout"
    """No answer within the client's timeout."""
    UNAVAILABLE = "unavailable"
    """The socket is there but nobody answers (the kubelet restarting)."""
    ERROR = "error"
    """The kubelet answered with an error."""


class PodResourcesError(RuntimeError):
    """A PodResources call that gave no answer; ``kind`` says why, the message names the socket and method."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PodResourcesClient:
    """Calls the kubelet's PodResources service on ``socket`` with a deadline of ``timeout`` seconds per call."""

    def __init__(
        self,
        socket: Path = DEFAULT_SOCKET,
        *,
        timeout: float = 2.0,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        """Nothing is dialled (nor gRPC loaded) until the first call.

        Args:
            socket: the kubelet's pod-resources socket.
            timeout: seconds each call may take.
            on_problem: told about each malformed entry left out of an answer.
        """
        self.socket = Path(socket)
        self.timeout = timeout
        self.on_problem = on_problem
        self.get_supported: bool | None = None  # None: not tried yet
        self._channel: grpc.Channel | None = None
        self._methods: dict[str, grpc.UnaryUnaryMultiCallable[Message, Message]] | None = None

    def present(self) -> bool:
        """True when the socket exists (the kubelet serves the API on this node)."""
        try:
            return stat.S_ISSOCK(self.socket.stat().st_mode)
        except OSError:
            return False

    # -- calls -----------------------------------------------------------------------------
    def allocatable(self) -> AllocatableDevices:
        """The node's devices (``GetAllocatableResources``).

        Raises:
            PodResourcesError: no socket, no answer within the timeout, or an error answer.
        """
        from agent.podresources.v1 import api_pb2

        response = self._call("GetAllocatableResources", api_pb2.AllocatableResourcesRequest())
        value, problems = allocatable_from_response(response)
        self._report(problems)
        return value

    def list(self) -> DeviceAssignments:
        """Every container's devices (``List``).

        Raises:
            PodResourcesError: no socket, no answer within the timeout, or an error answer.
        """
        from agent.podresources.v1 import api_pb2

        response = self._call("List", api_pb2.ListPodResourcesRequest())
        value, problems = assignments_from_list(response)
        self._report(problems)
        return value

    def get(self, namespace: str, pod: str) -> DeviceAssignments:
        """One pod's containers' devices: ``Get`` where the kubelet serves it, else ``List`` filtered.

        A pod the kubelet does not know (yet) has no devices.

        Raises:
            PodResourcesError: no socket, no answer within the timeout, or an error answer.
        """
        import grpc

        from agent.podresources.v1 import api_pb2

        if self.get_supported is not False:
            request = api_pb2.GetPodResourcesRequest(pod_name=pod, pod_namespace=namespace)
            try:
                response = self._call("Get", request, raw_errors=True)
            except grpc.RpcError as err:
                code, details = err.code(), err.details() or ""
                if code == grpc.StatusCode.UNIMPLEMENTED or "Get method disabled" in details:
                    self.get_supported = False
                elif code == grpc.StatusCode.UNKNOWN and details.endswith("not found"):
                    self.get_supported = True
                    return DeviceAssignments()
                else:
                    raise self._error("Get", err) from err
            else:
                self.get_supported = True
                value, problems = assignments_from_pod(response)
                self._report(problems)
                return value
        everything = self.list()
        return DeviceAssignments.of(
            {
                key: groups
                for key, groups in everything.containers.items()
                if (key.namespace, key.pod) == (namespace, pod)
            }
        )

    def close(self) -> None:
        """Close the channel (a later call dials again)."""
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._methods = None

    # -- plumbing --------------------------------------------------------------------------
    def _report(self, problems: Sequence[str]) -> None:
        if self.on_problem is not None:
            for problem in problems:
                self.on_problem(problem)

    def _connect(self) -> dict[str, grpc.UnaryUnaryMultiCallable[Message, Message]]:
        """The service's three unary methods on a fresh channel (what a generated stub would hold)."""
        if self._methods is None:
            import grpc

            from agent.podresources.v1 import api_pb2

            channel = grpc.insecure_channel(
                f"unix://{self.socket.resolve()}",
                options=[("grpc.max_receive_message_length", _MAX_MESSAGE)],
            )
            responses: dict[str, type[Message]] = {
                "List": api_pb2.ListPodResourcesResponse,
                "GetAllocatableResources": api_pb2.AllocatableResourcesResponse,
                "Get": api_pb2.GetPodResourcesResponse,
            }
            self._channel = channel
            self._methods = {
                name: channel.unary_unary(
                    f"/{_SERVICE}/{name}",
                    request_serializer=_serialize,
                    response_deserializer=response.FromString,
                )
                for name, response in responses.items()
            }
        return self._methods

    def _call(self, method: str, request: Any, *, raw_errors: bool = False) -> Any:
        import grpc

        if not self.present():
            raise PodResourcesError(
                ErrorKind.MISSING, f"{self.socket}: no PodResources socket (the kubelet does not serve it)"
            )
        methods = self._connect()
        try:
            return methods[method](request, timeout=self.timeout)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                self.close()  # the kubelet went away: dial afresh next time
            if raw_errors and err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            raise self._error(method, err) from err

    def _error(self, method: str, err: Any) -> PodResourcesError:
        import grpc

        code = err.code()
        details = " ".join(str(err.details() or "").split())
        where = f"{self.socket}: {method}"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return PodResourcesError(ErrorKind.TIMEOUT, f"{where}: no answer within {self.timeout:g}s")
        if code == grpc.StatusCode.UNAVAILABLE:
            return PodResourcesError(ErrorKind.UNAVAILABLE, f"{where}: the kubelet is not answering ({details})")
        return PodResourcesError(ErrorKind.ERROR, f"{where}: {code.name}: {details}")


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
