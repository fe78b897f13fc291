"""Moving a node state onto a topology whose online CPUs changed (hotplug).

The kubelet refuses to start when the CPU set changed (#124066, #84333).
podpin re-plans only the pods that held a CPU that went offline: everything
else keeps its CPUs, CPUs that came online join the node shared pool, and the
pods that lost a CPU are released here and admitted again by the caller (they
have the pod specs). If the reserved set itself changes, pods holding a newly
reserved CPU are re-planned too.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from agent.alloc.cpumanager import CPUState
from agent.alloc.state.node import NodeState
from agent.cpuset import CPUSet

__all__ = ["affected_pods", "rebase_state"]


def _held(state: NodeState, uid: str) -> CPUSet:
    cpus = state.cpu.pod_entries.get(uid, CPUSet())
    for assigned in state.cpu.assignments.get(uid, {}).values():
        cpus = cpus | assigned
    return cpus


def affected_pods(state: NodeState, online: CPUSet, reserved: CPUSet) -> list[str]:
    """Pods holding a CPU that is no longer online, or that is now reserved."""
    lost = state.online - online
    newly_reserved = reserved - state.reserved
    return sorted(
        uid
        for uid in set(state.cpu.assignments) | set(state.cpu.pod_entries)
        if not _held(state, uid).is_disjoint(lost | newly_reserved)
    )


def rebase_state(state: NodeState, online: CPUSet, reserved: CPUSet, *, strict: bool) -> NodeState:
    """The same allocations on the new CPU set; the caller has released every affected pod first.

    Args:
        state: the current state (no pod may hold an offline or newly reserved CPU).
        online: the new online CPUs.
        reserved: the reserved CPUs for the new topology.
        strict: ``strict-cpu-reservation`` (reserved CPUs stay out of the shared pool).

    Raises:
        ValueError: a pod still holds a CPU it cannot keep (the caller forgot to release it).
    """
    remaining = affected_pods(state, online, reserved)
    if remaining:
        raise ValueError(f"pods {remaining} still hold CPUs that went offline or became reserved")
    assigned = state.cpu.assigned()
    default = online - assigned
    if strict:
        default = default - reserved
    cpu = CPUState(
        default=default,
        assignments={uid: dict(c) for uid, c in state.cpu.assignments.items()},
        pod_entries=dict(state.cpu.pod_entries),
    )
    return replace(state, online=online, reserved=reserved, cpu=cpu, pods=MappingProxyType(dict(state.pods)))
