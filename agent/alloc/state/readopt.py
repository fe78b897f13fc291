"""Adopting a checkpoint after the machine or the reservation changed: keep what can be kept, move only the rest.

The kubelet refuses a CPU manager checkpoint whose CPU set or reserved set no
longer matches (``pkg/kubelet/cm/cpumanager/policy_static.go`` ``validateState``:
"current set of available CPUs ... doesn't match"; #124066, #84333) and asks
the operator to delete it, after which every running container is re-admitted
from scratch. podpin promises that a running exclusive container never moves,
so on a restart after a CPU hotplug or a change of ``reservedSystemCPUs``,
the reserved amounts or ``strict-cpu-reservation`` it re-adopts the checkpoint
instead (``docs/kubelet-semantics.md``, "Restarts after a hotplug or a
configuration change"):

1. The reserved set (:func:`choose_reserved`): ``reservedSystemCPUs`` when set
   (the operator named the CPUs; pods on them must move). Otherwise the old
   reserved CPUs that are still online, trimmed or topped up to the configured
   count, the top-up taken by topology from CPUs no pod holds first, so a
   change of amount moves a running container only when the free CPUs do not
   suffice.
2. Each exclusive set (container slice, pod bubble) keeps every CPU that is
   still online and not newly reserved. What it lost is replaced from CPUs
   nobody holds, preferring the kept CPUs' core siblings, then their NUMA
   nodes (a container inside a bubble is topped up from its bubble). Each
   change is a :class:`Move` naming the CPUs lost and why, for a Warning Event.
3. A pod whose sets cannot be made whole again is dropped (its CPUs return to
   the pool) and admitted afresh by the caller, like a new pod. A pod the
   change did not touch is never dropped or changed.

Everything here is pure: the old state and the new machine in, the new state
and the report out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from agent.alloc.cpumanager import CPUState
from agent.alloc.cpumanager.assignment.take import TakeOptions, take_by_topology
from agent.alloc.errors import AllocationError
from agent.alloc.state.node import NodeState
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["Move", "Readoption", "choose_reserved", "needs_readoption", "readopt"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """One exclusive set that had to change: a container's slice, or the pod's bubble (``container`` None).

    ``offline`` and ``reserved`` are the CPUs it lost and why; ``added`` what replaced them.
    """

    uid: str
    namespace: str
    name: str
    container: str | None
    before: CPUSet
    after: CPUSet
    offline: CPUSet
    reserved: CPUSet

    @property
    def added(self) -> CPUSet:
        return self.after - self.before

    def why(self) -> str:
        """``CPUs 3 went offline; CPUs 5 are now reserved`` (the parts that apply)."""
        parts = []
        if self.offline:
            parts.append(f"CPUs {self.offline} went offline")
        if self.reserved:
            parts.append(f"CPUs {self.reserved} are now reserved")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Readoption:
    """The re-adopted state, the sets that changed, and the pods dropped (to be admitted again)."""

    state: NodeState
    moves: tuple[Move, ...] = ()
    dropped: tuple[str, ...] = ()


def needs_readoption(state: NodeState, online: CPUSet, reserved: CPUSet, *, strict: bool) -> bool:
    """Whether the checkpoint was written for other online CPUs, another reserved set or the other
    ``strict-cpu-reservation`` setting (the kubelet would refuse it). A state that contradicts itself is not
    re-adopted: validation refuses it.
    """
    if state.online != online or state.reserved != reserved:
        return True
    default, known = state.cpu.default, state.cpu.default | state.cpu.assigned()
    if not default:
        return False
    if strict:  # written without strict: the reserved CPUs sit in the shared pool
        return known == online and reserved.is_subset_of(default) and bool(reserved)
    return known == online - reserved and reserved.is_disjoint(known) and bool(reserved)  # written strict


def _held(state: NodeState) -> CPUSet:
    return state.cpu.assigned()


def choose_reserved(
    state: NodeState, topology: Topology, options: TakeOptions, count: int, explicit: CPUSet
) -> CPUSet | None:
    """The reserved set for a restored state on this machine; None when it cannot be chosen (caller's default).

    See the module docstring, step 1.
    """
    if explicit:
        return explicit
    online = topology.online_cpus
    kept = state.reserved & online
    try:
        if len(kept) >= count:
            return kept if len(kept) == count else take_by_topology(topology, kept, count, options)
        need = count - len(kept)
        free = online - kept - _held(state)
        if len(free) >= need:
            return kept | take_by_topology(topology, free, need, options)
        return kept | take_by_topology(topology, online - kept, need, options)
    except AllocationError:
        return None


def _top_up(topology: Topology, keep: CPUSet, need: int, free: CPUSet, options: TakeOptions) -> CPUSet | None:
    """``need`` CPUs from ``free`` to join ``keep``: core siblings of ``keep`` first, then its NUMA nodes."""
    if need == 0:
        return CPUSet()
    if len(free) < need:
        return None
    siblings = sorted(topology.core_siblings(keep) & free) if keep else []
    picked = CPUSet(siblings[:need])
    rest = need - len(picked)
    if rest == 0:
        return picked
    pool = free - picked
    near = pool & topology.cpus_in_numa(*topology.numa_of(keep)) if keep else CPUSet()
    for candidates in (near, pool):
        if len(candidates) >= rest:
            try:
                return picked | take_by_topology(topology, candidates, rest, options)
            except AllocationError:
                continue
    return None


def readopt(
    state: NodeState, topology: Topology, reserved: CPUSet, *, strict: bool, options: TakeOptions
) -> Readoption:
    """``state`` moved onto this machine's online CPUs and this reserved set (module docstring, steps 2 and 3).

    Args:
        state: the restored checkpoint (validated against itself, not against this machine).
        topology: the machine now.
        reserved: the reserved CPUs now (:func:`choose_reserved`).
        strict: ``strict-cpu-reservation`` now.
        options: how to take CPUs by topology (the static policy's options).
    """
    online = topology.online_cpus
    offline = state.online - online
    newly = reserved - state.reserved
    lost = offline | newly
    cpu = state.cpu
    uids = sorted(set(cpu.assignments) | set(cpu.pod_entries))
    # What stays where it is: every untouched set, and the kept part of every touched one.
    taken = CPUSet()
    for uid in uids:
        taken = taken | (cpu.pod_entries.get(uid, CPUSet()) - lost)
        for cpus in cpu.assignments.get(uid, {}).values():
            taken = taken | (cpus - lost)
    free = online - reserved - taken
    new = CPUState(default=CPUSet(), assignments={}, pod_entries={})
    moves: list[Move] = []
    dropped: list[str] = []
    for uid in uids:
        record = state.pods.get(uid)
        ns, name = (record.namespace, record.name) if record is not None else ("", "")
        pod_moves: list[Move] = []
        bubble = cpu.pod_entries.get(uid)
        new_bubble: CPUSet | None = None
        ok = True
        if bubble is not None:
            keep = bubble - lost
            added = _top_up(topology, keep, len(bubble) - len(keep), free, options)
            if added is None:
                ok = False
            else:
                new_bubble = keep | added
                free = free - added
                if added:
                    pod_moves.append(_move(uid, ns, name, None, bubble, new_bubble, offline, newly))
        containers: dict[str, CPUSet] = {}
        if ok:
            inside = (
                new_bubble - CPUSet().union(*(c - lost for c in cpu.assignments.get(uid, {}).values()))
                if new_bubble is not None
                else None
            )
            for container, cpus in sorted(cpu.assignments.get(uid, {}).items()):
                keep = cpus - lost
                source = inside if inside is not None else free
                added = _top_up(topology, keep, len(cpus) - len(keep), source, options)
                if added is None:
                    ok = False
                    break
                containers[container] = keep | added
                if inside is not None:
                    inside = inside - added
                else:
                    free = free - added
                if added:
                    pod_moves.append(_move(uid, ns, name, container, cpus, keep | added, offline, newly))
        if not ok:
            # Whatever this pod kept or was given goes back to the pool; the caller admits it afresh.
            free = free | CPUSet().union(*(c - lost for c in cpu.assignments.get(uid, {}).values()))
            free = free | (bubble - lost if bubble is not None else CPUSet())
            free = free | (new_bubble if new_bubble is not None else CPUSet())
            free = free | CPUSet().union(*containers.values())
            dropped.append(uid)
            continue
        if new_bubble is not None:
            new.pod_entries[uid] = new_bubble
        if containers:
            new.assignments[uid] = containers
        moves.extend(pod_moves)
    default = online - new.assigned()
    new.default = default - reserved if strict else default
    return Readoption(
        state=replace(state, online=online, reserved=reserved, cpu=new, pods=MappingProxyType(dict(state.pods))),
        moves=tuple(moves),
        dropped=tuple(dropped),
    )


def _move(
    uid: str, ns: str, name: str, container: str | None, before: CPUSet, after: CPUSet, offline: CPUSet, newly: CPUSet
) -> Move:
    return Move(
        uid=uid,
        namespace=ns,
        name=name,
        container=container,
        before=before,
        after=after,
        offline=before & offline,
        reserved=before & newly,
    )
