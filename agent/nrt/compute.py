"""The node's ``NodeResourceTopology`` (``topology.node.k8s.io/v1alpha2``), computed from podpin's own state (pure).

The scheduler-plugins' NodeResourceTopologyMatch filter and score read one
such object per node (``pkg/noderesourcetopology``). The usual producer, NFD's
topology-updater, builds it from the kubelet's PodResources API, which reports
no exclusive CPUs when the kubelet runs ``cpuManagerPolicy: none`` next to
podpin — so on podpin's nodes only podpin can publish the truth.

The object, as NFD's topology-updater shapes it (``pkg/resourcemonitor``):

* ``metadata.name`` = the node name; an ownerReference to the Node (``v1``,
  ``Node``, its uid) so the object goes away with the node; the label
  ``app.kubernetes.io/managed-by: podpin``.
* ``zones``: one per NUMA node, ``name: node-<id>``, ``type: Node`` (the zone
  type and name scheme the plugin parses with ``numanode.NameToID``), with
  ``costs`` = the SLIT distances to every node (``node-<id>``: distance) when
  the machine lists them, and ``resources``: ``cpu``, ``memory``,
  ``hugepages-<size>`` (:mod:`agent.nrt.occupancy`), then each device
  resource the node has on that NUMA node: capacity = allocatable = its
  devices there, available = those no container holds. A device attached to
  several NUMA nodes counts on each; one without NUMA affinity is left out of
  the zones (the plugin treats a resource no zone lists as host-level).
  Quantities are strings (the API's ``resource.Quantity`` form): CPUs as whole
  counts, memory in bytes.
* ``attributes``: ``topologyManagerPolicy``, ``topologyManagerScope`` (the
  names and verbatim values the plugin's ``nodeconfig`` reads) and
  ``topologyManagerMaxNUMANodes``. The effective policy is ``none`` when
  podpin aligns nothing (``cpuManagerPolicy: none`` and no ``Static`` memory
  policy), because then nothing is ever rejected for alignment.
* the pod fingerprint (:mod:`agent.nrt.fingerprint`) over every pod podpin has admitted (method ``all``):
  the attributes ``nodeTopologyPodsFingerprint`` and ``nodeTopologyPodsFingerprintMethod`` and the
  annotation ``topology.node.k8s.io/fingerprint``, as NFD's topology-updater sets them, so the plugin's
  reserve cache (``cacheResyncPeriodSeconds`` > 0) can resync a node it marked dirty.
* ``topologyPolicies``: the deprecated single value
  (``SingleNUMANodePodLevel`` ...) older plugins read, as NFD still writes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent.alloc import (
    CPUManagerPolicy,
    MemoryManagerPolicy,
    PlannerConfig,
    TopologyManagerPolicy,
    TopologyManagerScope,
)
from agent.nrt.fingerprint import ANNOTATION, ATTRIBUTE, ATTRIBUTE_METHOD, FingerprintMethod, pod_fingerprint
from agent.nrt.occupancy import Amounts, Occupancy
from agent.podresources import AllocatableDevices, DeviceAssignments
from agent.topology import Topology

__all__ = [
    "API_VERSION",
    "GROUP",
    "AttributeName",
    "KIND",
    "PLURAL",
    "VERSION",
    "ZONE_TYPE",
    "Attributes",
    "attributes_of",
    "node_resource_topology",
    "zone_name",
    "zone_numa",
]

GROUP = "topology.node.k8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NodeResourceTopology"
PLURAL = "noderesourcetopologies"
ZONE_TYPE = "Node"
"""The zone type of a NUMA node (the plugin reads only zones of this type)."""


class AttributeName(StrEnum):
    """The ``attributes`` podpin publishes, named as the plugin's ``nodeconfig`` reads them."""

    POLICY = "topologyManagerPolicy"
    SCOPE = "topologyManagerScope"
    MAX_NUMA_NODES = "topologyManagerMaxNUMANodes"


_LEGACY_POLICIES = {
    (TopologyManagerPolicy.SINGLE_NUMA_NODE, TopologyManagerScope.POD): "SingleNUMANodePodLevel",
    (TopologyManagerPolicy.SINGLE_NUMA_NODE, TopologyManagerScope.CONTAINER): "SingleNUMANodeContainerLevel",
    (TopologyManagerPolicy.RESTRICTED, TopologyManagerScope.POD): "RestrictedPodLevel",
    (TopologyManagerPolicy.RESTRICTED, TopologyManagerScope.CONTAINER): "RestrictedContainerLevel",
    (TopologyManagerPolicy.BEST_EFFORT, TopologyManagerScope.POD): "BestEffortPodLevel",
    (TopologyManagerPolicy.BEST_EFFORT, TopologyManagerScope.CONTAINER): "BestEffortContainerLevel",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Attributes:
    """The topology manager settings the scheduler plugin needs (kubelet names and values)."""

    policy: TopologyManagerPolicy
    scope: TopologyManagerScope
    max_numa_nodes: int


def attributes_of(config: PlannerConfig) -> Attributes:
    """The settings podpin actually enforces: ``none`` when it aligns nothing."""
    aligns = (
        config.cpu_manager_policy == CPUManagerPolicy.STATIC
        or config.memory_manager_policy == MemoryManagerPolicy.STATIC
    )
    return Attributes(
        policy=config.topology_manager_policy if aligns else TopologyManagerPolicy.NONE,
        scope=config.topology_manager_scope,
        max_numa_nodes=config.topology_policy_options.max_allowable_numa_nodes,
    )


_ZONE_PREFIX = "node-"


def zone_name(numa: int) -> str:
    """``node-<id>``: the NUMA zone name NFD writes and the plugin parses."""
    return f"{_ZONE_PREFIX}{numa}"


def zone_numa(name: str) -> int | None:
    """The NUMA id a zone name stands for (``node-3`` -> 3); None for any other name (``numanode.NameToID``)."""
    digits = name.removeprefix(_ZONE_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


def _resource(name: str, amounts: Amounts) -> dict[str, Any]:
    return {
        "name": name,
        "capacity": str(amounts.capacity),
        "allocatable": str(amounts.allocatable),
        "available": str(amounts.available),
    }


def _device_amounts(
    allocatable: AllocatableDevices | None, assignments: DeviceAssignments | None
) -> dict[int, dict[str, Amounts]]:
    """NUMA node -> device resource -> amounts."""
    if allocatable is None:
        return {}
    held = assignments.held() if assignments is not None else {}
    result: dict[int, dict[str, Amounts]] = {}
    for resource in allocatable.resources:
        per_node: dict[int, list[int]] = {}
        for device, numa in sorted(allocatable.devices(resource).items()):
            for node in numa:
                counts = per_node.setdefault(node, [0, 0])
                counts[0] += 1
                counts[1] += 0 if (resource, device) in held else 1
        for node, (total, free) in per_node.items():
            result.setdefault(node, {})[resource] = Amounts(capacity=total, allocatable=total, available=free)
    return result


def node_resource_topology(
    *,
    node_name: str,
    topology: Topology,
    occupancy: Occupancy,
    attributes: Attributes,
    devices: AllocatableDevices | None = None,
    assignments: DeviceAssignments | None = None,
    owner_uid: str | None = None,
    pods: Iterable[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The NodeResourceTopology object this node publishes (the module docstring says what goes in).

    Args:
        node_name: the object's name, the node's.
        topology: the machine (NUMA distances for the zone costs).
        occupancy: CPU and memory amounts per NUMA node.
        attributes: the topology manager settings.
        devices: the node's devices (``GetAllocatableResources``), None when unknown.
        assignments: which devices containers hold (``List``), None when unknown.
        owner_uid: the Node's uid; None leaves the ownerReference out (``podpin plan`` has no Node).
        pods: ``(namespace, name)`` of every pod podpin accounts for; None leaves the fingerprint out.
    """
    device_amounts = _device_amounts(devices, assignments)
    zones: list[dict[str, Any]] = []
    for node, resources in sorted(occupancy.zones.items()):
        listed = [_resource(name, resources[name]) for name in _ordered(resources)]
        listed += [_resource(name, amounts) for name, amounts in sorted(device_amounts.get(node, {}).items())]
        zone: dict[str, Any] = {"name": zone_name(node), "type": ZONE_TYPE}
        if topology.has_distances():
            zone["costs"] = [
                {"name": zone_name(other), "value": topology.distance(node, other)} for other in sorted(occupancy.zones)
            ]
        zone["resources"] = listed
        zones.append(zone)
    metadata: dict[str, Any] = {"name": node_name, "labels": {"app.kubernetes.io/managed-by": "podpin"}}
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": owner_uid}]
    attributes_list = [
        {"name": str(AttributeName.POLICY), "value": str(attributes.policy)},
        {"name": str(AttributeName.SCOPE), "value": str(attributes.scope)},
        {"name": str(AttributeName.MAX_NUMA_NODES), "value": str(attributes.max_numa_nodes)},
    ]
    if pods is not None:
        signature = pod_fingerprint(pods)
        metadata["annotations"] = {ANNOTATION: signature}
        attributes_list += [
            {"name": ATTRIBUTE, "value": signature},
            {"name": ATTRIBUTE_METHOD, "value": str(FingerprintMethod.ALL)},
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "topologyPolicies": [_LEGACY_POLICIES.get((attributes.policy, attributes.scope), "None")],
        "zones": zones,
        "attributes": attributes_list,
    }


def _ordered(resources: Mapping[str, Amounts]) -> list[str]:
    """``cpu``, ``memory``, then hugepages by name."""
    head = [name for name in ("cpu", "memory") if name in resources]
    return head + sorted(name for name in resources if name not in ("cpu", "memory"))
