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

The calls go through grpclib (gRPC over the pure-Python ``h2`` HTTP/2
implementation), loaded on the first call, never at import: ``podpin plan`` and
``podpin topology`` must not pay for it, and neither does an agent that never
needs devices. grpclib rather than grpcio because of the agent's memory budget
(``docs/design.md``, "Performance goals"): in the running agent, importing
grpcio's C core costs about 9 MiB of resident memory and its calls another
4.5 MiB of threads and buffers (70.2 MiB on a GPU node against a 60 MiB goal);
grpclib and ``h2`` add 1.9 MiB to what the agent already loads (``asyncio``,
``ssl``), 59.9 MiB in all — the figures are in ``docs/benchmarks.md``, "Agent
at rest".

Each call opens its own connection to the socket, runs in a short event loop
of its own (the publisher's thread has none) and closes it: nothing is held
between the publisher's polls, and a restarted kubelet is simply dialled
afresh. Every call has a deadline (``timeout``), so a slow or hung kubelet
cannot stall the caller for longer. A missing socket raises
:class:`PodResourcesError` with kind ``missing`` before any gRPC code runs:
without the socket podpin behaves as it did before it knew about devices.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent.alloc import AllocatableDevices, DeviceAssignments
from agent.podresources.translate import allocatable_from_response, assignments_from_list, assignments_from_pod

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from grpclib.exceptions import GRPCError

__all__ = ["DEFAULT_SOCKET", "MAX_ANSWER_BYTES", "ErrorKind", "PodResourcesClient", "PodResourcesError"]

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
"""Where the kubelet serves the PodResources API."""

MAX_ANSWER_BYTES = 16 << 20
"""The longest PodResources answer read (16 MiB). A ``List`` of 110 pods with 8 devices per container is about
100 KB; a 62 MiB answer took the agent to 258 MB, over the chart's 192 Mi limit, while 16 MiB stays far below."""

#: The service's wire name: a method's path is ``/<service>/<method>``.
_SERVICE = "v1.PodResourcesLister"

_Reply = TypeVar("_Reply", bound="Message")


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


class AnswerTooLarge(Exception):  # noqa: N818 (an outcome the client maps to "unavailable", not an API error)
    """An answer podpin does not read (larger than the cap, or none at all)."""


class _CappedStream:
    """grpclib's HTTP/2 stream, refusing a message longer than ``limit`` before any of it is buffered.

    grpclib reads a message's 5-byte header, then ``recv_data(length)`` until it holds all of it; HTTP/2 flow
    control acknowledges data only as it is read, so refusing the length here keeps at most one window in
    memory. grpclib has no message size option of its own (0.4.9).
    """

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def recv_data(self, size: int) -> bytes:
        if size > self._limit:
            raise AnswerTooLarge(f"an answer of {size} bytes, more than the {self._limit} podpin reads")
        data: bytes = await self._inner.recv_data(size)
        return data


class PodResourcesClient:
    """Calls the kubelet's PodResources service on ``socket`` with a deadline of ``timeout`` seconds per call."""

    def __init__(
        self,
        socket: Path = DEFAULT_SOCKET,
        *,
        timeout: float = 2.0,
        on_problem: Callable[[str], None] | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        """Nothing is dialled (nor gRPC loaded) until the first call.

        Args:
            socket: the kubelet's pod-resources socket.
            timeout: seconds each call may take.
            on_problem: told about each malformed entry left out of an answer.
            max_answer_bytes: the longest answer read; a longer one is "unavailable" before it is buffered.
        """
        self.max_answer_bytes = max_answer_bytes
        self.socket = Path(socket)
        self.timeout = timeout
        self.on_problem = on_problem
        self.get_supported: bool | None = None  # None: not tried yet

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

        response = self._call(
            "GetAllocatableResources", api_pb2.AllocatableResourcesRequest(), api_pb2.AllocatableResourcesResponse
        )
        value, problems = allocatable_from_response(response)
        self._report(problems)
        return value

    def list(self) -> DeviceAssignments:
        """Every container's devices (``List``).

        Raises:
            PodResourcesError: no socket, no answer within the timeout, or an error answer.
        """
        from agent.podresources.v1 import api_pb2

        response = self._call("List", api_pb2.ListPodResourcesRequest(), api_pb2.ListPodResourcesResponse)
        value, problems = assignments_from_list(response)
        self._report(problems)
        return value

    def get(self, namespace: str, pod: str) -> DeviceAssignments:
        """One pod's containers' devices: ``Get`` where the kubelet serves it, else ``List`` filtered.

        A pod the kubelet does not know (yet) has no devices.

        Raises:
            PodResourcesError: no socket, no answer within the timeout, or an error answer.
        """
        from grpclib.const import Status
        from grpclib.exceptions import GRPCError

        from agent.podresources.v1 import api_pb2

        if self.get_supported is not False:
            request = api_pb2.GetPodResourcesRequest(pod_name=pod, pod_namespace=namespace)
            try:
                response = self._send("Get", request, api_pb2.GetPodResourcesResponse)
            except GRPCError as err:
                details = err.message or ""
                if err.status == Status.UNIMPLEMENTED or "Get method disabled" in details:
                    self.get_supported = False
                elif err.status == Status.UNKNOWN and details.endswith("not found"):
                    self.get_supported = True
                    return DeviceAssignments()
                else:
                    raise self._refused("Get", err) from err
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

    # -- plumbing --------------------------------------------------------------------------
    def _report(self, problems: Sequence[str]) -> None:
        if self.on_problem is not None:
            for problem in problems:
                self.on_problem(problem)

    def _call(self, method: str, request: Message, reply: type[_Reply]) -> _Reply:
        """One call; every failure, an error answer included, as a :class:`PodResourcesError`."""
        from grpclib.exceptions import GRPCError

        try:
            return self._send(method, request, reply)
        except GRPCError as err:
            raise self._refused(method, err) from err

    def _send(self, method: str, request: Message, reply: type[_Reply]) -> _Reply:
        """One call; no answer is a :class:`PodResourcesError`, an error answer the kubelet's ``GRPCError``."""
        import asyncio

        from grpclib.const import Status
        from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

        if not self.present():
            raise PodResourcesError(
                ErrorKind.MISSING, f"{self.socket}: no PodResources socket (the kubelet does not serve it)"
            )
        where = f"{self.socket}: {method}"
        timeout = PodResourcesError(ErrorKind.TIMEOUT, f"{where}: no answer within {self.timeout:g}s")
        from google.protobuf.message import DecodeError

        try:
            return asyncio.run(self._unary(method, request, reply))
        except AnswerTooLarge as err:
            raise self._unavailable(where, str(err)) from err
        except DecodeError as err:
            raise self._unavailable(where, f"the answer is not a valid {reply.DESCRIPTOR.name}: {err}") from err
        except AttributeError as err:
            # grpclib 0.4.9 fails this way on a connection torn down before the call runs (a socket whose backlog
            # is full: a clean timeout or two, then every call): a transport failure, like the OSErrors below.
            if err.name != "_transport":
                raise
            raise self._unavailable(where, f"the connection failed ({err})") from err
        except TimeoutError as err:
            raise timeout from err
        except GRPCError as err:
            if err.status == Status.DEADLINE_EXCEEDED:
                raise timeout from err
            if err.status != Status.UNAVAILABLE:
                raise
            raise self._unavailable(where, err.message or "") from err
        except (OSError, ProtocolError, StreamTerminatedError) as err:
            raise self._unavailable(where, str(err) or type(err).__name__) from err

    async def _unary(self, method: str, request: Message, reply: type[_Reply]) -> _Reply:
        """The call on a connection of its own, closed when it is answered (or not)."""
        from grpclib.client import Channel, UnaryUnaryMethod

        channel = Channel(path=str(self.socket))
        try:
            call = UnaryUnaryMethod(channel, f"/{_SERVICE}/{method}", type(request), reply)
            async with call.open(timeout=self.timeout) as stream:
                await stream.send_message(request, end=True)
                stream._stream = _CappedStream(stream._stream, self.max_answer_bytes)  # type: ignore[assignment]  # noqa: SLF001
                answer = await stream.recv_message()
            if answer is None:
                raise AnswerTooLarge("the kubelet ended the call without an answer")
            return answer
        finally:
            channel.close()

    def _unavailable(self, where: str, details: str) -> PodResourcesError:
        return PodResourcesError(
            ErrorKind.UNAVAILABLE, f"{where}: the kubelet is not answering ({' '.join(details.split())})"
        )

    def _refused(self, method: str, err: GRPCError) -> PodResourcesError:
        details = " ".join((err.message or "").split())
        return PodResourcesError(ErrorKind.ERROR, f"{self.socket}: {method}: {err.status.name}: {details}")
