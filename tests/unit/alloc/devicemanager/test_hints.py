"""The device manager's hints from held devices: the kubelet's regenerated-hints cases, as data, and the lattice path.

The table transcribes, in our own words, the facts of the kubelet's
``pkg/kubelet/cm/devicemanager/topology_hints_test.go`` (``getCommonTestCases``
and ``getPodScopeTestCases``) that concern devices a container or pod already
holds, plus the rules of ``GetTopologyHints`` that hold before any device is
looked at (no NUMA node reported anywhere: no preference; a resource no device
names: no hint). Resource names carry a domain, as device plugin resources do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.alloc import AllocatableDevices, DeviceGroup, PodDevices
from agent.alloc.devicemanager import DeviceManager, held_device_hints, pod_device_requests
from agent.alloc.topologymanager import HintList, NUMAInfo, TopologyHint, mask_of
from agent.alloc.trace import listed_hints
from agent.pods.model import pod_from_dict
from tests.support.podfactory import container, make_pod, sidecar

TWO = NUMAInfo(nodes=(0, 1))
DEV = "example.com/testdevice"


def hint(nodes: Sequence[int], preferred: bool) -> TopologyHint:
    """A hint on these NUMA nodes."""
    return TopologyHint(mask_of(nodes), preferred)


def node(*devices: tuple[str, tuple[int, ...]], resource: str = DEV) -> tuple[DeviceGroup, ...]:
    """One group per device: (id, NUMA nodes)."""
    return tuple(DeviceGroup(resource=resource, ids=(device,), numa=numa) for device, numa in devices)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One container asking for ``request`` devices of ``DEV``, holding ``held`` out of the node's ``devices``."""

    name: str
    request: int
    devices: tuple[DeviceGroup, ...]
    held: tuple[str, ...]
    expected: Sequence[TopologyHint] | None
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def _main(limits: Mapping[str, int]) -> Any:
    """The one container ``main`` of a pod with these limits."""
    raw = make_pod("gpu", containers=[container("main", cpu="1", memory="1Gi", limits=limits, requests=limits)])
    return pod_from_dict(raw).containers[0]


def _held(devices: tuple[DeviceGroup, ...], ids: tuple[str, ...]) -> tuple[DeviceGroup, ...]:
    return tuple(group for group in devices if group.ids[0] in ids)


CASES = [
    Case(
        name="no device reports a NUMA node: no preference (nil)",
        request=1,
        devices=node(("Dev1", ()), ("Dev2", ())),
        held=("Dev1",),
        expected=None,
    ),
    Case(
        name="held device on NUMA 1, the other reports none: {1} alone (no device on NUMA 0 to widen to)",
        request=1,
        devices=node(("Dev1", ()), ("Dev2", (1,))),
        held=("Dev2",),
        expected=[hint([1], True)],
    ),
    Case(
        name="kubelet 'all already allocated to container': two held on NUMA 0 give {0} alone, preferred",
        request=2,
        devices=node(("Dev1", (0,)), ("Dev2", (0,))),
        held=("Dev1", "Dev2"),
        expected=[hint([0], True)],
    ),
    Case(
        name="kubelet 'less already allocated than requested': impossible (empty)",
        request=4,
        devices=node(("Dev1", (0,)), ("Dev2", (0,)), ("Dev3", (1,)), ("Dev4", (1,))),
        held=("Dev1", "Dev2"),
        expected=[],
    ),
    Case(
        name="kubelet 'more already allocated than requested': impossible (empty)",
        request=2,
        devices=node(("Dev1", (0,)), ("Dev2", (0,)), ("Dev3", (1,)), ("Dev4", (1,))),
        held=("Dev1", "Dev2", "Dev3", "Dev4"),
        expected=[],
    ),
    Case(
        name="one held device per node for a request of 2: only {0,1}, preferred (no narrower set holds 2)",
        request=2,
        devices=node(("Dev1", (0,)), ("Dev2", (1,))),
        held=("Dev1", "Dev2"),
        expected=[hint([0, 1], True)],
    ),
    Case(
        name="two held across nodes while a node could hold two: only {0,1}, not preferred",
        request=2,
        devices=node(("Dev1", (0,)), ("Dev2", (1,)), ("Dev3", (0,)), ("Dev4", (1,))),
        held=("Dev1", "Dev2"),
        expected=[hint([0, 1], False)],
    ),
    Case(
        name="a GPU on NUMA 1 of one GPU per node: {1} preferred, {0,1} not",
        request=1,
        devices=node(("gpu0", (0,)), ("gpu1", (1,))),
        held=("gpu1",),
        expected=[hint([1], True), hint([0, 1], False)],
    ),
    Case(
        name="a device spanning both nodes fits either node alone: {0}, {1} preferred, {0,1} not",
        request=1,
        devices=node(("nic0", (0, 1))),
        held=("nic0",),
        expected=[hint([0], True), hint([1], True), hint([0, 1], False)],
    ),
    Case(
        name="a held device without NUMA node where others have one: impossible (it is on no node)",
        request=1,
        devices=node(("Dev1", ()), ("Dev2", (1,))),
        held=("Dev1",),
        expected=[],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_container_hints_from_held_devices(case: Case) -> None:
    """The container's hints for its resource are the kubelet's regenerated hints for the devices it holds."""
    devices = PodDevices(
        containers=MappingProxyType({"main": _held(case.devices, case.held)}),
        node=AllocatableDevices(groups=case.devices),
    )
    found = DeviceManager(TWO).container_hints(_main({DEV: case.request}), devices)
    got = found[DEV]
    expected = None if case.expected is None else tuple(listed_hints(case.expected))
    assert expected == (None if got is None else listed_hints(got))


def test_resource_no_device_names_gives_no_hint() -> None:
    """A requested resource that no device in the facts names is not a device plugin resource: no entry."""
    devices = PodDevices(containers=MappingProxyType({}), node=AllocatableDevices(groups=node(("Dev1", (0,)))))
    assert {} == dict(DeviceManager(TWO).container_hints(_main({"example.com/other": 1}), devices))


def test_requested_but_not_held_gives_no_hint() -> None:
    """podpin's choice: a container holding none of a requested resource in the facts gets no hint for it."""
    devices = PodDevices(containers=MappingProxyType({}), node=AllocatableDevices(groups=node(("Dev1", (0,)))))
    assert {} == dict(DeviceManager(TWO).container_hints(_main({DEV: 1}), devices))


def test_native_and_hugepage_resources_are_not_device_requests() -> None:
    """Only extended resources (a domain outside kubernetes.io, not ``requests.``) are device requests."""
    raw = make_pod(
        "p",
        containers=[
            container(
                "c",
                cpu="1",
                memory="1Gi",
                limits={"hugepages-2Mi": "2Mi", "example.com/gpu": 1, "kubernetes.io/thing": 1},
                requests={"hugepages-2Mi": "2Mi", "example.com/gpu": 1, "kubernetes.io/thing": 1},
            )
        ],
    )
    assert {"example.com/gpu": 1} == pod_device_requests(pod_from_dict(raw))


def test_pod_scope_takes_union_of_containers_devices() -> None:
    """Pod scope (``GetPodTopologyHints``): the pod's aggregate request against the devices of all its containers."""
    groups = node(("Dev1", (0,)), ("Dev2", (0,)), ("Dev3", (1,)), ("Dev4", (1,)))
    raw = make_pod(
        "p",
        containers=[
            container("a", cpu="1", memory="1Gi", limits={DEV: 1}),
            container("b", cpu="1", memory="1Gi", limits={DEV: 1}),
        ],
    )
    devices = PodDevices(
        containers=MappingProxyType({"a": _held(groups, ("Dev3",)), "b": _held(groups, ("Dev4",))}),
        node=AllocatableDevices(groups=groups),
    )
    got = DeviceManager(TWO).pod_hints(pod_from_dict(raw), devices)[DEV]
    assert (hint([1], True), hint([0, 1], False)) == (None if got is None else listed_hints(got))


def test_pod_request_aggregates_sidecars_and_init_containers() -> None:
    """The pod's device request is the KEP-753 aggregate: sidecars add to the apps, plain init containers take max."""
    raw = make_pod(
        "p",
        init_containers=[
            container("init", cpu="1", memory="1Gi", limits={DEV: 3}),
            sidecar("side", cpu="1", memory="1Gi", limits={DEV: 1}),
        ],
        containers=[container("a", cpu="1", memory="1Gi", limits={DEV: 1})],
    )
    assert {DEV: 3} == pod_device_requests(pod_from_dict(raw))


def _reference(
    numa: NUMAInfo, everything: list[tuple[int, ...]], held: list[tuple[int, ...]], request: int
) -> set[TopologyHint]:
    """generateDeviceTopologyHints over every subset of the nodes hosting a device, written out plainly."""
    nodes = tuple(n for n in numa.nodes if any(n in d for d in everything)) or numa.nodes
    min_size, found = len(nodes), []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            if size < min_size and sum(1 for d in everything if set(d) & set(combo)) >= request:
                min_size = size
            if sum(1 for d in held if set(d) & set(combo)) >= request:
                found.append(mask_of(combo))
    return {TopologyHint(mask, mask.bit_count() == min_size) for mask in found}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_many_nodes_lattice_equals_listing(data: st.DataObject) -> None:
    """Beyond 8 NUMA nodes hosting devices the hints come as a bitmap; it names exactly the hints of the plain
    listing, over the nodes that host a device only (node 9 hosts none here)."""
    numa = NUMAInfo(nodes=tuple(range(10)))
    node_ids = st.sampled_from(numa.nodes[:9])
    background = [(n,) for n in range(9)]
    everything = background + data.draw(
        st.lists(st.lists(node_ids, min_size=1, max_size=2).map(tuple), min_size=1, max_size=6)
    )
    held = data.draw(st.lists(st.sampled_from(everything), min_size=1, max_size=3))
    request = len(held)
    node_devices = {f"d{i}": numa_ids for i, numa_ids in enumerate(everything)}
    held_devices = {f"h{i}": numa_ids for i, numa_ids in enumerate(held)}
    got = held_device_hints(numa, {**node_devices, **held_devices}, held_devices, request)
    assert isinstance(got, HintList)
    assert _reference(numa, everything + held, held, request) == set(listed_hints(got))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_nodes_without_a_device_of_the_resource_change_no_hint(data: st.DataObject) -> None:
    """The kubelet looks only at the NUMA nodes hosting a device of the resource (``deviceNUMANodes``, v1.36):
    a machine with more nodes that host none gives exactly the same hints, and no hint names such a node.

    Failed before: every subset of the machine's nodes was a candidate, so a GPU on NUMA 1 also gave {0,1}.
    """
    hosting = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True).map(sorted))
    extra = data.draw(st.lists(st.integers(6, 9), max_size=3, unique=True))
    devices = data.draw(
        st.lists(st.lists(st.sampled_from(hosting), min_size=1, max_size=2).map(tuple), min_size=1, max_size=5)
    )
    node_devices = {f"d{i}": numa for i, numa in enumerate(devices)}
    held_ids = data.draw(st.lists(st.sampled_from(sorted(node_devices)), min_size=1, max_size=3, unique=True))
    held = {name: node_devices[name] for name in held_ids}
    alone = held_device_hints(NUMAInfo(nodes=tuple(hosting)), node_devices, held, len(held))
    wider = held_device_hints(NUMAInfo(nodes=tuple(sorted(hosting + extra))), node_devices, held, len(held))
    assert set(listed_hints(alone)) == set(listed_hints(wider))
