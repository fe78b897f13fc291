"""Pure: the pods and configuration the end-to-end VM scenarios give ``podpin run``, as the kubelet would see them.

A pod here is described once (:class:`PodSpec`) and yields everything the scenario needs to stand in for the
API server, the kubelet and containerd:

- the manifest for ``--pods-dir``, with ``metadata.uid``, a ``creationTimestamp`` that fixes the admission
  order, and ``status.containerStatuses`` / ``initContainerStatuses`` whose ``containerID`` is
  ``containerd://<64 hex>`` (or no status yet, as before the runtime reported the container);
- the ``cpu.max`` the kubelet with ``cpuManagerPolicy: none`` writes: a container's CPU limit as quota (no
  limit: ``max``), and for the pod the pod-level limit, else the sum of the containers' limits when every
  container has one;
- the container ids, derived from uid and name, so the scopes the scenario creates match the statuses.

Nothing here touches a file: the host imports this module too, to name the same pods in its expectations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.quantity import cpu_millis

__all__ = [
    "CFS_PERIOD_US",
    "SANDBOX",
    "ContainerSpec",
    "E2EPods",
    "PodSpec",
    "agent_config",
    "burstable_pod",
    "classic_guaranteed_pod",
    "container_id",
    "e2e_pods",
    "kubelet_state_none",
    "product_story_pod",
    "shared_pool_pod",
    "timestamp",
]

QoSName = Literal["guaranteed", "burstable", "besteffort"]
SANDBOX = "(sandbox)"
"""The key of a pod's sandbox in observations (not a valid container name, so it never clashes)."""
CFS_PERIOD_US = 100_000
"""The CFS period the kubelet (and podpin's default ``cpuCFSQuotaPeriod``) writes with ``cpu.max``."""


def container_id(uid: str, name: str) -> str:
    """The 64-hex container id of container ``name`` of pod ``uid`` (stable across runs)."""
    return hashlib.sha256(f"{uid}/{name}".encode()).hexdigest()


def _quota(millis: int | None) -> str:
    """``cpu.max`` for a CPU limit in millicores, as the kubelet computes it (``max`` without a limit)."""
    if millis is None:
        return f"max {CFS_PERIOD_US}"
    return f"{millis * CFS_PERIOD_US // 1000} {CFS_PERIOD_US}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSpec:
    """One container: requests and limits (``None`` = not set); ``sidecar`` = restartable init container."""

    name: str
    cpu_request: str
    cpu_limit: str | None
    memory_request: str = "64Mi"
    memory_limit: str | None = "64Mi"
    sidecar: bool = False

    def resources(self) -> dict[str, dict[str, str]]:
        """The ``resources`` stanza of the manifest."""
        requests = {"cpu": self.cpu_request, "memory": self.memory_request}
        limits = {k: v for k, v in (("cpu", self.cpu_limit), ("memory", self.memory_limit)) if v is not None}
        return {"requests": requests, "limits": limits} if limits else {"requests": requests}

    @property
    def kubelet_cpu_max(self) -> str:
        """What the kubelet (``cpuManagerPolicy: none``) writes to the container's ``cpu.max``."""
        return _quota(None if self.cpu_limit is None else cpu_millis(self.cpu_limit))


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSpec:
    """One pod of an end-to-end scenario; see the module docstring."""

    name: str
    namespace: str
    uid: str
    created: str
    """``metadata.creationTimestamp``: podpin admits pods in this order, as ``podpin plan`` does in argv order."""
    qos: QoSName
    """Where the kubelet puts the pod's cgroup (the QoS class the API server computed)."""
    containers: tuple[ContainerSpec, ...]
    pod_cpu: str | None = None
    """Pod-level ``spec.resources`` CPU (request = limit), None for a classic pod."""
    pod_memory: str = "1Gi"

    @property
    def file_name(self) -> str:
        """The manifest's file name in the pods directory."""
        return f"{self.created[:19].replace(':', '')}-{self.namespace}-{self.name}.yaml"

    def container(self, name: str) -> ContainerSpec:
        """The container called ``name``.

        Raises:
            KeyError: naming the pod and the container.
        """
        for container in self.containers:
            if container.name == name:
                return container
        raise KeyError(f"pod {self.namespace}/{self.name} has no container {name!r}")

    def container_id(self, name: str) -> str:
        """The 64-hex id of container ``name`` (its scope is ``cri-containerd-<id>.scope``)."""
        self.container(name)
        return container_id(self.uid, name)

    @property
    def sandbox_id(self) -> str:
        """The id of the pod's sandbox (pause) container, which no container status names."""
        return container_id(self.uid, SANDBOX)

    @property
    def kubelet_cpu_max(self) -> str:
        """The pod cgroup's ``cpu.max`` as the kubelet sets it: pod limit, else the sum of all containers' limits."""
        if self.pod_cpu is not None:
            return _quota(cpu_millis(self.pod_cpu))
        limits = [c.cpu_limit for c in self.containers]
        if any(limit is None for limit in limits):
            return _quota(None)
        return _quota(sum(cpu_millis(limit) for limit in limits if limit is not None))

    def manifest(self, *, started: Sequence[str] | None = None) -> dict[str, Any]:
        """The Pod object; ``started`` names the containers whose status already has a ``containerID``.

        ``started=None`` means all of them; ``()`` gives a pod the kubelet has not reported on yet (no status).
        """
        names = [c.name for c in self.containers] if started is None else list(started)
        spec: dict[str, Any] = {
            "containers": [_container(c) for c in self.containers if not c.sidecar],
        }
        sidecars = [_container(c) for c in self.containers if c.sidecar]
        if sidecars:
            spec["initContainers"] = sidecars
        if self.pod_cpu is not None:
            budget = {"cpu": self.pod_cpu, "memory": self.pod_memory}
            spec["resources"] = {"requests": dict(budget), "limits": dict(budget)}
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "creationTimestamp": self.created,
            },
            "spec": spec,
        }
        if names:
            pod["status"] = {
                "phase": "Running",
                "qosClass": {"guaranteed": "Guaranteed", "burstable": "Burstable", "besteffort": "BestEffort"}[
                    self.qos
                ],
                "containerStatuses": self._statuses(names, sidecar=False),
                "initContainerStatuses": self._statuses(names, sidecar=True),
            }
        return pod

    def _statuses(self, started: Sequence[str], *, sidecar: bool) -> list[dict[str, Any]]:
        return [
            {
                "name": c.name,
                "containerID": f"containerd://{self.container_id(c.name)}",
                "ready": True,
                "started": True,
                "state": {"running": {"startedAt": self.created}},
            }
            for c in self.containers
            if c.sidecar == sidecar and c.name in started
        ]


def _container(c: ContainerSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"name": c.name, "image": f"registry.example.com/{c.name}:1", "resources": c.resources()}
    if c.sidecar:
        body["restartPolicy"] = "Always"
    return body


def timestamp(order: int) -> str:
    """The ``creationTimestamp`` of the pod admitted ``order``-th (one second apart)."""
    return f"2026-01-01T00:{order // 60:02d}:{order % 60:02d}Z"


def product_story_pod(order: int) -> PodSpec:
    """The README's story on 8 CPUs: a 4-CPU pod budget, a 2-CPU exclusive database, two capped sidecars."""
    return PodSpec(
        name="trading-engine",
        namespace="trading",
        uid="0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11",
        created=timestamp(order),
        qos="guaranteed",
        pod_cpu="4",
        containers=(
            ContainerSpec(name="envoy", cpu_request="100m", cpu_limit="1", memory_limit="128Mi", sidecar=True),
            ContainerSpec(name="log-collector", cpu_request="50m", cpu_limit="300m", sidecar=True),
            ContainerSpec(
                name="database", cpu_request="2", cpu_limit="2", memory_request="512Mi", memory_limit="512Mi"
            ),
        ),
    )


def classic_guaranteed_pod(name: str, uid: str, order: int, *, cpu: str = "1") -> PodSpec:
    """A classic Guaranteed pod (no pod-level resources): one container with whole CPUs, request = limit."""
    return PodSpec(
        name=name,
        namespace="default",
        uid=uid,
        created=timestamp(order),
        qos="guaranteed",
        containers=(
            ContainerSpec(name="main", cpu_request=cpu, cpu_limit=cpu, memory_request="128Mi", memory_limit="128Mi"),
        ),
    )


def burstable_pod(name: str, uid: str, order: int) -> PodSpec:
    """An ordinary Burstable pod: 250m requested, 1 CPU limit; podpin pins nothing, its QoS slice confines it."""
    return PodSpec(
        name=name,
        namespace="default",
        uid=uid,
        created=timestamp(order),
        qos="burstable",
        containers=(ContainerSpec(name="nginx", cpu_request="250m", cpu_limit="1", memory_limit="128Mi"),),
    )


def shared_pool_pod(name: str, uid: str, order: int, *, containers: int, pod_cpu: int, exclusive: int = 0) -> PodSpec:
    """A pod-level pod for the pin-latency benchmark: ``exclusive`` whole-CPU containers, the rest in its pod pool.

    The ``pod_cpu - exclusive`` CPUs left form the pod shared pool; each shared container requests 10m, limit 100m.
    """
    specs = [
        ContainerSpec(name=f"x{i}", cpu_request="1", cpu_limit="1", memory_request="16Mi", memory_limit="16Mi")
        for i in range(exclusive)
    ]
    specs += [
        ContainerSpec(name=f"c{i}", cpu_request="10m", cpu_limit="100m", memory_request="8Mi", memory_limit="16Mi")
        for i in range(containers - exclusive)
    ]
    return PodSpec(
        name=name,
        namespace="bench",
        uid=uid,
        created=timestamp(order),
        qos="guaranteed",
        pod_cpu=str(pod_cpu),
        containers=tuple(specs),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class E2EPods:
    """The pods of the end-to-end scenario, in admission order (they fill the 7 allocatable CPUs of 8).

    ``story``, ``cache`` and ``web`` exist before the agent starts; ``new`` (manifest with statuses, then its
    cgroups) and ``late`` (cgroups first, container status later) arrive while it runs.
    """

    story: PodSpec
    cache: PodSpec
    web: PodSpec
    new: PodSpec
    late: PodSpec

    @property
    def initial(self) -> tuple[PodSpec, ...]:
        """The pods present when the agent first starts."""
        return (self.story, self.cache, self.web)

    @property
    def every(self) -> tuple[PodSpec, ...]:
        """All pods, in admission order."""
        return (self.story, self.cache, self.web, self.new, self.late)

    @property
    def exclusive(self) -> tuple[tuple[PodSpec, str], ...]:
        """The containers that get exclusive CPUs (whole-CPU request = limit in a Guaranteed pod)."""
        return ((self.story, "database"), (self.cache, "main"), (self.new, "main"), (self.late, "main"))


def e2e_pods() -> E2EPods:
    """The product story pod, a classic Guaranteed pod and a Burstable pod, then two Guaranteed pods."""
    return E2EPods(
        story=product_story_pod(1),
        cache=classic_guaranteed_pod("cache", "5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f6", 2),
        web=burstable_pod("web", "1f3a5c7e-9b2d-4e6f-8a0c-2d4f6a8c0e44", 3),
        new=classic_guaranteed_pod("new-guaranteed", "6a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9", 4),
        late=classic_guaranteed_pod("late-status", "7b2c3d4e-5f60-4172-8384-a5b6c7d8e9fa", 5),
    )


def agent_config(
    *,
    node_name: str,
    state_dir: str,
    kubelet_state: str,
    reconcile_period: str,
    cgroup_watch: str = "auto",
    metrics_bind_address: str = "127.0.0.1:9363",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The agent configuration of the brief: one reserved CPU, pod scope, best-effort, kubelet policy ``none``.

    Scenarios override the metrics address with ``--metrics-bind-address`` and a free port of the guest.
    """
    config: dict[str, Any] = {
        "nodeName": node_name,
        "cpuManagerPolicy": "static",
        "systemReserved": {"cpu": "1"},
        "topologyManagerPolicy": "best-effort",
        "topologyManagerScope": "pod",
        "cgroupDriver": "systemd",
        "stateDir": state_dir,
        "kubeletCPUManagerStatePath": kubelet_state,
        "reconcilePeriod": reconcile_period,
        "cgroupWatch": cgroup_watch,
        "metricsBindAddress": metrics_bind_address,
        "logFormat": "json",
        "logLevel": "info",
    }
    config.update(extra or {})
    return config


def kubelet_state_none() -> str:
    """A kubelet ``cpu_manager_state`` of ``cpuManagerPolicy: none`` (podpin may write)."""
    return '{"policyName":"none","defaultCpuSet":"","checksum":1}'
