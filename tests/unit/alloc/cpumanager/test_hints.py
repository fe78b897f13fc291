"""CPU topology hints: the kubelet's listing on small machines, a lattice bitmap on large ones, same hints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.alloc.cpumanager.hints import cpu_hints, lattice_cpu_hints, listed_cpu_hints
from agent.alloc.topologymanager import HintList, NUMAInfo, TopologyHint
from agent.cpuset import CPUSet
from tests.support.machines import machine

BIG = machine(sockets=2, numa_per_socket=5, cores_per_numa=2, threads=2)  # 10 NUMA nodes, 40 CPUs


def test_small_machine_lists_like_the_kubelet() -> None:
    """2 nodes, request 10 of 16 free per node: single nodes preferred, the pair not, in IterateBitMasks order."""
    small = machine()
    hints = cpu_hints(small, small.online_cpus, CPUSet(), 10, numa_info=NUMAInfo.from_topology(small))
    assert [TopologyHint(1, True), TopologyHint(2, True), TopologyHint(3, False)] == hints


def test_full_node_leaves_only_non_preferred_hints() -> None:
    """When node 0 could hold the request empty but is busy now, only the wider hint exists, non-preferred."""
    small = machine()
    half_busy = CPUSet(range(8)) | CPUSet(range(8, 16))  # first threads of every core: 8 free CPUs per node
    available = small.online_cpus - half_busy
    assert [TopologyHint(1, True), TopologyHint(2, True), TopologyHint(3, False)] == listed_cpu_hints(
        small, available, CPUSet(), 8, False
    )
    assert [TopologyHint(3, False)] == listed_cpu_hints(small, available, CPUSet(), 12, False)


def test_reusable_cpus_must_be_inside_the_hint() -> None:
    """A hint must contain every reusable CPU's node."""
    small = machine()
    reusable = CPUSet([0])
    hints = listed_cpu_hints(small, small.online_cpus - reusable, reusable, 2, False)
    assert [TopologyHint(1, True), TopologyHint(3, False)] == hints


def test_large_machine_gets_a_bitmap() -> None:
    """Beyond 8 NUMA nodes the hints come as a HintList over the topology manager's nodes."""
    result = cpu_hints(BIG, BIG.online_cpus, CPUSet(), 6, numa_info=NUMAInfo.from_topology(BIG))
    assert isinstance(result, HintList)


@settings(max_examples=60, deadline=None)
@given(
    busy=st.sets(st.integers(0, 39), max_size=30),
    reusable=st.sets(st.integers(0, 39), max_size=3),
    request=st.integers(1, 20),
    align=st.booleans(),
)
def test_lattice_equals_listing(busy: set[int], reusable: set[int], request: int, align: bool) -> None:
    """On a 10-node machine the bitmap path offers exactly the listed hints, with the same preference."""
    info = NUMAInfo.from_topology(BIG)
    available = BIG.online_cpus - CPUSet(busy) - CPUSet(reusable)
    listed = HintList.from_hints(listed_cpu_hints(BIG, available, CPUSet(reusable), request, align), info)
    lattice = lattice_cpu_hints(BIG, info, available, CPUSet(reusable), request, align)
    assert (listed.masks, listed.preferred, listed.min_count) == (lattice.masks, lattice.preferred, lattice.min_count)


@pytest.mark.parametrize("nodes", [10, 16])
def test_planner_admits_on_large_machines(nodes: int) -> None:
    """The planner admits a pod-level pod NUMA-aligned on 10- and 16-node machines."""
    from agent.alloc import Planner
    from agent.config import config_from_mapping
    from agent.pods.model import pod_from_dict
    from tests.support.podfactory import container, make_pod, resources

    big = machine(sockets=2, numa_per_socket=nodes // 2, cores_per_numa=4, threads=2)
    config = config_from_mapping(
        {
            "reservedSystemCPUs": "0",
            "topologyManagerPolicy": "single-numa-node",
            "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"},
        },
        env={},
    )
    planner = Planner(big, config.planner)
    pod = pod_from_dict(
        make_pod(
            "p",
            containers=[container("db", cpu="4", memory="1Gi"), container("s")],
            pod_resources=resources(cpu="6", memory="2Gi"),
        )
    )
    decision = planner.admit(pod)
    assert (True, 1) == (decision.admitted, len(decision.numa_affinity or ()))
