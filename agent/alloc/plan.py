"""The plan: what every cgroup should hold, as pure values (``docs/design.md``, "cgroup values").

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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.cpuset import CPUSet
from agent.pods import ContainerKind, QOSClass

__all__ = ["AssignmentType", "ContainerPlan", "DesiredValues", "Plan", "PodPlan", "Pool", "assignment_type"]


class Pool(StrEnum):
    """Where a container runs, as plans, logs and the ``pool`` label of the usage metric say it."""

    EXCLUSIVE = "exclusive"
    POD_SHARED = "pod_shared"
    NODE_SHARED = "node_shared"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredValues:
    """What to write into one cgroup; None = leave that file alone."""

    cpuset_cpus: CPUSet | None = None
    cpuset_mems: CPUSet | None = None
    cpu_max: str | None = None

    def is_empty(self) -> bool:
        return self.cpuset_cpus is None and self.cpuset_mems is None and self.cpu_max is None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerPlan:
    """One container: where it runs and what its cgroup should hold."""

    name: str
    kind: ContainerKind
    pool: Pool
    cpus: CPUSet
    numa: tuple[int, ...]
    container_id: str | None
    desired: DesiredValues


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
    desired: DesiredValues
    containers: tuple[ContainerPlan, ...]
    interim: CPUSet | None = None
    cgroup_uid: str = ""

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
    qos_desired: DesiredValues
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
