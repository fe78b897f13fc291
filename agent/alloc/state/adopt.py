"""Adopting what is already on the node when the checkpoint is missing or corrupt.

Running containers may hold exclusive cpusets written by an earlier podpin (or
set before a crash). Moving them would reset their threads' affinity, so when
the state has to be rebuilt, each pod's observed cpusets are offered to the
planner as if restored from a checkpoint: exclusive slices of the right size,
on assignable CPUs nobody else holds, are kept; a pod bubble is kept when the
pod cgroup (or the union of its containers) has exactly the pod's budget and
contains the kept slices, and with it the pod shared pool its sharing
containers hold. What is kept then passes the stale rule
(:mod:`agent.alloc.cpumanager.restore`) like a restored checkpoint. The kubelet's restart paths (``Allocate`` skips a
container already in the state; ``AllocatePod`` reuses a restored bubble) then
compute only what is missing. Observations that do not fit are dropped, never
forced.

A checkpoint may also be older than the cgroups (a save failed, then the agent
restarted). Its claims are then checked against what the running containers
hold (:func:`contradicted_claims`): a pod the checkpoint gives CPUs that another
pod's running exclusive container holds on its cgroup is released as stale
(``contradicted_by_cgroups``) and admitted again from its own cgroups, rather
than moving that container.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.alloc.cpumanager import CPUState
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, PodView, container_exclusive_cpus, pod_level_cpus, uses_pod_level_path

__all__ = ["Observed", "contradicted_claims", "running_exclusive", "seed_observed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    """The explicit cpusets found on a pod's live cgroups (container name -> cpus; the pod cgroup)."""

    containers: Mapping[str, CPUSet] = field(default_factory=dict)
    pod: CPUSet | None = None


def seed_observed(
    state: CPUState, pod: PodView, observed: Observed, assignable: CPUSet, *, pod_scope: bool
) -> list[str]:
    """Put the usable part of ``observed`` into ``state`` (mutated); returns the container names kept.

    Args:
        state: a working copy of the CPU state, without this pod.
        pod: the pod.
        observed: what its cgroups hold.
        assignable: the shared pool minus reserved CPUs (what exclusive CPUs may come from).
        pod_scope: pod-level pods get a bubble (topologyManagerScope pod).
    """
    kept: dict[str, CPUSet] = {}
    sharing: dict[str, CPUSet] = {}
    claimed = CPUSet()
    for container in pod.all_containers:
        want = container_exclusive_cpus(pod, container)
        cpus = observed.containers.get(container.name)
        if cpus is None or not cpus.is_subset_of(assignable):
            continue
        if want == 0:
            sharing[container.name] = cpus
            continue
        if len(cpus) != want or (container.kind != ContainerKind.INIT and not cpus.is_disjoint(claimed)):
            continue
        kept[container.name] = cpus
        if container.kind != ContainerKind.INIT:
            claimed = claimed | cpus
    bubble: CPUSet | None = None
    if pod_scope and uses_pod_level_path(pod):
        total = pod_level_cpus(pod)
        slices = CPUSet().union(*kept.values())
        candidates = [observed.pod, CPUSet().union(*observed.containers.values())]
        for candidate in candidates:
            if candidate is not None and len(candidate) == total and slices <= candidate <= assignable:
                bubble = candidate
                break
        if total and bubble is None:
            kept = {}
        if bubble is not None:
            # Sharing containers of a bubble hold the pod shared pool (a regular init one: the bubble minus the
            # sidecars before it); kept too, so the entries stay a prefix in spec order.
            for container in pod.all_containers:
                cpus = sharing.get(container.name)
                if (
                    cpus is not None
                    and cpus <= bubble
                    and (container.kind == ContainerKind.INIT or cpus.is_disjoint(claimed))
                ):
                    kept[container.name] = cpus
    for name, cpus in kept.items():
        state.set(pod.uid, name, cpus)
        state.default = state.default - cpus
    if bubble is not None:
        state.pod_entries[pod.uid] = bubble
        state.default = state.default - bubble
    return sorted(kept)


def running_exclusive(pod: PodView, observed: Observed, assignable: CPUSet) -> dict[str, CPUSet]:
    """The exclusive sets ``pod``'s running containers hold on their cgroups: container name -> CPUs.

    Only what can be a container's exclusive slice counts: a container entitled to exclusive CPUs, not terminated
    (by its status), whose cgroup holds exactly as many assignable CPUs. A sharing container's set (a pool) or the
    pod cgroup's never does.
    """
    held: dict[str, CPUSet] = {}
    for container in pod.all_containers:
        cpus = observed.containers.get(container.name)
        want = container_exclusive_cpus(pod, container)
        if cpus is None or want == 0 or container.state == "terminated":
            continue
        if len(cpus) == want and cpus.is_subset_of(assignable):
            held[container.name] = cpus
    return held


def contradicted_claims(
    state: CPUState, live: Iterable[tuple[PodView, Observed]], assignable: CPUSet
) -> dict[str, str]:
    """The pods of ``state`` whose CPUs another pod's running container holds on its cgroup: uid -> why, in words.

    Args:
        state: the restored CPU state (a checkpoint's).
        live: the pods bound to the node with what their cgroups hold.
        assignable: the CPUs exclusive sets may hold (online, not reserved).

    A pod's claim is its containers' entries and its bubble. A pod's own cgroups never contradict it (a set that
    differs from its own entry is said by the shell, ``state.disagrees_with_cgroups``).
    """
    holders: dict[int, tuple[str, str, str]] = {}
    for pod, observed in live:
        for name, cpus in running_exclusive(pod, observed, assignable).items():
            for cpu in cpus:
                holders.setdefault(cpu, (pod.uid, f"{pod.namespace}/{pod.name}", name))
    found: dict[str, str] = {}
    for uid in sorted(set(state.assignments) | set(state.pod_entries)):
        claim = state.pod_entries.get(uid, CPUSet()).union(*state.assignments.get(uid, {}).values())
        others = {cpu: held for cpu in claim if (held := holders.get(cpu)) is not None and held[0] != uid}
        if not others:
            continue
        first = others[min(others)]
        cpus = CPUSet(cpu for cpu, held in others.items() if held == first)
        found[uid] = (
            f"the checkpoint gives it CPUs {cpus}, which the running container {first[2]} of pod {first[1]} "
            "holds on its cgroup"
        )
    return found
