"""From PodResources responses to the device values of :mod:`agent.alloc.devices` (pure).

The kubelet answers ``List`` with every pod's containers and their
``ContainerDevices`` (resource name, device ids, NUMA nodes of the device
group), ``Get`` with one pod in the same shape, and ``GetAllocatableResources``
with the node's devices in that shape too (NFD's topology-updater reads the
same three). Containers without devices are left out; CPU and memory fields are
not read: podpin's own planner owns CPUs, and the kubelet (``cpuManagerPolicy:
none`` next to podpin) reports none.

A malformed entry (no resource name, no device id, a negative NUMA id) is left
out and named in the returned problems, so one bad entry never hides the
others' devices.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from agent.alloc import AllocatableDevices, ContainerKey, DeviceAssignments, DeviceGroup

if TYPE_CHECKING:  # the generated classes only type the arguments; nothing here imports protobuf
    from agent.podresources.v1.api_pb2 import (
        AllocatableResourcesResponse,
        ContainerDevices,
        GetPodResourcesResponse,
        ListPodResourcesResponse,
        PodResources,
    )

__all__ = ["allocatable_from_response", "assignments_from_list", "assignments_from_pod"]


def _group(devices: ContainerDevices, where: str, problems: list[str]) -> DeviceGroup | None:
    resource = devices.resource_name
    if not resource:
        problems.append(f"{where}: a device group without a resource name")
        return None
    ids = tuple(devices.device_ids)
    if not ids or any(not device for device in ids):
        problems.append(f"{where}: {resource} group with an empty device id list or an empty id")
        return None
    numa = sorted({node.ID for node in devices.topology.nodes})
    if any(node < 0 for node in numa):
        problems.append(f"{where}: {resource} devices {list(ids)} on a negative NUMA node {numa}")
        return None
    return DeviceGroup(resource=resource, ids=ids, numa=tuple(numa))


def _groups(devices: Iterable[ContainerDevices], where: str, problems: list[str]) -> list[DeviceGroup]:
    return [group for entry in devices if (group := _group(entry, where, problems)) is not None]


def _add_pod(pod: PodResources, into: dict[ContainerKey, list[DeviceGroup]], problems: list[str]) -> None:
    for container in pod.containers:
        where = f"pod {pod.namespace}/{pod.name} container {container.name}"
        groups = _groups(container.devices, where, problems)
        if groups:
            key = ContainerKey(namespace=pod.namespace, pod=pod.name, container=container.name)
            into.setdefault(key, []).extend(groups)


def assignments_from_list(response: ListPodResourcesResponse) -> tuple[DeviceAssignments, list[str]]:
    """Every container's devices from a ``List`` answer, and the problems found."""
    problems: list[str] = []
    entries: dict[ContainerKey, list[DeviceGroup]] = {}
    for pod in response.pod_resources:
        _add_pod(pod, entries, problems)
    return DeviceAssignments.of(entries), problems


def assignments_from_pod(response: GetPodResourcesResponse) -> tuple[DeviceAssignments, list[str]]:
    """One pod's containers' devices from a ``Get`` answer, and the problems found."""
    problems: list[str] = []
    entries: dict[ContainerKey, list[DeviceGroup]] = {}
    if response.HasField("pod_resources"):
        _add_pod(response.pod_resources, entries, problems)
    return DeviceAssignments.of(entries), problems


def allocatable_from_response(response: AllocatableResourcesResponse) -> tuple[AllocatableDevices, list[str]]:
    """The node's devices from a ``GetAllocatableResources`` answer, and the problems found."""
    problems: list[str] = []
    groups = _groups(response.devices, "allocatable devices", problems)
    return AllocatableDevices(groups=tuple(groups)), problems
