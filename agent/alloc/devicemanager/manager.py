"""The device manager as a hint provider: ``GetTopologyHints`` and ``GetPodTopologyHints`` over held devices.

The kubelet's topology manager asks three providers for hints: the CPU, memory
and device managers (``pkg/kubelet/cm/devicemanager/topology_hints.go``). For
each device resource a container (container scope) or the whole pod (pod
scope) requests in its ``limits``, the device manager answers:

* nothing for a resource no device plugin serves on the node (``isDevicePluginResource``):
  podpin counts a resource as served when the device facts name a device of it;
* "no preference" (a nil list) when no device of the resource reports a NUMA
  node (``deviceHasTopologyAlignment``);
* "impossible" (an empty list) when the devices held are not exactly as many as
  requested (the kubelet's restart check: its state disagrees with the spec);
* otherwise the hints of :mod:`agent.alloc.devicemanager.hints` from the held devices.

The request is the container's limit, or for the pod the KEP-753 aggregate of
its containers' limits (``getPodDeviceRequest``: ``resource.PodLimits``); the
devices held are the container's, or the union over the pod's containers
(``podDevices``). Devices come in as a :class:`PodDevices` value handed to
:meth:`~agent.alloc.planner.Planner.admit`; without one (a pod without devices,
or whose devices are not known) the provider is not asked at all.

**podpin's choice:** a container that requests a device resource but holds
none of it in the facts gets no hint for it. The kubelet would hint from the
free devices and then allocate; podpin does not allocate devices, and facts
that lack a container's devices are facts it does not have. ``podpin plan``
says so (``docs/kubelet-semantics.md``, "Device manager").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.alloc.devicemanager.hints import held_device_hints
from agent.alloc.devices import PodDevices
from agent.alloc.topologymanager import HintList, NUMAInfo, TopologyHint
from agent.pods import ContainerKind, ContainerView, PodView
from agent.pods.resources import aggregate, is_extended

__all__ = ["DeviceManager", "DeviceHints", "container_device_requests", "pod_device_requests"]

DeviceHints = Mapping[str, Sequence[TopologyHint] | HintList | None]
"""Device resource -> its hints (None: no preference; empty: impossible)."""


def container_device_requests(container: ContainerView) -> dict[str, int]:
    """The extended resources the container's ``limits`` ask for (``IsExtendedResourceName``), above zero."""
    return {name: amount for name, amount in container.resources.limits.items() if amount > 0 and is_extended(name)}


def pod_device_requests(pod: PodView) -> dict[str, int]:
    """The pod's extended resources: the KEP-753 aggregate of its containers' limits (``resource.PodLimits``)."""
    totals = aggregate(
        (container_device_requests(c) for c in pod.containers),
        ((c.kind == ContainerKind.SIDECAR, container_device_requests(c)) for c in pod.init_containers),
    )
    return {name: amount for name, amount in totals.items() if amount > 0}


@dataclass(frozen=True, slots=True)
class DeviceManager:
    """The device hint provider for one machine (configuration only: its NUMA nodes)."""

    numa_info: NUMAInfo

    def _hints(self, requests: Mapping[str, int], devices: PodDevices, holders: Sequence[str] | None) -> DeviceHints:
        hints: dict[str, Sequence[TopologyHint] | HintList | None] = {}
        for resource, requested in sorted(requests.items()):
            node_devices = devices.inventory(resource)
            if not node_devices:
                continue
            if not any(node_devices.values()):
                hints[resource] = None
                continue
            held = devices.held(resource, holders)
            if not held:
                continue
            if len(held) != requested:
                hints[resource] = []
                continue
            hints[resource] = held_device_hints(self.numa_info, node_devices, held, requested)
        return hints

    def container_hints(self, container: ContainerView, devices: PodDevices) -> DeviceHints:
        """``GetTopologyHints`` for one container of the pod ``devices`` describes, from the devices it holds."""
        return self._hints(container_device_requests(container), devices, (container.name,))

    def pod_hints(self, pod: PodView, devices: PodDevices) -> DeviceHints:
        """``GetPodTopologyHints``: the pod's request against the devices all its containers hold."""
        return self._hints(pod_device_requests(pod), devices, None)
