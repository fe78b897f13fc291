"""A project-owned NRI runtime: the containerd side of the NRI socket, for testing podpin's plugin over the wire.

It plays the runtime as containerd/nri's adaptation does (``pkg/adaptation/
adaptation.go`` ``acceptPluginConnections``; ``plugin.go`` ``connect``,
``start``, ``RegisterPlugin``, ``configure``, ``synchronize``; the event
relays), with Go's framing (``tests.support.go_mux``):

1. listen on a unix socket; for each plugin connection serve the Runtime
   service on mux connection 2 and call the Plugin service on connection 1;
2. wait for RegisterPlugin (``registration_timeout``), then call Configure and
   keep the event mask (a mask of 0 means every event), then Synchronize
   (split into ``more`` chunks when ``sync_chunk`` is set; a plugin that
   answers a ``more`` chunk with updates or without ``more`` is closed);
3. relay events the plugin subscribed to, one at a time, each with the
   request timeout; a missed deadline closes the plugin, as containerd's
   ``isFatalError`` does. ``mode=NRIGeneration.V0_8`` sends RunPodSandbox, StopPodSandbox,
   RemovePodSandbox and RemoveContainer as StateChange events (NRI before
   v0.12: containerd 1.7 to 2.2); ``mode=NRIGeneration.HEAD`` calls the dedicated
   methods and falls back to StateChange on Unimplemented, as NRI v0.12 and later
   (containerd 2.3+) does.

Failure modes for tests: ``refuse_registration`` (RegisterPlugin answers
with that error, and - like containerd - the connection is then left
alone), ``close_on_accept``, ``skip_configure``; :meth:`NRIRuntime.stop` and
:meth:`NRIRuntime.start` restart it on the same path; ``GoTrunk.send_raw``
writes malformed bytes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import Message

from agent.nri.proto import nri_pb2 as pb
from tests.support.go_mux import DeadlineExceededError, GoTrunk, RemoteError

__all__ = ["NRIGeneration", "NRIRuntime", "PluginConn", "make_container", "make_pod"]

PLUGIN = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME = "nri.pkg.api.v1alpha1.Runtime"
_PLUGIN_CONN, _RUNTIME_CONN = 1, 2
_UNIMPLEMENTED = 12
_ALL_EVENTS = (1 << 14) - 1

R = TypeVar("R", bound=Message)


class NRIGeneration(StrEnum):
    """Which NRI the emulated runtime speaks: before v0.12 (``V0_8``: events as StateChange, as v0.6.1 in containerd
    1.7.24, v0.8 in 2.0/2.1 and v0.11 in 2.2 send them) or v0.12 and later (``HEAD``: dedicated methods)."""

    V0_8 = "v0.8"
    HEAD = "head"


_STATE_CHANGE_IN_V0_8 = frozenset({"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "RemoveContainer"})
"""The events NRI before v0.12 sends as StateChange: it has no dedicated methods for them."""


def make_pod(uid: str, name: str = "p", namespace: str = "default", sandbox_id: str = "") -> pb.PodSandbox:
    """A PodSandbox as containerd sends it (cgroupfs layout)."""
    pod = pb.PodSandbox(id=sandbox_id or f"sb-{uid}", uid=uid, name=name, namespace=namespace)
    pod.labels["io.kubernetes.pod.uid"] = uid
    pod.annotations["io.kubernetes.cri.sandbox-name"] = name
    pod.linux.cgroup_parent = f"/kubepods/pod{uid}"
    return pod


def make_container(
    container_id: str, pod: pb.PodSandbox, name: str = "c", *, cpus: str = "", quota: int | None = None
) -> pb.Container:
    """A Container as containerd sends it."""
    container = pb.Container(id=container_id, pod_sandbox_id=pod.id, name=name, state=pb.CONTAINER_CREATED)
    container.annotations["io.kubernetes.cri.container-name"] = name
    container.linux.cgroups_path = f"{pod.linux.cgroup_parent}/{container_id}"
    container.linux.resources.cpu.shares.value = 1024
    if cpus:
        container.linux.resources.cpu.cpus = cpus
    if quota is not None:
        container.linux.resources.cpu.quota.value = quota
        container.linux.resources.cpu.period.value = 100000
    return container


@dataclass
class PluginConn:
    """One plugin connection as the runtime sees it."""

    trunk: GoTrunk
    mode: NRIGeneration
    request_timeout: float
    registration: pb.RegisterPluginRequest | None = None
    registered: threading.Event = field(default_factory=threading.Event)
    events: int = 0
    sync_responses: list[pb.SynchronizeResponse] = field(default_factory=list)
    unsolicited: list[pb.UpdateContainersRequest] = field(default_factory=list)
    fail_updates: bool = False
    ready: threading.Event = field(default_factory=threading.Event)

    def subscribed(self, event: int) -> bool:
        return bool(self.events & (1 << (event - 1)))

    def call(self, method: str, request: Message, response_type: type[R], timeout: float | None = None) -> R:
        """One call to the plugin; a missed deadline closes the plugin (containerd's ``isFatalError``)."""
        try:
            payload = self.trunk.call(
                _PLUGIN_CONN, PLUGIN, method, request.SerializeToString(), timeout or self.request_timeout
            )
        except DeadlineExceededError:
            self.trunk.close(f"plugin missed the deadline of {method}")
            raise
        return response_type.FromString(payload)

    def _event(
        self,
        event: pb.Event,
        method: str,
        request: Message,
        response_type: type[R],
        pod: pb.PodSandbox,
        container: pb.Container | None = None,
    ) -> R | None:
        if not self.subscribed(event):
            return None
        if self.mode is NRIGeneration.V0_8 and method in _STATE_CHANGE_IN_V0_8:
            return self._state_change(event, pod, container, response_type)
        try:
            return self.call(method, request, response_type)
        except RemoteError as err:
            if err.code != _UNIMPLEMENTED:
                raise
            return self._state_change(event, pod, container, response_type)

    def _state_change(
        self, event: pb.Event, pod: pb.PodSandbox, container: pb.Container | None, response_type: type[R]
    ) -> R:
        change = pb.StateChangeEvent(event=event, pod=pod)
        if container is not None:
            change.container.CopyFrom(container)
        self.call("StateChange", change, pb.Empty)
        return response_type()

    def run_pod_sandbox(self, pod: pb.PodSandbox) -> pb.RunPodSandboxResponse | None:
        return self._event(
            pb.RUN_POD_SANDBOX, "RunPodSandbox", pb.RunPodSandboxRequest(pod=pod), pb.RunPodSandboxResponse, pod
        )

    def stop_pod_sandbox(self, pod: pb.PodSandbox) -> pb.StopPodSandboxResponse | None:
        return self._event(
            pb.STOP_POD_SANDBOX, "StopPodSandbox", pb.StopPodSandboxRequest(pod=pod), pb.StopPodSandboxResponse, pod
        )

    def remove_pod_sandbox(self, pod: pb.PodSandbox) -> pb.RemovePodSandboxResponse | None:
        return self._event(
            pb.REMOVE_POD_SANDBOX,
            "RemovePodSandbox",
            pb.RemovePodSandboxRequest(pod=pod),
            pb.RemovePodSandboxResponse,
            pod,
        )

    def create_container(self, pod: pb.PodSandbox, container: pb.Container) -> pb.CreateContainerResponse | None:
        return self._event(
            pb.CREATE_CONTAINER,
            "CreateContainer",
            pb.CreateContainerRequest(pod=pod, container=container),
            pb.CreateContainerResponse,
            pod,
        )

    def update_container(
        self, pod: pb.PodSandbox, container: pb.Container, resources: pb.LinuxResources | None = None
    ) -> pb.UpdateContainerResponse | None:
        request = pb.UpdateContainerRequest(pod=pod, container=container)
        if resources is not None:
            request.linux_resources.CopyFrom(resources)
        return self._event(pb.UPDATE_CONTAINER, "UpdateContainer", request, pb.UpdateContainerResponse, pod)

    def stop_container(self, pod: pb.PodSandbox, container: pb.Container) -> pb.StopContainerResponse | None:
        return self._event(
            pb.STOP_CONTAINER,
            "StopContainer",
            pb.StopContainerRequest(pod=pod, container=container),
            pb.StopContainerResponse,
            pod,
        )

    def remove_container(self, pod: pb.PodSandbox, container: pb.Container) -> pb.RemoveContainerResponse | None:
        return self._event(
            pb.REMOVE_CONTAINER,
            "RemoveContainer",
            pb.RemoveContainerRequest(pod=pod, container=container),
            pb.RemoveContainerResponse,
            pod,
            container,
        )

    def shutdown(self) -> None:
        self.call("Shutdown", pb.Empty(), pb.Empty)


class NRIRuntime:
    """The emulated runtime; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        socket_path: Path,
        *,
        mode: NRIGeneration = NRIGeneration.HEAD,
        runtime_name: str = "emulated-containerd",
        runtime_version: str = "1.7.24",
        request_timeout: float = 2.0,
        registration_timeout: float = 5.0,
        pods: Iterable[pb.PodSandbox] = (),
        containers: Iterable[pb.Container] = (),
        sync_chunk: int | None = None,
        refuse_registration: str | None = None,
        close_on_accept: bool = False,
        skip_configure: bool = False,
        tells_timeouts: bool = True,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.mode = mode
        self.runtime_name = runtime_name
        self.runtime_version = runtime_version
        self.request_timeout = request_timeout
        self.registration_timeout = registration_timeout
        self.tells_timeouts = tells_timeouts
        self.pods = list(pods)
        self.containers = list(containers)
        self.sync_chunk = sync_chunk
        self.refuse_registration = refuse_registration
        self.close_on_accept = close_on_accept
        self.skip_configure = skip_configure
        self.accepted: list[float] = []
        self.connections: list[PluginConn] = []
        self.errors: list[str] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Condition()

    def __enter__(self) -> NRIRuntime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Listen on the socket path (a restart uses the same path)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        listener.listen(8)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True, name="nri-runtime")
        self._thread.start()

    def stop(self) -> None:
        """Close the listener and every plugin connection, remove the socket (a runtime going down)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in self.connections:
            conn.trunk.close("runtime stopped")
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def wait_ready(self, timeout: float = 5.0, count: int = 1) -> PluginConn:
        """Wait until ``count`` plugin connections have been synchronized; return the last."""
        deadline = time.monotonic() + timeout
        with self._ready:
            while sum(1 for c in self.connections if c.ready.is_set()) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no synchronized plugin within {timeout}s (errors: {self.errors})")
                self._ready.wait(remaining)
            return [c for c in self.connections if c.ready.is_set()][-1]

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            if self.close_on_accept:
                sock.close()
                continue
            threading.Thread(target=self._plugin, args=(sock,), daemon=True, name="nri-runtime-plugin").start()

    def _plugin(self, sock: socket.socket) -> None:
        conn_ref: list[PluginConn] = []

        def register(payload: bytes) -> tuple[int, str, bytes]:
            conn = conn_ref[0]
            conn.registration = pb.RegisterPluginRequest.FromString(payload)
            conn.registered.set()
            if self.refuse_registration is not None:
                return 3, self.refuse_registration, b""
            return 0, "", b""

        def update(payload: bytes) -> tuple[int, str, bytes]:
            conn = conn_ref[0]
            request = pb.UpdateContainersRequest.FromString(payload)
            conn.unsolicited.append(request)
            failed = list(request.update) if conn.fail_updates else []
            return 0, "", pb.UpdateContainersResponse(failed=failed).SerializeToString()

        trunk = GoTrunk(
            sock,
            {_RUNTIME_CONN: {f"{RUNTIME}/RegisterPlugin": register, f"{RUNTIME}/UpdateContainers": update}},
            (_PLUGIN_CONN,),
        )
        conn = PluginConn(trunk=trunk, mode=self.mode, request_timeout=self.request_timeout)
        conn_ref.append(conn)
        self.connections.append(conn)
        trunk.start()
        try:
            self._handshake(conn)
        except Exception as err:  # recorded for the test to assert on
            self.errors.append(f"{type(err).__name__}: {err}")
            trunk.close(f"handshake failed: {err}")

    def _handshake(self, conn: PluginConn) -> None:
        if not conn.registered.wait(self.registration_timeout):
            conn.trunk.close("plugin registration timed out")
            raise TimeoutError("plugin registration timed out")
        if self.refuse_registration is not None or self.skip_configure:
            return  # containerd logs the failure and leaves the connection as it is
        configure = pb.ConfigureRequest(runtime_name=self.runtime_name, runtime_version=self.runtime_version)
        if self.tells_timeouts:  # NRI v0.7+; v0.6 (containerd 1.7) has no such fields, each request has its deadline
            configure.registration_timeout = int(self.registration_timeout * 1000)
            configure.request_timeout = int(self.request_timeout * 1000)
        reply = conn.call("Configure", configure, pb.ConfigureResponse)
        conn.events = reply.events or _ALL_EVENTS
        for request in self._sync_requests():
            response = conn.call("Synchronize", request, pb.SynchronizeResponse)
            conn.sync_responses.append(response)
            if request.more and (response.update or not response.more):
                conn.trunk.close("plugin does not handle split sync requests")
                raise RuntimeError("plugin does not handle split sync requests")
        with self._ready:
            conn.ready.set()
            self._ready.notify_all()

    def _sync_requests(self) -> Iterator[pb.SynchronizeRequest]:
        pods, containers = list(self.pods), list(self.containers)
        step = self.sync_chunk or max(len(pods), len(containers), 1)
        while True:
            chunk_pods, pods = pods[:step], pods[step:]
            chunk_containers, containers = containers[:step], containers[step:]
            more = bool(pods or containers)
            yield pb.SynchronizeRequest(pods=chunk_pods, containers=chunk_containers, more=more)
            if not more:
                return
