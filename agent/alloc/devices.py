"""Which devices each container holds and which the node has, as pure values.

The kubelet's device manager hands devices (GPUs, SR-IOV VFs ...) to
containers and reports each device's NUMA nodes through the PodResources API
(``k8s.io/kubelet/pkg/apis/podresources/v1``: ``ContainerDevices`` with a
``TopologyInfo``). podpin never allocates devices; it needs these facts for
two things: the NUMA zones it publishes in its NodeResourceTopology (how many
devices of each resource each NUMA node has and how many are still free), and
the topology manager's third hint provider (:mod:`agent.alloc.devicemanager`),
which, as the kubelet's device manager does for devices already allocated,
hints at the NUMA nodes a container's devices sit on.

The node-wide values (:class:`DeviceAssignments`, :class:`AllocatableDevices`)
are built in the shell from a PodResources answer (``agent/podresources/translate.py``),
from a ``--devices`` file (``agent/podresources/devices_file.py``), by the
simulation or by tests; :class:`PodDevices` is what the planner reads for one
pod, cut from them with :meth:`PodDevices.of`. They live at the bottom of the
core because the planner reads them and its plans name each container's devices
(:class:`~agent.alloc.plan.ContainerPlan`), and they never change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["AllocatableDevices", "ContainerKey", "DeviceAssignments", "DeviceGroup", "PodDevices"]


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class ContainerKey:
    """Who holds devices: a container of a pod, by namespace and names (the PodResources API has no uids)."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceGroup:
    """Devices of one resource and the NUMA nodes they are attached to (empty: the device reports none).

    Mirrors one ``ContainerDevices`` entry: the kubelet groups a container's
    devices of one resource by their topology, so one container may hold several
    groups of the same resource on different NUMA nodes.
    """

    resource: str
    ids: tuple[str, ...]
    numa: tuple[int, ...] = ()


def _numa_union(groups: Iterable[DeviceGroup]) -> tuple[int, ...]:
    return tuple(sorted({node for group in groups for node in group.numa}))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAssignments:
    """Every container's device groups; containers without devices are absent."""

    containers: Mapping[ContainerKey, tuple[DeviceGroup, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, entries: Mapping[ContainerKey, Iterable[DeviceGroup]]) -> DeviceAssignments:
        """Build from a mapping, dropping containers with no device and freezing the rest."""
        frozen = {key: tuple(groups) for key, groups in sorted(entries.items())}
        return cls(containers=MappingProxyType({key: groups for key, groups in frozen.items() if groups}))

    def for_container(self, namespace: str, pod: str, container: str) -> tuple[DeviceGroup, ...]:
        """The container's device groups (empty when it holds none)."""
        return self.containers.get(ContainerKey(namespace=namespace, pod=pod, container=container), ())

    def for_pod(self, namespace: str, pod: str) -> tuple[DeviceGroup, ...]:
        """Every device group of every container of the pod, containers in name order."""
        return tuple(
            group
            for key, groups in self.containers.items()
            if key.namespace == namespace and key.pod == pod
            for group in groups
        )

    def container_numa(self, namespace: str, pod: str, container: str) -> tuple[int, ...]:
        """NUMA nodes of the container's devices, ascending (what a device hint for it is built from)."""
        return _numa_union(self.for_container(namespace, pod, container))

    def pod_numa(self, namespace: str, pod: str) -> tuple[int, ...]:
        """NUMA nodes of all the pod's devices, ascending (the pod scope takes the union)."""
        return _numa_union(self.for_pod(namespace, pod))

    def held(self) -> dict[tuple[str, str], int]:
        """How many devices are held, per (resource, device id) — 1 each, for counting what is free."""
        counts: dict[tuple[str, str], int] = {}
        for groups in self.containers.values():
            for group in groups:
                for device in group.ids:
                    counts[(group.resource, device)] = counts.get((group.resource, device), 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.containers)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatableDevices:
    """The node's devices per resource: ``GetAllocatableResources`` as device groups."""

    groups: tuple[DeviceGroup, ...] = ()

    @classmethod
    def known_from(cls, assignments: DeviceAssignments) -> AllocatableDevices:
        """Every device the assignments name: the node's devices as far as they tell (``podpin plan --devices``)."""
        return cls(groups=tuple(group for groups in assignments.containers.values() for group in groups))

    @property
    def resources(self) -> tuple[str, ...]:
        """Resource names, sorted."""
        return tuple(sorted({group.resource for group in self.groups}))

    def devices(self, resource: str) -> dict[str, tuple[int, ...]]:
        """Device id -> its NUMA nodes, for one resource."""
        result: dict[str, tuple[int, ...]] = {}
        for group in self.groups:
            if group.resource == resource:
                for device in group.ids:
                    result[device] = group.numa
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class PodDevices:
    """What the device manager knows about one pod: each container's devices, and the node's.

    Attributes:
        containers: container name -> the device groups it holds (containers without devices are absent).
        node: the node's devices (``GetAllocatableResources``); None when only the devices named
            in ``containers`` are known, and then those stand for the node's (the kubelet's device
            manager counts every device of a resource to know the narrowest NUMA set that could
            hold a request).
    """

    containers: Mapping[str, tuple[DeviceGroup, ...]] = field(default_factory=lambda: MappingProxyType({}))
    node: AllocatableDevices | None = None

    @classmethod
    def of(
        cls, assignments: DeviceAssignments, namespace: str, pod: str, node: AllocatableDevices | None = None
    ) -> PodDevices:
        """One pod's containers cut from the node's assignments."""
        return cls(
            containers=MappingProxyType(
                {
                    key.container: groups
                    for key, groups in assignments.containers.items()
                    if key.namespace == namespace and key.pod == pod
                }
            ),
            node=node,
        )

    def held(self, resource: str, containers: Iterable[str] | None = None) -> dict[str, tuple[int, ...]]:
        """Device id -> NUMA nodes of the devices of ``resource`` the named containers (default: all) hold."""
        names = self.containers.keys() if containers is None else containers
        found: dict[str, tuple[int, ...]] = {}
        for name in names:
            for group in self.containers.get(name, ()):
                if group.resource == resource:
                    found.update(dict.fromkeys(group.ids, group.numa))
        return found

    def inventory(self, resource: str) -> dict[str, tuple[int, ...]]:
        """Every device of ``resource`` known on the node: the node's list, plus any device a container holds."""
        known = self.node.devices(resource) if self.node is not None else {}
        return {**known, **self.held(resource)}

    def groups_of(self, container: str) -> tuple[DeviceGroup, ...]:
        """The container's device groups (empty when it holds none)."""
        return self.containers.get(container, ())
