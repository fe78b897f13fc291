"""Who gets exclusive CPUs and memory: the kubelet's per-container and pod-level tests.

The rules are stated in ``docs/kubelet-semantics.md``, "Eligibility".

Classic pods (no ``spec.resources``): a container gets exclusive CPUs
when the pod is Guaranteed and its cpu request is a whole number of CPUs
(``Value() * 1000 == MilliValue()``), and exclusive memory when the pod is
Guaranteed. Guaranteed already implies request == limit for every container.

Pods with pod-level resources: the pod QoS comes from ``spec.resources``,
so each container must also be *equivalent Guaranteed* on its own
(``IsContainerEquivalentQOSGuaranteed``: cpu request non-zero and equal to the
cpu limit, memory request non-zero and equal to the memory limit). Memory
exclusivity needs only that; CPU exclusivity also needs the integral CPU
request. A container with ``cpu: 500m`` and memory request == limit therefore
gets an exclusive memory slice but shares CPUs. The pod-level totals (the "pod
bubble") are the pod's own integral cpu request and its memory/hugepages
requests, for Guaranteed pods only; a non-integral pod cpu request (4500m)
means no CPU bubble at all.

Comparisons use the planner's integers (millicores, bytes), the granularity the
kubelet itself reads CPU requests at.

Whether the pod-level path is *used* also depends on the node's configuration
(manager policies; ``docs/kubelet-semantics.md``, "When the pod-level path is
used"); :func:`uses_pod_level_path` answers
only the pod's part of that question.
"""

from __future__ import annotations

from types import MappingProxyType

from agent.pods.model import ContainerView, PodView
from agent.pods.qos import QOSClass
from agent.pods.resources import Resources, is_hugepages

__all__ = [
    "is_equivalent_guaranteed",
    "container_exclusive_cpus",
    "container_memory_eligible",
    "container_memory_requests",
    "pod_level_cpus",
    "pod_level_memory",
    "uses_pod_level_path",
]


#: Read on every eligibility check: a module constant costs a dict lookup, an enum member lookup ~45 ns more
#: (Python 3.11), and these checks run for every container of every admission.
_GUARANTEED = QOSClass.GUARANTEED


def _is_memory(name: str) -> bool:
    return name == "memory" or is_hugepages(name)


def _whole_cpus(millis: int) -> int:
    """``Value()`` when ``Value() * 1000 == MilliValue()``, else 0."""
    return millis // 1000 if millis % 1000 == 0 else 0


def is_equivalent_guaranteed(container: ContainerView) -> bool:
    """``IsContainerEquivalentQOSGuaranteed``: cpu and memory each requested (non-zero) at their limit."""
    requests, limits = container.resources.requests, container.resources.limits
    return all(requests.get(name, 0) != 0 and requests.get(name) == limits.get(name) for name in ("cpu", "memory"))


def container_exclusive_cpus(pod: PodView, container: ContainerView) -> int:
    """The kubelet's ``guaranteedCPUs``: how many exclusive CPUs this container gets (0 = shared pool)."""
    if pod.qos != _GUARANTEED:
        return 0
    if pod.has_pod_level_resources and not is_equivalent_guaranteed(container):
        return 0
    return _whole_cpus(container.resources.requests.get("cpu", 0))


def container_memory_eligible(pod: PodView, container: ContainerView) -> bool:
    """Whether the memory manager gives this container its own memory blocks."""
    if pod.qos != _GUARANTEED:
        return False
    return not pod.has_pod_level_resources or is_equivalent_guaranteed(container)


def container_memory_requests(container: ContainerView) -> Resources:
    """The container's ``memory`` and ``hugepages-*`` requests above zero (its memory slice)."""
    requests = container.resources.requests
    return MappingProxyType({name: value for name, value in requests.items() if _is_memory(name) and value > 0})


def pod_level_cpus(pod: PodView) -> int:
    """``podGuaranteedCPUs`` for a pod-level pod: the bubble size in whole CPUs, else 0."""
    if pod.pod_resources is None or pod.qos != _GUARANTEED:
        return 0
    return _whole_cpus(pod.pod_resources.requests.get("cpu", 0))


def pod_level_memory(pod: PodView) -> Resources:
    """The pod-level ``memory`` and ``hugepages-*`` requests above zero, for Guaranteed pods; else empty."""
    if pod.pod_resources is None or pod.qos != _GUARANTEED:
        return MappingProxyType({})
    requests = pod.pod_resources.requests
    return MappingProxyType({name: value for name, value in requests.items() if _is_memory(name) and value > 0})


def uses_pod_level_path(pod: PodView) -> bool:
    """The pod sets ``spec.resources`` and is Guaranteed by them (KEP-5526 applies to it)."""
    return pod.has_pod_level_resources and pod.qos == _GUARANTEED
