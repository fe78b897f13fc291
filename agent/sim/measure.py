"""What a replay cost: pods admitted and aligned, CPUs pinned, reserved, free and stranded.

Definitions (per model, summed over all nodes of the simulation):

``pods_admitted``
    pods a node's planner admitted (the scheduler found a node and the planner
    accepted the pod).
``numa_aligned``
    admitted pods that hold CPUs of their own (an exclusive slice or a pod
    bubble) all on one NUMA node. Pods that hold none (batch, best-effort) run
    on the node shared pool and are never counted.
``exclusive_cpus``
    CPUs in exclusive container slices: every pinned container of a
    per-container pod; the exclusive slices of a pod-level pod, *not* its pod
    shared pool.
``total_cpus``
    CPUs reserved by pods: exclusive slices plus pod bubbles (a bubble includes
    its pod shared pool and any CPUs its pod leaves unused).
``free_cpus``
    allocatable CPUs (online − reserved) no pod holds, on every node, used or not.
``stranded_cpus``
    free CPUs on NUMA nodes too small for the next pod. The *pinned request*
    of a pod is the number of CPUs it holds from the node in that model
    (:func:`pinned_request`: its bubble for a pod-level pod, else the sum of
    its exclusive containers). The threshold is the smallest pinned request
    among the pods that were *not* admitted; when every pod with a pinned
    request was admitted, the smallest pinned request in the workload. For
    every NUMA node of every node, the free allocatable CPUs on it count as
    stranded when there are fewer of them than the threshold: a pod of that
    size cannot be placed on that NUMA node alone. A workload without pinned
    requests strands nothing (threshold 0).

Pure: reads the replay's snapshots and plans, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent.alloc import Pool
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, PodView, container_exclusive_cpus, pod_level_cpus, uses_pod_level_path
from agent.sim.records import Replay
from agent.topology import Topology

__all__ = ["ModelResult", "measure", "pinned_request", "stranded_threshold"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResult:
    """One model's numbers (module docstring), plus where the pods that did not fit went."""

    pods_total: int
    pods_admitted: int
    pods_unschedulable: int
    pods_rejected: int
    numa_aligned: int
    exclusive_cpus: int
    total_cpus: int
    free_cpus: int
    stranded_cpus: int
    stranded_threshold: int
    allocatable_cpus: int
    nodes_used: int
    admitted_by_template: Mapping[str, int]
    rejections: Mapping[str, int]


def pinned_request(pod: PodView) -> int:
    """CPUs the pod holds from the node once admitted: its bubble, or its exclusive containers.

    For a classic pod, app containers and sidecars run together and regular
    init containers run before them and reuse their CPUs, so the request is
    the larger of the long-running sum and the largest init container.
    """
    if uses_pod_level_path(pod):
        return pod_level_cpus(pod)
    running = sum(container_exclusive_cpus(pod, c) for c in pod.all_containers if c.kind != ContainerKind.INIT)
    init = max(
        (container_exclusive_cpus(pod, c) for c in pod.init_containers if c.kind == ContainerKind.INIT), default=0
    )
    return max(running, init)


def stranded_threshold(pinned: Mapping[str, int], not_admitted: Mapping[str, int]) -> int:
    """The smallest pinned request of a pod not admitted, else of any pod; 0 when no pod pins CPUs.

    Args:
        pinned: template -> pinned request of its pods.
        not_admitted: template -> how many of its pods were not admitted.
    """
    missing = [pinned[t] for t, count in not_admitted.items() if count and pinned.get(t, 0) > 0]
    if missing:
        return min(missing)
    return min((size for size in pinned.values() if size > 0), default=0)


def measure(replay: Replay, topology: Topology) -> ModelResult:
    """The numbers of one model's replay over its topology."""
    templates = list(replay.pinned)
    admitted = dict.fromkeys(templates, 0)
    not_admitted = dict.fromkeys(templates, 0)
    rejections: dict[str, int] = {}
    for outcome in replay.outcomes:
        if outcome.admitted:
            admitted[outcome.template] = admitted.get(outcome.template, 0) + 1
        else:
            not_admitted[outcome.template] = not_admitted.get(outcome.template, 0) + 1
            reason = outcome.reason or "Unknown"
            rejections[reason] = rejections.get(reason, 0) + 1
    threshold = stranded_threshold(replay.pinned, not_admitted)
    aligned = exclusive = total = free = stranded = allocatable_total = used = 0
    for node in replay.nodes:
        state, count = node.state, node.count
        allocatable = state.online - state.reserved
        held = state.cpu.assigned()
        exclusive_mask = 0
        for pod in node.plan.pods:
            cpus = CPUSet()
            for container in pod.containers:
                if container.pool != Pool.NODE_SHARED:
                    cpus = cpus | container.cpus
                if container.pool == Pool.EXCLUSIVE:
                    exclusive_mask |= container.cpus.mask
            if pod.bubble is not None:
                cpus = cpus | pod.bubble
            if cpus and len(topology.numa_of(cpus)) == 1:
                aligned += count
        exclusive += count * len(CPUSet.from_mask(exclusive_mask))
        total += count * len(held)
        free_here = allocatable - held
        free += count * len(free_here)
        allocatable_total += count * len(allocatable)
        used += count if node.plan.pods else 0
        for numa in topology.numa_ids:
            on_numa = len(free_here & topology.cpus_in_numa(numa))
            if on_numa < threshold:
                stranded += count * on_numa
    return ModelResult(
        pods_total=len(replay.outcomes),
        pods_admitted=sum(admitted.values()),
        pods_unschedulable=sum(1 for o in replay.outcomes if o.node is None),
        pods_rejected=sum(1 for o in replay.outcomes if o.node is not None and not o.admitted),
        numa_aligned=aligned,
        exclusive_cpus=exclusive,
        total_cpus=total,
        free_cpus=free,
        stranded_cpus=stranded,
        stranded_threshold=threshold,
        allocatable_cpus=allocatable_total,
        nodes_used=used,
        admitted_by_template=MappingProxyType(admitted),
        rejections=MappingProxyType(dict(sorted(rejections.items()))),
    )
