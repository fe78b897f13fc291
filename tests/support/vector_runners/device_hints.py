"""Runner for ``device_hints.json``: the device manager's topology hints, alone and merged with other providers.

``generate`` is ``generateDeviceTopologyHints`` over the devices a container holds
(:func:`~agent.alloc.devicemanager.held_device_hints`); ``container_hints`` goes through the manager's checks
(``GetTopologyHints``: no device reports a NUMA node, held count against the request); ``merge`` merges the
generated hints with the other providers' under a policy.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import AllocatableDevices, DeviceGroup, PodDevices
from agent.alloc.devicemanager import DeviceManager, held_device_hints
from agent.alloc.topologymanager import NUMAInfo, ProviderHints, TopologyHint, ids_of, make_policy
from agent.pods.model import pod_from_dict
from tests.support.podfactory import container, make_pod
from tests.support.vector_runners.topology_merge import providers

Listed = list[tuple[tuple[int, ...] | None, bool]]


def _devices(case: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {device["id"]: tuple(device["numa"]) for device in case["devices"]}


def _listed(hints: object) -> Listed | None:
    if hints is None:
        return None
    assert isinstance(hints, list), f"expected listed hints, got {hints!r}"
    found: Listed = []
    for hint in hints:
        assert isinstance(hint, TopologyHint)
        found.append((None if hint.affinity is None else ids_of(hint.affinity), hint.preferred))
    return sorted(found, key=repr)


def _expected(raw: list[dict[str, Any]] | None) -> Listed | None:
    return None if raw is None else sorted(((tuple(h["mask"]), h["preferred"]) for h in raw), key=repr)


def _generated(case: dict[str, Any], numa: NUMAInfo) -> list[TopologyHint]:
    devices = _devices(case)
    hints = held_device_hints(numa, devices, {d: devices[d] for d in case["held"]}, case["request"])
    assert isinstance(hints, list)
    return hints


def _container_hints(case: dict[str, Any], numa: NUMAInfo) -> object:
    """The one container ``main`` (limit ``limit``) holding ``allocated`` out of the node's ``devices``."""
    resource = case["resource"]
    pod = pod_from_dict(make_pod("devices", containers=[container("main", limits={resource: case["limit"]})]))
    node = tuple(DeviceGroup(resource=resource, ids=(d,), numa=n) for d, n in _devices(case).items())
    held = tuple(group for group in node if group.ids[0] in case["allocated"])
    facts = PodDevices(containers={"main": held} if held else {}, node=AllocatableDevices(groups=node))
    return DeviceManager(numa).container_hints(pod.containers[0], facts).get(resource)


def run(case: dict[str, Any], group: str | None) -> None:
    """Run one case by its kind."""
    assert group is None
    numa = NUMAInfo(nodes=tuple(case["numa_nodes"]))
    if case["kind"] == "generate":
        assert _expected(case["expect_hints"]) == _listed(_generated(case, numa))
    elif case["kind"] == "container_hints":
        assert _expected(case["expect_hints"]) == _listed(_container_hints(case, numa))
    else:
        assert case["kind"] == "merge"
        given: list[ProviderHints] = [{case["resource"]: _generated(case, numa)}, *providers(case["other_providers"])]
        best, admit = make_policy(case["policy"], numa).merge(given)
        expected = case["expect"]
        actual_mask = None if best.affinity is None else list(ids_of(best.affinity))
        assert (expected["mask"], expected["preferred"], expected["admit"]) == (actual_mask, best.preferred, admit)
