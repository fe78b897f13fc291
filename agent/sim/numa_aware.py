"""The NUMA-aware scheduler of ``podpin simulate --scheduler numa-aware``: NodeResourceTopologyMatch, emulated (pure).

Each node publishes the NodeResourceTopology podpin's agent would publish
(:mod:`agent.nrt`, from the node's planner state after every admission), and
this module reads those objects the way scheduler-plugins'
``pkg/noderesourcetopology`` does:

* **Filter** (``filter.go``): only with the ``single-numa-node`` policy read
  from the object's ``topologyManagerPolicy`` / ``topologyManagerScope``
  attributes (the plugin's defaults are ``none`` / ``container``: any other
  policy filters nothing). BestEffort pods pass. For each requested resource
  with a non-zero amount, the NUMA zones that can hold it are those listing it
  with ``available`` >= the request — except that for a pod that is not
  Guaranteed, CPU, memory and hugepages fit any zone that lists them. A
  resource no zone lists passes when it is an extended resource (host-level,
  ``isHostLevelResource``) and fails otherwise; a resource the node does not
  have at all fails. The zones of all resources are intersected; none left
  rejects the node. Pod scope checks the pod's requests once; container scope
  checks each container and subtracts it from the lowest-numbered fitting zone
  (the one the kubelet's single-numa-node merge picks) before the next one.
* **Score**: the default ``LeastAllocated`` strategy (``least_allocated.go``,
  ``score.go``): per zone and requested resource ``(available − request) ×
  100 / available`` in whole units (``Quantity.Value()``: CPUs rounded up), 0
  when the zone lacks it or it does not fit, averaged over the resources with
  weight 1; the node's score is the smallest non-zero zone score (the plugin's
  ``scoreForEachNUMANode``); container scope averages the containers' scores.
  Pods that are not Guaranteed score 100 everywhere; policies other than
  ``single-numa-node`` score 0.

The node is the one with the highest sum of that score and kube-scheduler's
default ``NodeResourcesFit`` ``LeastAllocated`` score (CPU and memory,
weight 1 each), among the nodes that pass ``NodeResourcesFit`` and the NRT
filter; ties go to the lowest-numbered node.

Two departures, both to count what podpin's planner counts: the pod's
requests are the scheduler's own (pod-level ``spec.resources`` when set,
else the KEP-753 effective requests with sidecars summed, plus overhead),
where the plugin's ``GetPodEffectiveRequest`` predates both and would, for
example, count a pod-level pod by its containers; and in container scope a
sidecar (restartable init container) is checked and subtracted like an app
container, since it runs alongside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.alloc import TopologyManagerPolicy, TopologyManagerScope
from agent.nrt import ZONE_TYPE, AttributeName, zone_numa
from agent.pods import ContainerKind, ContainerView, PodView, QOSClass, effective_requests
from agent.quantity import QuantityError, cpu_millis, memory_bytes

__all__ = ["NUMAZone", "nrt_filter", "nrt_score", "zones_of", "topology_manager"]

MAX_SCORE = 100
_AFFINE_PREFIX = "hugepages-"


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMAZone:
    """One ``Node`` zone: its NUMA id and the available amount of each resource (CPU in millicores)."""

    numa: int
    available: Mapping[str, int]


def _amount(resource: str, value: object) -> int:
    text = str(value)
    try:
        return cpu_millis(text) if resource == "cpu" else memory_bytes(text)
    except QuantityError:
        return 0


def zones_of(obj: Mapping[str, Any]) -> list[NUMAZone]:
    """The NUMA zones of a NodeResourceTopology (type ``Node``, name ``node-<id>``), by id."""
    zones: list[NUMAZone] = []
    for zone in obj.get("zones") or []:
        numa = zone_numa(str(zone.get("name", "")))
        if zone.get("type") != ZONE_TYPE or numa is None:
            continue
        available = {str(r["name"]): _amount(str(r["name"]), r.get("available")) for r in zone.get("resources") or []}
        zones.append(NUMAZone(numa=numa, available=available))
    return sorted(zones, key=lambda z: z.numa)


def topology_manager(obj: Mapping[str, Any]) -> tuple[TopologyManagerPolicy, TopologyManagerScope]:
    """(policy, scope) from the object's attributes; the plugin's defaults (``none``, ``container``) for a value
    that is absent or not a known name."""
    policy, scope = TopologyManagerPolicy.NONE, TopologyManagerScope.CONTAINER
    for attribute in obj.get("attributes") or []:
        value = str(attribute.get("value"))
        if attribute.get("name") == AttributeName.POLICY and value in tuple(TopologyManagerPolicy):
            policy = TopologyManagerPolicy(value)
        elif attribute.get("name") == AttributeName.SCOPE and value in tuple(TopologyManagerScope):
            scope = TopologyManagerScope(value)
    return policy, scope


def _affine(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith(_AFFINE_PREFIX)


def _extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def _pod_requests(pod: PodView) -> dict[str, int]:
    source = pod.pod_resources.requests if pod.pod_resources is not None else effective_requests(pod)
    result = dict(source)
    for name, value in pod.overhead.items():
        result[name] = result.get(name, 0) + value
    return result


def _fitting(
    zones: list[NUMAZone], requests: Mapping[str, int], guaranteed: bool, node_resources: set[str]
) -> list[int] | None:
    """NUMA ids where every requested resource fits (``resourcesAvailableInAnyNUMANodes``); None: the node fails."""
    fit = {zone.numa for zone in zones}
    for resource, quantity in requests.items():
        if quantity == 0:
            continue
        if resource not in node_resources:
            return None
        listed = [zone for zone in zones if resource in zone.available]
        if not listed and _extended(resource):
            continue
        good = {z.numa for z in listed if (not guaranteed and _affine(resource)) or z.available[resource] >= quantity}
        fit &= good
        if not fit:
            return None
    return sorted(fit)


def nrt_filter(pod: PodView, obj: Mapping[str, Any], node_resources: Iterable[str] = ("cpu", "memory")) -> bool:
    """True when the NodeResourceTopologyMatch filter lets the pod onto this node (module docstring)."""
    policy, scope = topology_manager(obj)
    if policy != TopologyManagerPolicy.SINGLE_NUMA_NODE or pod.qos == QOSClass.BESTEFFORT:
        return True
    zones = zones_of(obj)
    names = set(node_resources) | {name for zone in zones for name in zone.available}
    guaranteed = pod.qos == QOSClass.GUARANTEED
    if scope == TopologyManagerScope.POD:
        return _fitting(zones, _pod_requests(pod), guaranteed, names) is not None
    for container in pod.init_containers:
        if (
            container.kind != ContainerKind.SIDECAR
            and _fitting(zones, container.resources.requests, guaranteed, names) is None
        ):
            return False
    for container in _long_running(pod):
        fit = _fitting(zones, container.resources.requests, guaranteed, names)
        if fit is None:
            return False
        zones = _subtract(zones, fit[0], container.resources.requests, guaranteed)
    return True


def _long_running(pod: PodView) -> list[ContainerView]:
    return [c for c in pod.init_containers if c.kind == ContainerKind.SIDECAR] + list(pod.containers)


def _subtract(zones: list[NUMAZone], numa: int, requests: Mapping[str, int], guaranteed: bool) -> list[NUMAZone]:
    result = []
    for zone in zones:
        if zone.numa != numa:
            result.append(zone)
            continue
        available = dict(zone.available)
        for resource, quantity in requests.items():
            if resource in available and quantity and (guaranteed or not _affine(resource)):
                available[resource] -= quantity
        result.append(NUMAZone(numa=zone.numa, available=available))
    return result


def _value(resource: str, amount: int) -> int:
    """``Quantity.Value()``: CPUs in whole units rounded up, everything else as is."""
    return -(-amount // 1000) if resource == "cpu" else amount


def _least_allocated(requests: Mapping[str, int], zone: NUMAZone) -> int:
    if not requests:
        return 0
    total = 0
    for resource, quantity in requests.items():
        capacity = _value(resource, zone.available.get(resource, 0))
        requested = _value(resource, quantity)
        if capacity == 0 or requested > capacity:
            continue
        total += (capacity - requested) * MAX_SCORE // capacity
    return total // len(requests)


def _score_zones(requests: Mapping[str, int], zones: list[NUMAZone]) -> int:
    """``scoreForEachNUMANode``: the smallest non-zero zone score (with the plugin's handling of zeros)."""
    lowest = 0
    for zone in zones:
        score = _least_allocated(requests, zone)
        if lowest == 0 or (score != 0 and score < lowest):
            lowest = score
    return lowest


def nrt_score(pod: PodView, obj: Mapping[str, Any]) -> int:
    """The NodeResourceTopologyMatch ``LeastAllocated`` score of this node for the pod (0-100)."""
    if pod.qos != QOSClass.GUARANTEED:
        return MAX_SCORE
    policy, scope = topology_manager(obj)
    if policy != TopologyManagerPolicy.SINGLE_NUMA_NODE:
        return 0
    zones = zones_of(obj)
    if scope == TopologyManagerScope.POD:
        return _score_zones(_pod_requests(pod), zones)
    containers = list(pod.init_containers) + list(pod.containers)
    if not containers:
        return 0
    return int(sum(_score_zones(c.resources.requests, zones) for c in containers) / len(containers))
