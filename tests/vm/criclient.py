"""Guest side: the CRI RuntimeService calls the kubelet makes, over gRPC on containerd's unix socket.

The messages come from our own minimal ``cri/cri_api.proto`` (package ``runtime.v1``, the wire names and field
numbers of kubernetes/cri-api); each call's gRPC path (``/runtime.v1.RuntimeService/<Method>``) is taken from
that file's service descriptor, so a method name cannot drift from the proto. Only unary calls are used.
Errors become :class:`CRIError` naming the call and the gRPC status.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from tests.vm.cri import cri_api_pb2 as pb

__all__ = ["CRIClient", "CRIError", "pb"]

_SERVICE = pb.DESCRIPTOR.services_by_name["RuntimeService"]
R = TypeVar("R", bound=Message)


class CRIError(RuntimeError):
    """A CRI call failed: the method, the gRPC status code and the runtime's message."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"CRI {method}: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


class CRIClient:
    """A CRI RuntimeService client on a unix socket (one channel, reconnecting by itself after a restart)."""

    def __init__(self, socket: Path, *, timeout: float = 120.0) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel = grpc.insecure_channel(f"unix://{socket}")
        self._calls: dict[str, Callable[..., Any]] = {}

    def _call(self, method: str, request: Message, response: type[R], timeout: float | None) -> R:
        if method not in _SERVICE.methods_by_name:
            raise ValueError(f"cri_api.proto defines no RuntimeService.{method}")
        call = self._calls.get(method)
        if call is None:
            call = self._channel.unary_unary(
                f"/{_SERVICE.full_name}/{method}",
                request_serializer=type(request).SerializeToString,
                response_deserializer=response.FromString,
            )
            self._calls[method] = call
        try:
            result: R = call(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as err:
            code = err.code().name if hasattr(err, "code") and err.code() is not None else "UNKNOWN"
            details = err.details() if hasattr(err, "details") else str(err)
            raise CRIError(method, code, details or "") from None
        return result

    def version(self, *, timeout: float | None = None) -> pb.VersionResponse:
        """``Version``: the runtime's name and version (also how start-up readiness is checked)."""
        return self._call("Version", pb.VersionRequest(version="v1"), pb.VersionResponse, timeout)

    def run_pod_sandbox(self, config: pb.PodSandboxConfig) -> str:
        """``RunPodSandbox``; returns the sandbox id."""
        reply = self._call("RunPodSandbox", pb.RunPodSandboxRequest(config=config), pb.RunPodSandboxResponse, None)
        return str(reply.pod_sandbox_id)

    def stop_pod_sandbox(self, sandbox_id: str) -> None:
        """``StopPodSandbox`` (idempotent)."""
        self._call(
            "StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), pb.StopPodSandboxResponse, None
        )

    def remove_pod_sandbox(self, sandbox_id: str) -> None:
        """``RemovePodSandbox`` (idempotent; removes the sandbox's containers too)."""
        self._call(
            "RemovePodSandbox",
            pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id),
            pb.RemovePodSandboxResponse,
            None,
        )

    def create_container(self, sandbox_id: str, config: pb.ContainerConfig, sandbox: pb.PodSandboxConfig) -> str:
        """``CreateContainer``; returns the container id (containerd stores it; no cgroup exists yet)."""
        request = pb.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox)
        return str(self._call("CreateContainer", request, pb.CreateContainerResponse, None).container_id)

    def start_container(self, container_id: str) -> None:
        """``StartContainer``: containerd creates the task (runc create: the cgroup appears) and starts it."""
        self._call(
            "StartContainer", pb.StartContainerRequest(container_id=container_id), pb.StartContainerResponse, None
        )

    def stop_container(self, container_id: str, *, grace: int = 0) -> None:
        """``StopContainer`` with ``grace`` seconds before SIGKILL (0: at once)."""
        request = pb.StopContainerRequest(container_id=container_id, timeout=grace)
        self._call("StopContainer", request, pb.StopContainerResponse, None)

    def remove_container(self, container_id: str) -> None:
        """``RemoveContainer`` (idempotent)."""
        self._call(
            "RemoveContainer", pb.RemoveContainerRequest(container_id=container_id), pb.RemoveContainerResponse, None
        )

    def update_container_resources(self, container_id: str, linux: pb.LinuxContainerResources) -> None:
        """``UpdateContainerResources`` (an in-place resize): containerd merges ``linux`` into the container's spec
        (which keeps the cpuset it was created with) and runs ``runc update`` with the result, after NRI."""
        request = pb.UpdateContainerResourcesRequest(container_id=container_id, linux=linux)
        self._call("UpdateContainerResources", request, pb.UpdateContainerResourcesResponse, None)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
