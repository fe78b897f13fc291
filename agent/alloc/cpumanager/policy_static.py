"""The static CPU policy (the kubelet's ``policy_static.go``), classic and pod-level.

A ``StaticCPUPolicy`` holds configuration only — topology, options, the
reserved set — and every method takes the :class:`CPUState` it works on, like
the kubelet's policies. The CPU sets it reasons about (kubelet vocabulary):

* SHARED = ``state.default``: where every non-exclusive container runs;
* RESERVED ⊆ SHARED (or outside it with ``strict-cpu-reservation``): never
  handed out exclusively;
* ASSIGNABLE = SHARED − RESERVED: what exclusive allocations draw from;
* EXCLUSIVE = container assignments and pod bubbles, disjoint from SHARED.

The only state kept between calls is ``cpusToReuse`` (CPUs of the current
pod's finished init containers), exactly as the kubelet keeps it; the planner
clears it at the start of every pod admission.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.alloc.cpumanager.assignment import TakeOptions, take_by_topology
from agent.alloc.cpumanager.assignment.accumulator import not_enough
from agent.alloc.cpumanager.hints import cpu_hints
from agent.alloc.cpumanager.options import CPUPolicyOptions
from agent.alloc.cpumanager.restore import release_stale
from agent.alloc.cpumanager.state import CPUState
from agent.alloc.errors import AllocationError, EmptyPodSharedPoolError, SMTAlignmentError
from agent.alloc.pod_budget import validate_pod_budget
from agent.alloc.topologymanager import CompactProviderHints, HintList, NUMAInfo, TopologyHint
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, ContainerView, PodView, container_exclusive_cpus, pod_level_cpus
from agent.topology import Topology

__all__ = ["StaticCPUPolicy", "PodCPUAllocation", "reserved_cpus_for", "take_options_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PodCPUAllocation:
    """What ``allocate_pod`` did: the bubble, and which containers got an exclusive slice."""

    bubble: CPUSet
    exclusive: tuple[str, ...] = ()
    pod_shared: tuple[str, ...] = ()
    slices: tuple[CPUSet, ...] = field(default=())


def _take_options(topology: Topology, options: CPUPolicyOptions) -> TakeOptions:
    return TakeOptions(
        distribute_across_numa=options.distribute_cpus_across_numa,
        cpu_group_size=topology.cpus_per_core() if options.full_pcpus_only else 1,
        spread=options.distribute_cpus_across_cores,
        prefer_uncore=options.prefer_align_by_uncorecache,
    )


def take_options_for(topology: Topology, options: CPUPolicyOptions) -> TakeOptions:
    """How the static policy takes CPUs by topology on this machine with these options."""
    return _take_options(topology, options)


def reserved_cpus_for(topology: Topology, options: CPUPolicyOptions, count: int, explicit: CPUSet) -> CPUSet:
    """The reserved set: ``reservedSystemCPUs`` if given, else low-numbered cores by take-by-topology.

    Raises:
        AllocationError: the result does not have ``count`` CPUs (the kubelet's start-up error).
    """
    if explicit:
        reserved = explicit
    else:
        try:
            reserved = take_by_topology(topology, topology.online_cpus, count, _take_options(topology, options))
        except AllocationError:
            reserved = CPUSet()
    if len(reserved) != count:
        raise AllocationError(
            f"[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {count})"
        )
    return reserved


class StaticCPUPolicy:
    """Exclusive CPUs for eligible containers, a pod bubble for pod-level pods."""

    def __init__(
        self, topology: Topology, options: CPUPolicyOptions, reserved: CPUSet, numa_info: NUMAInfo | None = None
    ) -> None:
        """Build the policy for a machine.

        Args:
            topology: the machine.
            options: parsed ``cpuManagerPolicyOptions``.
            reserved: the reserved CPUs (see :func:`reserved_cpus_for`).
            numa_info: the topology manager's NUMA nodes (large machines get bitmap hints over them).
        """
        self.topology = topology
        self.numa_info = numa_info
        self.options = options
        self.reserved = reserved
        self.reserved_physical = topology.core_siblings(reserved)
        self.cpu_group_size = topology.cpus_per_core()
        self._take_options = _take_options(topology, options)
        self._reuse: dict[str, CPUSet] = {}

    # -- pools ---------------------------------------------------------------------------
    def available(self, state: CPUState) -> CPUSet:
        """ASSIGNABLE: the shared pool minus reserved CPUs."""
        return state.default - self.reserved

    def available_physical(self, state: CPUState) -> CPUSet:
        """The shared pool minus every core sibling of a reserved CPU (``full-pcpus-only``)."""
        return state.default - self.reserved_physical

    def take(self, available: CPUSet, count: int) -> CPUSet:
        """take-by-topology with the configured options (the kubelet's ``p.takeByTopology``)."""
        return take_by_topology(self.topology, available, count, self._take_options)

    def start_pod(self, pod_uid: str) -> None:
        """Forget reusable init-container CPUs before a (re-)admission of this pod."""
        self._reuse.pop(pod_uid, None)

    # -- hints ---------------------------------------------------------------------------
    def _generate_hints(self, available: CPUSet, reusable: CPUSet, request: int) -> list[TopologyHint] | HintList:
        """``generateCPUTopologyHints`` (see :mod:`agent.alloc.cpumanager.hints`)."""
        return cpu_hints(
            self.topology,
            available,
            reusable,
            request,
            align_by_socket=self.options.align_by_socket,
            numa_info=self.numa_info,
        )

    def container_hints(self, state: CPUState, pod: PodView, container: ContainerView) -> CompactProviderHints:
        """``GetTopologyHints``: None (no preference) for shared containers."""
        requested = container_exclusive_cpus(pod, container)
        if requested == 0:
            return None
        allocated = state.get(pod.uid, container.name)
        if allocated is not None:
            if len(allocated) != requested:
                return {"cpu": []}
            return {"cpu": self._generate_hints(allocated, CPUSet(), requested)}
        return {"cpu": self._generate_hints(self.available(state), self._reuse.get(pod.uid, CPUSet()), requested)}

    def pod_guaranteed_cpus(self, pod: PodView) -> int:
        """``podGuaranteedCPUs``: the pod-level budget, or the KEP-753 aggregate of container CPUs."""
        if pod.has_pod_level_resources:
            return pod_level_cpus(pod)
        by_init = 0
        by_sidecars = 0
        for container in pod.init_containers:
            if "cpu" not in container.resources.requests:
                continue
            cpus = container_exclusive_cpus(pod, container)
            if container.kind == ContainerKind.SIDECAR:
                by_sidecars += cpus
            elif by_sidecars + cpus > by_init:
                by_init = by_sidecars + cpus
        by_apps = sum(container_exclusive_cpus(pod, c) for c in pod.containers if "cpu" in c.resources.requests)
        return max(by_init, by_apps + by_sidecars)

    def pod_hints(self, state: CPUState, pod: PodView) -> CompactProviderHints:
        """``GetPodTopologyHints``: one set of hints for the whole pod (pod scope)."""
        requested = self.pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        if pod.has_pod_level_resources:
            try:
                validate_pod_budget(pod, "cpu", requested, lambda c: container_exclusive_cpus(pod, c))
            except EmptyPodSharedPoolError:
                return {"cpu": []}
            bubble = state.pod_entries.get(pod.uid)
            if bubble is not None:
                if len(bubble) != requested:
                    return {"cpu": []}
                return {"cpu": self._generate_hints(bubble, CPUSet(), requested)}
            return {"cpu": self._generate_hints(self.available(state), CPUSet(), requested)}
        assigned = CPUSet()
        for container in pod.all_containers:
            allocated = state.get(pod.uid, container.name)
            if allocated is not None:
                if len(allocated) != container_exclusive_cpus(pod, container):
                    return {"cpu": []}
                assigned = assigned | allocated
        if len(assigned) == requested:
            return {"cpu": self._generate_hints(assigned, CPUSet(), requested)}
        reusable = self._reuse.get(pod.uid, CPUSet()) | assigned
        return {"cpu": self._generate_hints(self.available(state), reusable, requested)}

    # -- allocation ----------------------------------------------------------------------
    def _check_smt(self, state: CPUState, count: int) -> None:
        if not self.options.full_pcpus_only:
            return
        if count % self.cpu_group_size != 0:
            raise SMTAlignmentError(
                f"SMT Alignment Error: requested {count} cpus not multiple cpus per core = {self.cpu_group_size}"
            )
        physical = len(self.available_physical(state))
        if count > physical:
            raise SMTAlignmentError(
                f"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {physical}, "
                f"requested CPUs = {count}, CPUs per core = {self.cpu_group_size}"
            )

    def aligned_cpus(self, affinity: int, allocatable: CPUSet) -> CPUSet:
        """CPUs of the hinted NUMA nodes (or of their whole sockets with ``align-by-socket``)."""
        nodes = tuple(n for n in range(affinity.bit_length()) if affinity >> n & 1)
        if self.options.align_by_socket:
            return allocatable & self.topology.cpus_in_sockets(*self.topology.sockets_in_numa(*nodes))
        return allocatable & self.topology.cpus_in_numa(*nodes)

    def allocate_cpus(self, state: CPUState, count: int, affinity: int | None, reusable: CPUSet) -> CPUSet:
        """``allocateCPUs``: aligned CPUs first, the rest anywhere; removes the result from SHARED.

        A request larger than everything allocatable fails up front with the whole
        request and the whole supply. The kubelet fails the same requests, but in
        its second take, after the aligned CPUs are taken, so its message gives the
        remainder and what is left outside the hinted NUMA nodes ("requested=16,
        available=0" for a 40-CPU pod whose hinted node had 24): true of that last
        step, misleading about the pod (``docs/kubelet-semantics.md``,
        "Known upstream problems podpin avoids").

        Raises:
            AllocationError: not enough CPUs.
        """
        allocatable = self.available(state) | reusable
        if count > len(allocatable):
            raise not_enough(count, len(allocatable))
        result = CPUSet()
        if affinity is not None:
            aligned = self.aligned_cpus(affinity, allocatable)
            result = self.take(aligned, min(count, len(aligned)))
        result = result | self.take(allocatable - result, count - len(result))
        state.default = state.default - result
        return result

    def allocate(self, state: CPUState, pod: PodView, container: ContainerView, affinity: int | None) -> CPUSet | None:
        """``Allocate``: exclusive CPUs for an eligible container; None when it stays shared.

        Raises:
            SMTAlignmentError: ``full-pcpus-only`` cannot be honoured.
            AllocationError: not enough CPUs.
        """
        count = container_exclusive_cpus(pod, container)
        if count == 0:
            return None
        self._check_smt(state, count)
        existing = state.get(pod.uid, container.name)
        if existing is not None:
            self._update_reuse(pod, container, existing)
            return existing
        cpus = self.allocate_cpus(state, count, affinity, self._reuse.get(pod.uid, CPUSet()))
        state.set(pod.uid, container.name, cpus)
        self._update_reuse(pod, container, cpus)
        return cpus

    def _update_reuse(self, pod: PodView, container: ContainerView, cpus: CPUSet) -> None:
        """``updateCPUsToReuse``: regular init containers lend their CPUs to later containers."""
        for uid in [uid for uid in self._reuse if uid != pod.uid]:
            del self._reuse[uid]
        reuse = self._reuse.get(pod.uid, CPUSet())
        if container.kind == ContainerKind.INIT:
            self._reuse[pod.uid] = reuse | cpus
        else:
            # App containers and sidecars keep their CPUs for the pod's whole life.
            self._reuse[pod.uid] = reuse - cpus

    def allocate_pod(self, state: CPUState, pod: PodView, affinity: int | None) -> PodCPUAllocation | None:
        """``AllocatePod`` (KEP-5526): carve the pod bubble and partition it.

        A bubble restored from the state is reused as-is; only containers
        without an assignment are (re)computed from it, with the same rules.
        A restored allocation that breaks the stale rule
        (:mod:`agent.alloc.cpumanager.restore`) is released first and the pod
        allocated from scratch, as the kubelet does since PR 141041 (inside an
        admission :func:`~agent.alloc.admission.admit_pod` has already released
        and reported it).

        Raises:
            EmptyPodSharedPoolError: the exclusive containers leave no pod shared pool.
            SMTAlignmentError: ``full-pcpus-only`` on the pod total.
            AllocationError: not enough CPUs for the bubble or a slice.
        """
        total = self.pod_guaranteed_cpus(pod)
        if total == 0:
            return None
        validate_pod_budget(pod, "cpu", total, lambda c: container_exclusive_cpus(pod, c))
        release_stale(state, pod, pod_level=True)
        bubble = state.pod_entries.get(pod.uid)
        if bubble is None:
            self._check_smt(state, total)
            bubble = self.allocate_cpus(state, total, affinity, CPUSet())
            state.pod_entries[pod.uid] = bubble
        return self._partition(state, pod, bubble)

    def _partition(self, state: CPUState, pod: PodView, bubble: CPUSet) -> PodCPUAllocation:
        """Give every container of the pod its part of ``bubble``.

        Exclusive slices already held are kept (they are a prefix in spec order: the stale rule); a sharing
        container's set is derived from the slices, so it is always computed again, and equals the one held
        whenever that one was consistent with the slices.
        """
        exclusive: list[str] = []
        shared: list[str] = []
        slices: list[CPUSet] = []
        sidecars = CPUSet()
        deferred: list[ContainerView] = []

        def assign(container: ContainerView, cpus: CPUSet, is_exclusive: bool) -> None:
            state.set(pod.uid, container.name, cpus)
            (exclusive if is_exclusive else shared).append(container.name)
            if is_exclusive:
                slices.append(cpus)

        def slice_for(container: ContainerView, pool: CPUSet, count: int) -> CPUSet:
            existing = state.get(pod.uid, container.name)
            return existing if existing is not None else self.take(pool, count)

        for container in pod.init_containers:
            count = container_exclusive_cpus(pod, container)
            if count > 0:
                cpus = slice_for(container, bubble - sidecars, count)
                assign(container, cpus, True)
                if container.kind == ContainerKind.SIDECAR:
                    sidecars = sidecars | cpus
            elif container.kind == ContainerKind.INIT:
                assign(container, bubble - sidecars, False)
            else:
                deferred.append(container)
        pool = bubble - sidecars
        for container in pod.containers:
            count = container_exclusive_cpus(pod, container)
            if count > 0:
                cpus = slice_for(container, pool, count)
                assign(container, cpus, True)
                pool = pool - cpus
            else:
                deferred.append(container)
        for container in deferred:
            assign(container, pool, False)
        return PodCPUAllocation(
            bubble=bubble, exclusive=tuple(exclusive), pod_shared=tuple(shared), slices=tuple(slices)
        )

    # -- release -------------------------------------------------------------------------
    def remove_container(self, state: CPUState, pod_uid: str, container: str) -> None:
        """``RemoveContainer``: return CPUs no sibling still holds; a bubble goes back with its last container."""
        if pod_uid in state.pod_entries:
            state.delete(pod_uid, container)
            if not state.assignments.get(pod_uid):
                state.default = state.default | state.pod_entries.pop(pod_uid)
            return
        released = state.get(pod_uid, container)
        if released is None:
            return
        state.delete(pod_uid, container)
        in_use = CPUSet()
        for name, cpus in state.assignments.get(pod_uid, {}).items():
            if name != container:
                in_use = in_use | cpus
        state.default = state.default | (released - in_use)

    def remove_pod(self, state: CPUState, pod_uid: str) -> CPUSet:
        """Release everything the pod holds; returns the CPUs given back to SHARED."""
        released = state.pod_entries.pop(pod_uid, CPUSet())
        for cpus in state.assignments.pop(pod_uid, {}).values():
            released = released | cpus
        self._reuse.pop(pod_uid, None)
        state.default = state.default | released
        return released
