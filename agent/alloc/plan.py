"""The plan: what every cgroup should hold, as pure values (``docs/design.md``, "cgroup values").

Each cgroup's values are the vocabulary's :class:`~agent.vocabulary.CgroupValues`,
the type the writer, ``podpin reset`` and NRI take too.

The planner produces a :class:`Plan` from its :class:`~agent.alloc.state.node.NodeState`
and the current pods; the reconciler only turns it into file writes. Values set
to ``None`` are left alone (the runtime's or the kernel's value stands).

* exclusive container: ``cpuset.cpus`` = its slice, ``cpu.max`` = ``max <period>``;
* pod_shared container: ``cpuset.cpus`` = the pod shared pool, quota untouched;
* node_shared container of a managed pod: ``cpuset.cpus`` = the node shared pool
  (so it cannot inherit a sibling's exclusive CPUs from the pod cgroup);
* managed pod cgroup: ``cpuset.cpus`` = union of its containers' sets and
  the *interim* set, ``cpu.max`` = ``max <period>`` when any container is
  exclusive. The interim set is what a child cgroup not yet tied to a
  container of the spec gets (the sandbox, a container whose status has no
  containerID yet): the pod shared pool, or the node shared pool when the pod
  has none — never a sibling's exclusive CPUs;
* Guaranteed pod with nothing pinned: the pod cgroup is confined to the node
  shared pool (Guaranteed pods sit directly under ``kubepods``);
* Burstable and BestEffort pods: confined by their QoS slice, which holds the
  node shared pool; nothing is written per pod.
* ``cpuset.mems`` only with the ``Static`` memory policy: the NUMA nodes of the
  container's (pod's) memory blocks.

Every container carries the *why* of its pool as a :class:`PoolReason` (a
:class:`ReasonKind` and the facts it rests on: the container's requests and
limits, its :class:`~agent.pods.CPUEligibility`, the pod's QoS, the rejection);
``agent/render/reasons.py`` is the one place that words it. A rejected pod
carries :class:`RequestFacts`: its whole request and what was free per NUMA
node when it was refused, to be shown next to the kubelet's message. A
container names the devices it holds when the pod was admitted with them
(:class:`~agent.alloc.devices.DeviceGroup`), so a plan can say whether its CPUs
sit on its devices' NUMA nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.alloc.devices import DeviceGroup
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, CPUEligibility
from agent.vocabulary import CgroupValues, QOSClass

__all__ = [
    "AssignmentType",
    "ContainerPlan",
    "ContainerRequest",
    "DeviceAlignment",
    "NUMAFree",
    "Plan",
    "PodPlan",
    "Pool",
    "PoolReason",
    "ReasonKind",
    "RequestFacts",
    "assignment_type",
]


class Pool(StrEnum):
    """Where a container runs, as plans, logs and the ``pool`` label of the usage metric say it."""

    EXCLUSIVE = "exclusive"
    POD_SHARED = "pod_shared"
    NODE_SHARED = "node_shared"


class DeviceAlignment(StrEnum):
    """Whether a container's CPUs sit on its devices' NUMA nodes (plans, ``podpin simulate``).

    ``aligned``: every NUMA node of its CPUs is one a device of it is attached
    to; ``unaligned``: some CPU is on another node; ``no_numa``: its devices
    report no NUMA node, so there is nothing to align to.
    """

    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    NO_NUMA = "no_numa"


class AssignmentType(StrEnum):
    """A container's CPU assignment as the kubelet's ``resource_manager_container_assignments`` names it.

    The kubelet's three types, plus ``node_shared`` for a container of a
    managed pod that runs in the node shared pool. The shared ones are spelled
    exactly as the matching :class:`Pool`.
    """

    NODE_EXCLUSIVE = "node_exclusive"
    POD_EXCLUSIVE = "pod_exclusive"
    POD_SHARED = "pod_shared"
    NODE_SHARED = "node_shared"


class ReasonKind(StrEnum):
    """Why a container runs in its pool: the planner's part of the answer (the container's own is its eligibility)."""

    EXCLUSIVE = "exclusive"
    """It got exclusive CPUs: eligible, whole CPUs."""
    NOT_ELIGIBLE = "not_eligible"
    """Its own resources (or its pod's QoS) keep it from exclusive CPUs; ``PoolReason.eligibility`` says which."""
    NO_POD_CPUS = "no_pod_cpus"
    """Eligible, but its pod-level pod's cpu is not whole CPUs, so the pod gets no CPUs of its own to carve from."""
    POD_REJECTED = "pod_rejected"
    """Its pod could not be placed (``PoolReason.rejection`` is the kubelet's reason)."""
    NO_CPU_POLICY = "no_cpu_policy"
    """``cpuManagerPolicy: none``: nothing is pinned."""
    NOT_ADMITTED = "not_admitted"
    """Its pod has not been admitted (no decision about it yet)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolReason:
    """Why one container runs in its pool, with the facts the sentence needs (worded by ``agent/render/reasons.py``).

    Attributes:
        kind: the planner's reason.
        pool: the pool it leads to.
        eligibility: the container's own verdict (the first eligibility test it fails, or ``WHOLE_CPUS``).
        qos: the pod's QoS class.
        pod_level: the pod sets pod-level resources (``spec.resources``).
        exclusive_cpus: CPUs of an exclusive container's slice.
        from_pod_cpus: an exclusive slice carved from the pod's own CPUs (a pod bubble).
        cpu_request, cpu_limit: the container's cpu in millicores (None when not set).
        memory_request, memory_limit: the container's memory in bytes (None when not set).
        pod_cpu: the pod-level cpu request in millicores (None without pod-level cpu).
        rejection: the kubelet's reason for a rejected pod.
    """

    kind: ReasonKind
    pool: Pool
    eligibility: CPUEligibility
    qos: QOSClass
    pod_level: bool = False
    exclusive_cpus: int = 0
    from_pod_cpus: bool = False
    cpu_request: int | None = None
    cpu_limit: int | None = None
    memory_request: int | None = None
    memory_limit: int | None = None
    pod_cpu: int | None = None
    rejection: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerRequest:
    """One container's request, as a rejection states it: cpu (millicores), memory (bytes), exclusive CPUs."""

    name: str
    kind: ContainerKind
    cpu: int | None
    memory: int | None
    exclusive_cpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMAFree:
    """What one NUMA node had free before a pod's admission: CPUs for exclusive use, memory (``Static`` policy only)."""

    numa: int
    cpus: int
    memory: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFacts:
    """A pod's whole request and what was free before its admission.

    A refused pod shows it next to the kubelet's message; ``podpin plan
    --explain`` shows it for any pod.

    ``pod_cpu``/``pod_memory`` are the pod-level requests (None without them);
    ``exclusive_cpus`` is what the pod needed exclusively in all (its pod CPUs,
    or the kubelet's aggregate over its containers).
    """

    pod_cpu: int | None
    pod_memory: int | None
    exclusive_cpus: int
    containers: tuple[ContainerRequest, ...]
    free: tuple[NUMAFree, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerPlan:
    """One container: where it runs and what its cgroup should hold."""

    name: str
    kind: ContainerKind
    pool: Pool
    cpus: CPUSet
    numa: tuple[int, ...]
    container_id: str | None
    desired: CgroupValues
    reason: PoolReason
    devices: tuple[DeviceGroup, ...] = ()

    @property
    def device_numa(self) -> tuple[int, ...]:
        """The NUMA nodes of the container's devices, ascending (empty: no device, or none reports one)."""
        return tuple(sorted({node for group in self.devices for node in group.numa}))

    @property
    def device_alignment(self) -> DeviceAlignment | None:
        """How its CPUs sit against its devices (None: it holds no device, or runs on no CPU)."""
        if not self.devices or not self.numa:
            return None
        device_numa = self.device_numa
        if not device_numa:
            return DeviceAlignment.NO_NUMA
        return DeviceAlignment.ALIGNED if set(self.numa) <= set(device_numa) else DeviceAlignment.UNALIGNED


@dataclass(frozen=True, slots=True, kw_only=True)
class PodPlan:
    """One pod: the admission outcome, its bubble, and its own cgroup's values."""

    uid: str
    namespace: str
    name: str
    qos: QOSClass
    admitted: bool
    reason: str | None
    message: str | None
    numa_affinity: tuple[int, ...] | None
    bubble: CPUSet | None
    desired: CgroupValues
    containers: tuple[ContainerPlan, ...]
    interim: CPUSet | None = None
    cgroup_uid: str = ""
    rejection: RequestFacts | None = None

    @property
    def cgroup_key(self) -> str:
        """The uid the pod's cgroup is named after (a static pod's config hash, else its uid)."""
        return self.cgroup_uid or self.uid

    def container(self, name: str) -> ContainerPlan:
        """The plan of one container (``KeyError`` if the pod has no such container)."""
        for plan in self.containers:
            if plan.name == name:
                return plan
        raise KeyError(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The whole node: its CPUs, the pools and every pod."""

    online: CPUSet
    reserved: CPUSet
    shared_pool: CPUSet
    qos_desired: CgroupValues
    pods: tuple[PodPlan, ...]

    def pod(self, uid: str) -> PodPlan:
        """The plan of one pod (``KeyError`` if unknown)."""
        for plan in self.pods:
            if plan.uid == uid:
                return plan
        raise KeyError(uid)


def assignment_type(pod: PodPlan, container: ContainerPlan) -> AssignmentType:
    """The ``assignment_type`` of one container.

    An exclusive container is ``pod_exclusive`` when its pod has a bubble (its
    slice was carved from the pod's CPUs) and ``node_exclusive`` otherwise, as in
    the kubelet's ``resource_manager_container_assignments``.
    """
    if container.pool == Pool.EXCLUSIVE:
        return AssignmentType.POD_EXCLUSIVE if pod.bubble is not None else AssignmentType.NODE_EXCLUSIVE
    if container.pool == Pool.POD_SHARED:
        return AssignmentType.POD_SHARED
    return AssignmentType.NODE_SHARED
