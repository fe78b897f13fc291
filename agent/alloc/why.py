"""Why: the facts behind each container's pool and behind a pod's refusal, as the planner hands them over.

The planner decides; this module states its reasons as values
(``docs/design.md``, "Why"): :func:`pool_reason` turns the outcome for one
container (its pool, the pod's admission, the CPU policy) and the container's
own eligibility (:func:`agent.pods.cpu_eligibility`) into a
:class:`~agent.alloc.plan.PoolReason`; :func:`request_facts` gathers a pod's
whole request and what each NUMA node has free for it
(:class:`~agent.alloc.plan.RequestFacts`). The words are
``agent/render/reasons.py``'s. The kubelet has no counterpart: it logs
"Topology Affinity" lines and the allocation error, which say neither.
"""

from __future__ import annotations

from agent.alloc.cpumanager import StaticCPUPolicy
from agent.alloc.plan import ContainerRequest, NUMAFree, Pool, PoolReason, ReasonKind, RequestFacts
from agent.alloc.state import NodeState
from agent.cpuset import CPUSet
from agent.pods import ContainerView, CPUEligibility, PodView, container_exclusive_cpus, cpu_eligibility
from agent.topology import Topology

__all__ = ["pool_reason", "request_facts"]


def pool_reason(
    pod: PodView,
    container: ContainerView,
    *,
    pool: Pool,
    cpus: int,
    from_pod_cpus: bool,
    pinning: bool,
    admitted: bool,
    rejection: str | None,
) -> PoolReason:
    """Why ``container`` runs in ``pool``.

    Args:
        pod, container: the container and its pod.
        pool: where the plan puts it; ``cpus`` the size of its CPU set.
        from_pod_cpus: its pod has a pod bubble (an exclusive slice is carved from it).
        pinning: a CPU policy that pins (``cpuManagerPolicy: static``).
        admitted: its pod is admitted; ``rejection`` the kubelet's reason when it was refused.
    """
    requests, limits = container.resources.requests, container.resources.limits
    eligibility = CPUEligibility.WHOLE_CPUS if pool is Pool.EXCLUSIVE else cpu_eligibility(pod, container)
    if pool is Pool.EXCLUSIVE:
        kind = ReasonKind.EXCLUSIVE
    elif not pinning:
        kind = ReasonKind.NO_CPU_POLICY
    elif not admitted:
        kind = ReasonKind.POD_REJECTED if rejection is not None else ReasonKind.NOT_ADMITTED
    elif eligibility is CPUEligibility.WHOLE_CPUS:
        # Eligible yet holding nothing: a pod-level pod whose own cpu is not whole gets no pod CPUs to carve from.
        kind = ReasonKind.NO_POD_CPUS
    else:
        kind = ReasonKind.NOT_ELIGIBLE
    exclusive = kind is ReasonKind.EXCLUSIVE
    return PoolReason(
        kind=kind,
        pool=pool,
        eligibility=eligibility,
        qos=pod.qos,
        pod_level=pod.has_pod_level_resources,
        exclusive_cpus=cpus if exclusive else 0,
        from_pod_cpus=from_pod_cpus and exclusive,
        cpu_request=requests.get("cpu"),
        cpu_limit=limits.get("cpu"),
        memory_request=requests.get("memory"),
        memory_limit=limits.get("memory"),
        pod_cpu=pod.pod_resources.requests.get("cpu") if pod.pod_resources is not None else None,
        rejection=rejection if kind is ReasonKind.POD_REJECTED else None,
    )


def request_facts(pod: PodView, topology: Topology, cpu: StaticCPUPolicy | None, state: NodeState) -> RequestFacts:
    """The pod's whole request, and what each NUMA node of ``state`` has free for it (CPUs; memory with Static)."""
    containers = tuple(
        ContainerRequest(
            name=c.name,
            kind=c.kind,
            cpu=c.resources.requests.get("cpu"),
            memory=c.resources.requests.get("memory"),
            exclusive_cpus=container_exclusive_cpus(pod, c),
        )
        for c in pod.all_containers
    )
    available = cpu.available(state.cpu) if cpu is not None else CPUSet()
    memory = state.memory
    free = tuple(
        NUMAFree(
            numa=node,
            cpus=len(available & topology.cpus_in_numa(node)),
            memory=memory.machine[node].tables["memory"].free
            if memory is not None and node in memory.machine and "memory" in memory.machine[node].tables
            else None,
        )
        for node in topology.numa_ids
    )
    pod_requests = pod.pod_resources.requests if pod.pod_resources is not None else {}
    return RequestFacts(
        pod_cpu=pod_requests.get("cpu"),
        pod_memory=pod_requests.get("memory"),
        exclusive_cpus=cpu.pod_guaranteed_cpus(pod) if cpu is not None else 0,
        containers=containers,
        free=free,
    )
