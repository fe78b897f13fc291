"""A kubelet PodResources service for tests: real gRPC on a unix socket in a temp directory.

podpin's client must be tested against the wire, not a mock: the emulator is a
real ``grpc.server`` serving ``v1.PodResourcesLister`` from podpin's own
``api.proto``, so the client's channel, deadlines, status codes and protobuf
decoding all run as they do against a kubelet.

Behaviours a test can set:

* the node's devices (:meth:`set_allocatable`) and each container's devices
  (:meth:`set_pod`, :meth:`remove_pod`);
* ``get_mode`` (:class:`GetMode`): ``enabled`` (a kubelet >= 1.34, or the
  gate on), ``disabled`` (the gate off: ``UNKNOWN`` "PodResources API Get
  method disabled", as ``server_v1.go`` answers) or ``unimplemented`` (a
  kubelet older than the method: it is not registered, so gRPC answers
  ``UNIMPLEMENTED``);
* ``delay``: seconds every call waits before answering (a slow kubelet);
* :meth:`stop` and :meth:`start` on the same socket path (a kubelet restart).

Every call is recorded in :attr:`calls` (method names, in order).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable
from concurrent import futures
from enum import StrEnum
from pathlib import Path
from typing import Any

import grpc

from agent.podresources.v1 import api_pb2

__all__ = ["GetMode", "Group", "PodResourcesEmulator"]

Group = tuple[str, tuple[str, ...], tuple[int, ...]]
"""A device group: (resource, device ids, NUMA nodes)."""


class GetMode(StrEnum):
    """How the emulated kubelet answers ``Get``."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    UNIMPLEMENTED = "unimplemented"


_SERVICE = "v1.PodResourcesLister"


def _devices(groups: Iterable[Group]) -> list[api_pb2.ContainerDevices]:
    return [
        api_pb2.ContainerDevices(
            resource_name=resource,
            device_ids=list(ids),
            topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in numa]),
        )
        for resource, ids, numa in groups
    ]


class PodResourcesEmulator:
    """Start with ``with PodResourcesEmulator() as kubelet:``; point a client at ``kubelet.socket``."""

    def __init__(self, directory: Path | None = None, *, get_mode: GetMode = GetMode.ENABLED) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="podpin-podres-") if directory is None else None
        base = Path(self._tmp.name) if self._tmp is not None else directory
        assert base is not None
        self.socket = base / "kubelet.sock"
        self.get_mode = get_mode
        self.delay = 0.0
        self.calls: list[str] = []
        self.raw_list: bytes | None = None
        """When set, ``List`` answers these bytes instead of its message (not protobuf, or a huge one)."""
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._allocatable: list[Group] = []
        self._pods: dict[tuple[str, str], dict[str, list[Group]]] = {}
        self._server: grpc.Server | None = None

    # -- state ---------------------------------------------------------------------------------
    def set_allocatable(self, groups: Iterable[Group]) -> None:
        """The node's devices, as ``GetAllocatableResources`` reports them."""
        with self._lock:
            self._allocatable = list(groups)

    def set_pod(self, namespace: str, name: str, containers: dict[str, list[Group]]) -> None:
        """A pod and its containers' devices (a container with ``[]`` holds none)."""
        with self._lock:
            self._pods[(namespace, name)] = {c: list(g) for c, g in containers.items()}

    def remove_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            self._pods.pop((namespace, name), None)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> PodResourcesEmulator:
        """Serve on :attr:`socket` (again, after :meth:`stop`)."""
        self._release.clear()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list,
                request_deserializer=api_pb2.ListPodResourcesRequest.FromString,
                response_serializer=self._serialize_list,
            ),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                self._allocatable_resources,
                request_deserializer=api_pb2.AllocatableResourcesRequest.FromString,
                response_serializer=api_pb2.AllocatableResourcesResponse.SerializeToString,
            ),
        }
        if self.get_mode != GetMode.UNIMPLEMENTED:
            handlers["Get"] = grpc.unary_unary_rpc_method_handler(
                self._get,
                request_deserializer=api_pb2.GetPodResourcesRequest.FromString,
                response_serializer=api_pb2.GetPodResourcesResponse.SerializeToString,
            )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, handlers),))
        if server.add_insecure_port(f"unix://{self.socket}") == 0:
            raise RuntimeError(f"cannot listen on {self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop serving at once (calls waiting on ``delay`` are released) and remove the socket."""
        self._release.set()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        self.socket.unlink(missing_ok=True)

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> PodResourcesEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- handlers ------------------------------------------------------------------------------
    def _enter(self, method: str) -> None:
        with self._lock:
            self.calls.append(method)
            delay = self.delay
        if delay:
            self._release.wait(delay)

    def _pod(self, namespace: str, name: str, containers: dict[str, list[Group]]) -> api_pb2.PodResources:
        return api_pb2.PodResources(
            name=name,
            namespace=namespace,
            containers=[
                api_pb2.ContainerResources(name=container, devices=_devices(groups))
                for container, groups in containers.items()
            ],
        )

    def _serialize_list(self, message: api_pb2.ListPodResourcesResponse) -> bytes:
        return message.SerializeToString() if self.raw_list is None else self.raw_list

    def _list(self, _request: Any, _context: grpc.ServicerContext) -> api_pb2.ListPodResourcesResponse:
        self._enter("List")
        with self._lock:
            pods = [self._pod(ns, name, containers) for (ns, name), containers in self._pods.items()]
        return api_pb2.ListPodResourcesResponse(pod_resources=pods)

    def _allocatable_resources(
        self, _request: Any, _context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        self._enter("GetAllocatableResources")
        with self._lock:
            return api_pb2.AllocatableResourcesResponse(devices=_devices(self._allocatable))

    def _get(self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext) -> Any:
        self._enter("Get")
        if self.get_mode == GetMode.DISABLED:
            context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        with self._lock:
            containers = self._pods.get((request.pod_namespace, request.pod_name))
            if containers is None:
                context.abort(
                    grpc.StatusCode.UNKNOWN,
                    f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
                )
            return api_pb2.GetPodResourcesResponse(
                pod_resources=self._pod(request.pod_namespace, request.pod_name, containers)
            )
