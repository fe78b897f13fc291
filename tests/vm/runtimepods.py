"""Pure: the pods the real-runtime scenarios run, and their manifests with the runtime's own container ids.

With a real containerd the container ids are containerd's (returned by CreateContainer), not derived from the
pod as in ``agentpods``; :func:`manifest` writes a pod's ``status.containerStatuses`` from those ids, for the
containers the (simulated) API server has reported so far, so a scenario can publish the status late, as the
API server does.

The pods fit the 7 allocatable CPUs of the 8-vCPU guest (CPU 0 reserved):

- ``story``: the README's product story (pod-level 4 CPUs: ``database`` 2 exclusive CPUs, ``envoy`` and
  ``log-collector`` sidecars in a 2-CPU pod shared pool);
- ``cache``: a classic Guaranteed pod with one 1-CPU container;
- :func:`bench_pod`: a classic Guaranteed pod of 1-CPU containers, every one exclusive, so each container's
  final set differs from the set it inherits before it is named (the benchmark's containers).

Nothing here touches a file: the host imports it to compute expectations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.vm.agentpods import ContainerSpec, PodSpec, classic_guaranteed_pod, product_story_pod, timestamp

__all__ = [
    "STATUS_DELAY",
    "BALLAST_BYTES",
    "ballast_annotations",
    "ballast_pod",
    "bench_pod",
    "cache_pod",
    "doomed_pod",
    "late_pod",
    "manifest",
    "resize_pod",
    "restart_pod",
    "story_pod",
]

STATUS_DELAY = 2.0
"""Seconds between a container starting and its containerID reaching the (simulated) API server."""


def story_pod(order: int = 1, *, suffix: str = "") -> PodSpec:
    """The product story pod (see the module docstring), its uid varied by ``suffix`` (one hex digit)."""
    base = product_story_pod(order)
    uid = base.uid if not suffix else base.uid[:-1] + suffix
    return PodSpec(
        name=base.name + (f"-{suffix}" if suffix else ""),
        namespace=base.namespace,
        uid=uid,
        created=base.created,
        qos=base.qos,
        pod_cpu=base.pod_cpu,
        containers=base.containers,
    )


def cache_pod(order: int = 2, *, suffix: str = "0") -> PodSpec:
    """A classic Guaranteed pod, one container ``main`` of 1 exclusive CPU."""
    return classic_guaranteed_pod(f"cache-{suffix}", f"5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f{suffix}", order)


def late_pod(order: int, *, suffix: str = "9") -> PodSpec:
    """A classic 1-CPU pod started after containerd was restarted; ``suffix`` (one hex digit) varies its uid (and
    so its log directory) for a second restart in the same boot."""
    return classic_guaranteed_pod("after-restart", f"6a1b2c3d-4e5f-4061-8273-94a5b6c7d8e{suffix}", order)


BALLAST_BYTES = 900 << 10
"""The annotation bytes of one ballast pod: six of them make a Synchronize larger than ttrpc's 4 MiB message."""


def ballast_pod(order: int, index: int) -> PodSpec:
    """Ballast pod ``index`` (0-15): one Burstable 100m container, on the shared pool; only its sandbox is run, with
    :func:`ballast_annotations`, to make the runtime's Synchronize large."""
    return PodSpec(
        name=f"ballast-{index}",
        namespace="default",
        uid=f"ba11a570-0000-4000-8000-00000000000{index:x}",
        created=timestamp(order),
        qos="burstable",
        containers=(
            ContainerSpec(name="main", cpu_request="100m", cpu_limit=None, memory_request="16Mi", memory_limit=None),
        ),
    )


def ballast_annotations(index: int) -> dict[str, str]:
    """:data:`BALLAST_BYTES` of pod annotations (a real pod's are capped at 256 KiB by the API server, but 110 pods
    of 40 KiB each make a Synchronize of the same size)."""
    return {f"ballast.podpin.test/{index}": "x" * BALLAST_BYTES}


def restart_pod(order: int) -> PodSpec:
    """A classic 1-CPU pod whose status is never published: only its bundle names its container."""
    return classic_guaranteed_pod("no-status", "7b2c3d4e-5f60-4172-8384-a5b6c7d8e9fa", order)


def doomed_pod(order: int) -> PodSpec:
    """A classic pod of three 1-CPU containers, deleted while its containers are being created."""
    return PodSpec(
        name="doomed",
        namespace="default",
        uid="8c3d4e5f-6071-4283-9495-b6c7d8e9fa0b",
        created=timestamp(order),
        qos="guaranteed",
        containers=tuple(
            ContainerSpec(name=f"c{i}", cpu_request="1", cpu_limit="1", memory_request="32Mi", memory_limit="32Mi")
            for i in range(3)
        ),
    )


def resize_pod(order: int) -> PodSpec:
    """A Guaranteed pod of one exclusive container ``x`` (1 CPU) and one fractional container ``s`` (500m, on the
    shared pool): the pool ``s`` runs on shrinks when another pod takes an exclusive CPU."""
    return PodSpec(
        name="resize",
        namespace="default",
        uid="9d4e5f60-7182-4394-a5b6-c7d8e9fa0b1c",
        created=timestamp(order),
        qos="guaranteed",
        containers=(
            ContainerSpec(name="x", cpu_request="1", cpu_limit="1", memory_request="32Mi", memory_limit="32Mi"),
            ContainerSpec(name="s", cpu_request="500m", cpu_limit="500m", memory_request="32Mi", memory_limit="32Mi"),
        ),
    )


def bench_pod(index: int, containers: int) -> PodSpec:
    """Benchmark pod ``index``: ``containers`` containers of one exclusive CPU each (classic Guaranteed)."""
    return PodSpec(
        name=f"bench-{index}",
        namespace="bench",
        uid=f"b0000000-0000-4000-8000-{index:012x}",
        created=timestamp(10 + index),
        qos="guaranteed",
        containers=tuple(
            ContainerSpec(name=f"x{i}", cpu_request="1", cpu_limit="1", memory_request="16Mi", memory_limit="16Mi")
            for i in range(containers)
        ),
    )


def manifest(spec: PodSpec, ids: Mapping[str, str]) -> dict[str, Any]:
    """The Pod object with ``status.containerStatuses`` naming each container of ``ids`` (name -> runtime id).

    An empty ``ids`` gives the pod as the API server has it before the kubelet reported anything (no status).
    """
    pod = spec.manifest(started=())
    if not ids:
        return pod
    qos = {"guaranteed": "Guaranteed", "burstable": "Burstable", "besteffort": "BestEffort"}[spec.qos]

    def statuses(sidecar: bool) -> list[dict[str, Any]]:
        return [
            {
                "name": c.name,
                "containerID": f"containerd://{ids[c.name]}",
                "ready": True,
                "started": True,
                "state": {"running": {"startedAt": spec.created}},
            }
            for c in spec.containers
            if c.sidecar == sidecar and c.name in ids
        ]

    pod["status"] = {
        "phase": "Running",
        "qosClass": qos,
        "containerStatuses": statuses(False),
        "initContainerStatuses": statuses(True),
    }
    return pod
