"""The planner: admit and release pods, and say what every cgroup should hold.

``Planner`` is the pure core's whole API (``docs/style.md``, "Functional core, imperative shell"):
it is built from a
:class:`Topology`, a :class:`PlannerConfig` and optionally a
:class:`NodeState` restored from a checkpoint; ``admit(pod)`` returns a
:class:`Decision`, ``release(uid)`` frees a gone pod, ``snapshot()`` gives the
current :class:`NodeState`, and ``plan(pods)`` the desired cgroup values.

An admission is atomic: the policies work on copies of the CPU and memory
states, and the copies replace the snapshot only when the whole pod fitted. A
rejected pod holds nothing and keeps running in the node shared pool; the
decision carries the kubelet's reason and message, and the pod's whole request
next to what was free per NUMA node (:class:`~agent.alloc.plan.RequestFacts`).
Asked to explain (``admit(pod, explain=True)``), the decision also carries the
walk-through of the admission (:class:`~agent.alloc.trace.AdmissionTrace`).
The devices a pod's containers hold, when the shell knows them, come in as
``admit(pod, devices=...)`` (:class:`~agent.alloc.devicemanager.PodDevices`):
the device manager's hints then take part in the merge, and each container of
the plan names its devices.
Every container of a plan says why it runs where it runs (:class:`~agent.alloc.plan.PoolReason`).

Policies and the scope are chosen once, here, from the configured names. The
checks that need the machine (NUMA node count, distances, sockets vs NUMA
nodes, reserved CPUs and memory on existing nodes) fail construction with a
:class:`PlannerError` that names the setting.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import MappingProxyType

from agent.alloc.admission import Providers, admit_pod
from agent.alloc.cpumanager import CPUManagerPolicy, CPUState, StaticCPUPolicy, reserved_cpus_for, validate_cpu_state
from agent.alloc.cpumanager.policy_static import take_options_for
from agent.alloc.cpumanager.restore import StaleAllocation, StaleCause, find_stale, missing_entries
from agent.alloc.devicemanager import DeviceManager
from agent.alloc.devices import PodDevices
from agent.alloc.errors import AllocationError, PlacementError, PlannerError
from agent.alloc.memorymanager import (
    MemoryManagerPolicy,
    MemoryState,
    NUMAMemory,
    StaticMemoryPolicy,
    default_machine_state,
)
from agent.alloc.plan import (
    ContainerPlan,
    Plan,
    PodPlan,
    Pool,
    RequestFacts,
)
from agent.alloc.planner_config import PlannerConfig
from agent.alloc.state import (
    NodeState,
    Observed,
    PodRecord,
    contradicted_claims,
    seed_observed,
    validate_node_state,
)
from agent.alloc.state.readopt import Readoption, choose_reserved, needs_readoption, readopt
from agent.alloc.tally import AllocationEvent, EventKind
from agent.alloc.topologymanager import NUMAInfo, TopologyManagerPolicy, TopologyManagerScope, ids_of, make_policy
from agent.alloc.trace import AdmissionTrace, MergeStep
from agent.alloc.why import pool_reason, request_facts
from agent.cpuset import CPUSet
from agent.pods import (
    ContainerKind,
    PodView,
    QOSClass,
    container_exclusive_cpus,
    uses_pod_level_path,
)
from agent.topology import Topology
from agent.vocabulary import CgroupValues

__all__ = ["Decision", "Planner"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The outcome of admitting one pod."""

    uid: str
    namespace: str
    name: str
    admitted: bool
    reason: str | None = None
    message: str | None = None
    numa_affinity: tuple[int, ...] | None = None
    exclusive_containers: int = 0
    pod_level: bool = False
    already_admitted: bool = False
    kept_observed: tuple[str, ...] = ()
    facts: RequestFacts | None = None
    trace: AdmissionTrace | None = None
    devices: PodDevices | None = None
    allocations: tuple[AllocationEvent, ...] = ()
    """What the kubelet's pinning and alignment counters would count for this admission (:mod:`agent.alloc.tally`)."""


class Planner:
    """Admits pods into a :class:`NodeState` and plans the cgroup values."""

    def __init__(self, topology: Topology, config: PlannerConfig, state: NodeState | None = None) -> None:
        """Build the policies for this machine and adopt ``state`` (validated) or start empty.

        Raises:
            PlannerError: the configuration does not fit the machine.
            CheckpointError: ``state`` does not fit the machine or itself.
        """
        self.topology = topology
        self.config = config
        self._check_machine(topology, config)
        options = config.cpu_policy_options
        self._cpu: StaticCPUPolicy | None = None
        reserved = CPUSet()
        if config.cpu_manager_policy == CPUManagerPolicy.STATIC:
            reserved = self._reservation(topology, config, state)
        numa_info = NUMAInfo.from_topology(topology)
        if config.cpu_manager_policy == CPUManagerPolicy.STATIC:
            self._cpu = StaticCPUPolicy(topology, options, reserved, numa_info)
        self._memory = (
            StaticMemoryPolicy(numa_info) if config.memory_manager_policy == MemoryManagerPolicy.STATIC else None
        )
        self._expected_memory: dict[int, NUMAMemory] | None = None
        if self._memory is not None:
            held = {e.numa_node: dict(e.limits) for e in config.reserved_memory}
            self._expected_memory = default_machine_state(topology, held)
        self._policy = make_policy(
            config.topology_manager_policy,
            numa_info,
            prefer_closest=config.topology_policy_options.prefer_closest_numa,
        )
        self._providers = Providers(cpu=self._cpu, memory=self._memory, devices=DeviceManager(numa_info))
        self.readoption: Readoption | None = None
        self._state = self._adopt(state, reserved) if state is not None else self._initial(reserved)
        dropped: tuple[str, ...] = self.readoption.dropped if self.readoption is not None else ()
        for uid in dropped:
            self.release(uid)

    # -- construction --------------------------------------------------------------------
    @staticmethod
    def _check_machine(topology: Topology, config: PlannerConfig) -> None:
        nodes = topology.memory_numa_ids
        limit = config.topology_policy_options.max_allowable_numa_nodes
        if config.topology_manager_policy != TopologyManagerPolicy.NONE and len(nodes) > limit:
            raise PlannerError(
                f"topologyManagerPolicy: unsupported on machines with more than {limit} NUMA Nodes "
                f"(this one has {len(nodes)}; raise topologyManagerPolicyOptions max-allowable-numa-nodes)"
            )
        if config.topology_policy_options.prefer_closest_numa and not topology.has_distances():
            raise PlannerError(
                "topologyManagerPolicyOptions: prefer-closest-numa-nodes needs the NUMA distances, which this "
                "machine does not list"
            )
        if (
            config.cpu_policy_options.align_by_socket
            and topology.counters.num_sockets > topology.counters.num_numa_nodes
        ):
            raise PlannerError(
                "cpuManagerPolicyOptions: Align by socket is not compatible with hardware where number of sockets "
                "are more than number of NUMA"
            )
        unknown = config.reserved_system_cpus - topology.online_cpus
        if unknown:
            raise PlannerError(
                f"reservedSystemCPUs: CPUs {unknown} are not online CPUs of this machine ({topology.online_cpus})"
            )
        if config.cpu_manager_policy == CPUManagerPolicy.STATIC and config.num_reserved_cpus() >= len(
            topology.online_cpus
        ):
            raise PlannerError(
                f"kubeReserved/systemReserved: reserving {config.num_reserved_cpus()} CPUs leaves none of the "
                f"{len(topology.online_cpus)} online CPUs for pods"
            )
        for entry in config.reserved_memory:
            if entry.numa_node not in nodes:
                raise PlannerError(
                    f"reservedMemory: NUMA node {entry.numa_node} does not exist on this machine (nodes {list(nodes)})"
                )

    @staticmethod
    def _reservation(topology: Topology, config: PlannerConfig, state: NodeState | None) -> CPUSet:
        """The reserved CPUs: a restored state's own set while it still fits, else chosen around the pods' CPUs.

        Chosen by take-by-topology, the set depends on which CPUs are online; after
        a hotplug or a restart it must not move onto CPUs a pod holds
        (:func:`~agent.alloc.state.readopt.choose_reserved`).
        """
        count, explicit = config.num_reserved_cpus(), config.reserved_system_cpus
        if state is not None:
            chosen = choose_reserved(
                state, topology, take_options_for(topology, config.cpu_policy_options), count, explicit
            )
            if chosen is not None and len(chosen) == count:
                return chosen
        try:
            return reserved_cpus_for(topology, config.cpu_policy_options, count, explicit)
        except AllocationError as err:
            raise PlannerError(f"reservedSystemCPUs/kubeReserved/systemReserved: {err.message}") from err

    def _initial(self, reserved: CPUSet) -> NodeState:
        cpu = CPUState()
        strict = self.config.cpu_policy_options.strict_cpu_reservation
        validate_cpu_state(cpu, self.topology.online_cpus, reserved, strict=strict)
        memory = None
        if self._expected_memory is not None:
            memory = MemoryState(machine={n: m.copy() for n, m in self._expected_memory.items()})
        return NodeState(online=self.topology.online_cpus, reserved=reserved, cpu=cpu, memory=memory)

    def _adopt(self, state: NodeState, reserved: CPUSet) -> NodeState:
        """``state`` checked against the machine; re-adopted first when the CPUs or the reservation changed.

        The kubelet refuses such a checkpoint; podpin keeps every running container's CPUs that it can
        (:mod:`agent.alloc.state.readopt`, ``docs/kubelet-semantics.md``), reported in ``readoption``.
        """
        strict = self.config.cpu_policy_options.strict_cpu_reservation
        if needs_readoption(state, self.topology.online_cpus, reserved, strict=strict):
            self.readoption = readopt(
                state,
                self.topology,
                reserved,
                strict=strict,
                options=take_options_for(self.topology, self.config.cpu_policy_options),
            )
            state = self.readoption.state
        validate_node_state(
            state, strict=self.config.cpu_policy_options.strict_cpu_reservation, expected_memory=self._expected_memory
        )
        return state

    # -- the API ---------------------------------------------------------------------------
    def snapshot(self) -> NodeState:
        """The current node state (never mutated afterwards)."""
        return self._state

    def fork(self) -> Planner:
        """A planner with these policies and this state; admitting on one leaves the other as it was.

        Cheaper than ``Planner(topology, config, snapshot)``: the policies hold configuration only and
        the state is an immutable value, so nothing is rebuilt or validated again. The fleet simulation
        (``agent/sim/fleet.py``) forks one planner per distinct node history.
        """
        twin = copy.copy(self)
        twin.readoption = None
        return twin

    @property
    def reserved(self) -> CPUSet:
        return self._state.reserved

    def is_admitted(self, uid: str) -> bool:
        return uid in self._state.pods

    def admit(
        self,
        pod: PodView,
        observed: Observed | None = None,
        *,
        explain: bool = False,
        devices: PodDevices | None = None,
    ) -> Decision:
        """Admit a pod: allocate whatever it is eligible for, or reject it and change nothing.

        A pod already in the state keeps its allocations (a restart never moves CPUs),
        unless they break the stale rule (:mod:`agent.alloc.cpumanager.restore`):
        then they are released and the pod admitted afresh, and the decision says
        so (an :class:`~agent.alloc.tally.AllocationEvent`); a pod that no longer
        fits then holds nothing. One that holds a prefix of its entries gets the
        rest. ``observed`` (cpusets found on its live cgroups, when rebuilding a
        lost checkpoint) is kept where it fits and passes the same rule; if the
        pod cannot be admitted around it, it is admitted afresh. ``explain`` adds
        the walk-through of the admission to the decision (``Decision.trace``).
        ``devices`` are the devices its containers hold (None: unknown, or none): the device
        manager hints from them, and the decision keeps them for the plan.
        """
        existing = self._state.pods.get(pod.uid)
        if existing is not None and self._unfinished(pod):
            # Restored CPUs that break the stale rule, or a prefix of the pod's entries: admitted again from the
            # state that holds them, so the admission releases and reports the stale ones or completes the
            # prefix; a pod that no longer fits then holds nothing.
            decision = self._admit(pod, self._state.cpu.copy(), explain=explain, devices=devices)
            if not decision.admitted:
                self.release(pod.uid)
            return decision
        if existing is not None:
            return Decision(
                uid=pod.uid,
                namespace=pod.namespace,
                name=pod.name,
                admitted=True,
                numa_affinity=existing.numa_affinity,
                already_admitted=True,
                devices=devices,
            )
        if observed is not None and self._cpu is not None:
            cpu = self._state.cpu.copy()
            kept = self._seed(self._cpu, cpu, pod, observed)
            if kept or pod.uid in cpu.pod_entries:
                decision = self._admit(pod, cpu, kept=tuple(kept), explain=explain, devices=devices)
                if decision.admitted:
                    return decision
        return self._admit(pod, self._state.cpu.copy(), explain=explain, devices=devices)

    def release_contradicted(self, live: Iterable[tuple[PodView, Observed]]) -> dict[str, StaleAllocation]:
        """Release every pod whose restored CPUs another pod's running container holds on its cgroup.

        Called once, after a restart over a checkpoint, with what the live cgroups of the node's pods hold
        (:func:`~agent.alloc.state.adopt.contradicted_claims`). Such a checkpoint is older than the cgroups (a
        save failed before the restart): honouring it would move that running container and plan two owners of
        its CPUs until it moved. Each pod released is no longer admitted: the caller admits it again like a pod
        the checkpoint missed, offering it its own cgroups' sets, and reports the returned stale allocation
        (cause ``contradicted_by_cgroups``) with that admission.

        Returns:
            uid -> what was released and why, for each pod released.
        """
        if self._cpu is None:
            return {}
        state = self._state.cpu
        found = contradicted_claims(state, live, self._state.online - self._state.reserved)
        released: dict[str, StaleAllocation] = {}
        for uid, detail in found.items():
            held = self._state.cpu.pod_entries.get(uid, CPUSet()).union(
                *self._state.cpu.assignments.get(uid, {}).values()
            )
            self.release(uid)
            released[uid] = StaleAllocation(
                cause=StaleCause.CONTRADICTED_BY_CGROUPS, detail=detail, released=held & self._state.cpu.default
            )
        return released

    def holds_observed(self, pod: PodView, observed: Observed) -> bool:
        """Whether the CPUs ``pod``'s live cgroups hold can all be kept as they are: the pods to admit first.

        True when the pod is not admitted yet, its cgroups hold something :func:`seed_observed` keeps, and every
        container entitled to exclusive CPUs that holds a set on its cgroup keeps it (the right size, on CPUs
        nobody in the state claims, inside its bubble). After a restart over a checkpoint older than the cgroups,
        these pods go before the others, whatever their creation order: a pod admitted afresh first (one that was
        rejected before and so holds only the node shared pool on its cgroup) would otherwise take the CPUs a
        running container holds, and that container would move (issue 22, the soak's last finding).
        """
        if self._cpu is None or pod.uid in self._state.pods:
            return False
        kept = set(self._seed(self._cpu, self._state.cpu.copy(), pod, observed))
        exclusive = {
            c.name for c in pod.all_containers if container_exclusive_cpus(pod, c) > 0 and c.name in observed.containers
        }
        return bool(kept) and exclusive <= kept

    def _seed(self, policy: StaticCPUPolicy, cpu: CPUState, pod: PodView, observed: Observed) -> list[str]:
        """:func:`seed_observed` into ``cpu`` (mutated) with this planner's assignable CPUs and path."""
        return seed_observed(
            cpu,
            pod,
            observed,
            policy.available(cpu),
            # The KEP-5526 path (a bubble) needs the pod scope and an aligning policy, as in admit_pod.
            pod_scope=self.config.topology_manager_scope == TopologyManagerScope.POD
            and self.config.topology_manager_policy != TopologyManagerPolicy.NONE,
        )

    def _unfinished(self, pod: PodView) -> bool:
        """The CPUs a restored pod holds break the stale rule, or lack some of its containers' entries
        (:mod:`agent.alloc.cpumanager.restore`).

        Judged by the state's own shape: a pod admitted under another scope or policy keeps its path.
        """
        if self._cpu is None:
            return False
        cpu = self._state.cpu
        return find_stale(cpu, pod, bubble_path=None) is not None or bool(missing_entries(cpu, pod))

    def _trace(
        self, pod: PodView, steps: list[MergeStep] | None, request: RequestFacts | None, error: PlacementError | None
    ) -> AdmissionTrace | None:
        if steps is None or request is None:
            return None
        return AdmissionTrace(
            policy=self.config.topology_manager_policy,
            scope=self.config.topology_manager_scope,
            prefer_closest=self.config.topology_policy_options.prefer_closest_numa,
            pod_level=uses_pod_level_path(pod) and self.config.topology_manager_scope == TopologyManagerScope.POD,
            steps=tuple(steps),
            admitted=error is None,
            request=request,
            reason=error.reason if error is not None else None,
            message=error.message if error is not None else None,
        )

    def _admit(
        self,
        pod: PodView,
        cpu: CPUState,
        kept: tuple[str, ...] = (),
        *,
        explain: bool = False,
        devices: PodDevices | None = None,
    ) -> Decision:
        memory = self._state.memory.copy() if self._state.memory is not None else MemoryState()
        steps: list[MergeStep] | None = [] if explain else None
        events: list[AllocationEvent] = []
        scope_admitted = False
        request = request_facts(pod, self.topology, self._cpu, self._state) if explain else None
        try:
            admission = admit_pod(
                pod,
                policy=self._policy,
                scope=self.config.topology_manager_scope,
                providers=self._providers,
                cpu=cpu,
                memory=memory,
                devices=devices,
                steps=steps,
                events=events,
            )
            scope_admitted = True
            self._check_shared_pool(cpu)
        except PlacementError as err:
            if scope_admitted:
                # podpin's own refusal (kubelet issue #141196): one more allocation attempt, and it failed.
                events.append(AllocationEvent.pinning(ok=False))
            if self._cpu is not None:
                self._cpu.start_pod(pod.uid)
            if self._memory is not None:
                self._memory.start_pod(pod.uid)
            return Decision(
                uid=pod.uid,
                namespace=pod.namespace,
                name=pod.name,
                admitted=False,
                reason=err.reason,
                message=err.message,
                facts=request or request_facts(pod, self.topology, self._cpu, self._state),
                trace=self._trace(pod, steps, request, err),
                devices=devices,
                allocations=tuple(events),
            )
        holds = (
            pod.uid in cpu.assignments
            or pod.uid in cpu.pod_entries
            or (pod.uid in memory.blocks or pod.uid in memory.pod_blocks)
        )
        affinity = 0
        for hint in admission.hints.values():
            if hint.affinity is not None:
                affinity |= hint.affinity
        numa = ids_of(affinity) if affinity and holds else None
        record = PodRecord(uid=pod.uid, namespace=pod.namespace, name=pod.name, numa_affinity=numa)
        pods = dict(self._state.pods)
        pods[pod.uid] = record
        self._state = replace(
            self._state,
            cpu=cpu,
            memory=memory if self._state.memory is not None else None,
            pods=MappingProxyType(pods),
        )
        return Decision(
            uid=pod.uid,
            namespace=pod.namespace,
            name=pod.name,
            admitted=True,
            numa_affinity=numa,
            exclusive_containers=admission.exclusive_requests,
            pod_level=admission.pod_level,
            kept_observed=() if any(e.kind == EventKind.STALE for e in events) else kept,
            trace=self._trace(pod, steps, request, None),
            devices=devices,
            allocations=tuple(events),
        )

    def _check_shared_pool(self, cpu: CPUState) -> None:
        """Never let an allocation empty the node shared pool (kubelet issue #141196)."""
        if self._cpu is not None and not cpu.default:
            raise AllocationError(
                "not enough cpus available to satisfy request: the node shared pool would be left empty"
            )

    def release(self, uid: str) -> bool:
        """Free everything a gone pod held; returns False when the pod was unknown."""
        if uid not in self._state.pods:
            return False
        cpu = self._state.cpu.copy()
        if self._cpu is not None:
            self._cpu.remove_pod(cpu, uid)
        memory = self._state.memory.copy() if self._state.memory is not None else None
        if self._memory is not None and memory is not None:
            self._memory.remove_pod(memory, uid)
        pods = dict(self._state.pods)
        del pods[uid]
        self._state = replace(self._state, cpu=cpu, memory=memory, pods=MappingProxyType(pods))
        return True

    def rebased(self, topology: Topology) -> tuple[Planner, list[str]]:
        """A planner for a machine whose online CPUs changed, and the pods it dropped.

        The state is re-adopted as after a restart (:mod:`agent.alloc.state.readopt`): every exclusive CPU
        still online and not newly reserved stays, a lost one is replaced (``readoption.moves`` of the new
        planner); a pod that cannot be made whole is dropped and the caller admits it again.

        Raises:
            PlannerError: the configuration does not fit the new machine.
        """
        planner = Planner(topology, self.config, self._state)
        return planner, list(planner.readoption.dropped) if planner.readoption is not None else []

    # -- the plan ----------------------------------------------------------------------------
    def plan(self, pods: Iterable[PodView], decisions: dict[str, Decision] | None = None) -> Plan:
        """Desired cgroup values for these pods (in the order given) and the node pools.

        Args:
            pods: the pods bound to the node.
            decisions: the latest decision per uid, so rejected pods carry their reason.
        """
        decisions = decisions or {}
        shared = self._state.cpu.default
        plans = tuple(self._pod_plan(pod, shared, decisions.get(pod.uid)) for pod in pods)
        return Plan(
            online=self._state.online,
            reserved=self._state.reserved,
            shared_pool=shared,
            qos_desired=CgroupValues(cpuset_cpus=shared),
            pods=plans,
        )

    def _mems(self, uid: str, name: str | None) -> CPUSet | None:
        memory = self._state.memory
        if memory is None:
            return None
        blocks = memory.pod_blocks.get(uid, ()) if name is None else memory.get(uid, name) or ()
        nodes = CPUSet(n for block in blocks for n in block.numa)
        return nodes or None

    def _pod_plan(self, pod: PodView, shared: CPUSet, decision: Decision | None) -> PodPlan:
        # Locals, not enum lookups, in the loop below: plan() runs it for every container of the node.
        exclusive, pod_shared, node_shared = Pool.EXCLUSIVE, Pool.POD_SHARED, Pool.NODE_SHARED
        state = self._state
        record = state.pods.get(pod.uid)
        assignments = state.cpu.assignments.get(pod.uid, {})
        bubble = state.cpu.pod_entries.get(pod.uid)
        has_memory = state.memory is not None and (pod.uid in state.memory.blocks or pod.uid in state.memory.pod_blocks)
        managed = record is not None and (bool(assignments) or has_memory)
        period = self.config.lifted_cpu_max()
        devices = decision.devices if decision is not None else None
        containers: list[ContainerPlan] = []
        union = CPUSet()
        mems = self._mems(pod.uid, None) or CPUSet()
        any_exclusive = False
        for container in pod.all_containers:
            cpus = assignments.get(container.name)
            if cpus is None:
                pool = node_shared
                cpus = shared
            elif bubble is not None and container_exclusive_cpus(pod, container) == 0:
                pool = pod_shared
            else:
                pool = exclusive
            any_exclusive = any_exclusive or pool is exclusive
            container_mems = self._mems(pod.uid, container.name)
            union = union | cpus
            mems = mems | (container_mems or CPUSet())
            desired = (
                CgroupValues(
                    cpuset_cpus=cpus,
                    cpuset_mems=container_mems,
                    cpu_max=period if pool is exclusive else None,
                )
                if managed
                else CgroupValues()
            )
            containers.append(
                ContainerPlan(
                    name=container.name,
                    kind=container.kind,
                    pool=pool,
                    cpus=cpus,
                    numa=self.topology.numa_of(cpus),
                    container_id=container.container_id,
                    desired=desired,
                    reason=pool_reason(
                        pod,
                        container,
                        pool=pool,
                        cpus=len(cpus),
                        from_pod_cpus=bubble is not None,
                        pinning=self._cpu is not None,
                        admitted=record is not None,
                        rejection=decision.reason if decision is not None and not decision.admitted else None,
                    ),
                    devices=devices.groups_of(container.name) if devices is not None else (),
                )
            )
        interim: CPUSet | None = None
        if managed:
            interim = shared
            if bubble is not None:
                slices = CPUSet().union(
                    *(c.cpus for c in containers if c.pool is exclusive and c.kind != ContainerKind.INIT)
                )
                interim = (bubble - slices) or shared
            pod_desired = CgroupValues(
                cpuset_cpus=union | interim, cpuset_mems=mems or None, cpu_max=period if any_exclusive else None
            )
        elif pod.qos == QOSClass.GUARANTEED:
            pod_desired = CgroupValues(cpuset_cpus=shared)
        else:
            pod_desired = CgroupValues()
        rejected = decision is not None and not decision.admitted and record is None
        return PodPlan(
            uid=pod.uid,
            namespace=pod.namespace,
            name=pod.name,
            qos=pod.qos,
            admitted=record is not None,
            reason=decision.reason if rejected and decision else None,
            message=decision.message if rejected and decision else None,
            numa_affinity=record.numa_affinity if record is not None else None,
            bubble=bubble,
            desired=pod_desired,
            containers=tuple(containers),
            interim=interim,
            cgroup_uid=pod.cgroup_uid,
            rejection=decision.facts if rejected and decision else None,
        )
