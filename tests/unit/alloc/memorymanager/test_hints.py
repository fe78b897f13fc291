"""Memory hints as bitmaps (beyond 8 NUMA nodes) equal the kubelet's subset-by-subset listing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.alloc import Planner
from agent.alloc.memorymanager import NUMAMemory, StaticMemoryPolicy, default_machine_state
from agent.alloc.memorymanager.hints import best_listed_hint, lattice_memory_hints
from agent.alloc.topologymanager import HintList, NUMAInfo, TopologyHint
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from tests.support.machines import GIB, machine
from tests.support.podfactory import container, make_pod

NODES = 10
MIB = 2**20


@st.composite
def machine_states(draw: st.DrawFn) -> dict[int, NUMAMemory]:
    """A 10-node memory state with random free memory, hugepages and NUMA groups in use."""
    topology = machine(sockets=NODES, threads=1, cores_per_numa=1, memory_gib=4, hugepages_2m=512)
    state = default_machine_state(topology, {})
    unused = list(range(NODES))
    while unused and bool(draw(st.booleans())):
        size = draw(st.integers(1, min(3, len(unused))))
        group = tuple(sorted(draw(st.permutations(unused))[:size]))
        unused = [n for n in unused if n not in group]
        for node in group:
            state[node].cells = group
            state[node].assignments = draw(st.integers(1, 3))
    for node in range(NODES):
        for table in state[node].tables.values():
            table.free = draw(st.integers(0, table.allocatable // MIB)) * MIB
            table.reserved = table.allocatable - table.free
    return state


requests = st.fixed_dictionaries(
    {"memory": st.integers(1, 16 * 1024).map(lambda m: m * MIB)},
    optional={"hugepages-2Mi": st.integers(0, 3 * 1024).map(lambda m: m * MIB)},
)


@st.composite
def reusables(draw: st.DrawFn) -> dict[tuple[int, ...], dict[str, int]]:
    numa = tuple(sorted(set(draw(st.lists(st.integers(0, NODES - 1), min_size=1, max_size=3)))))
    return {numa: {"memory": draw(st.integers(0, 4 * 1024)) * MIB}} if draw(st.booleans()) else {}


def listed_hints(
    state: dict[int, NUMAMemory], wanted: dict[str, int], reusable: dict[tuple[int, ...], dict[str, int]]
) -> dict[str, list[TopologyHint]]:
    """The kubelet's listing (the policy without NUMA info), with the pod's reusable init memory injected."""
    policy = StaticMemoryPolicy()
    listed: dict[str, list[TopologyHint]] = {}
    for resource, hints in policy.calculate_hints(state, wanted, reusable=reusable).items():
        assert isinstance(hints, list)
        listed[resource] = hints
    return listed


@settings(max_examples=150, deadline=None)
@given(machine_states(), requests, reusables(), st.integers(0, (1 << NODES) - 1))
def test_lattice_hints_equal_the_listing(
    state: dict[int, NUMAMemory], wanted: dict[str, int], reusable: dict[tuple[int, ...], dict[str, int]], within: int
) -> None:
    """On random machines the bitmap hints offer, prefer and rank the masks exactly as the kubelet's listing does."""
    numa_info = NUMAInfo.from_distance_map(range(NODES))
    listed = listed_hints(state, wanted, reusable)
    lattice = lattice_memory_hints(state, wanted, reusable, numa_info)
    assert set(listed) == set(lattice)
    for resource, hints in listed.items():
        assert HintList.from_hints(hints, numa_info) == lattice[resource]
    if listed:
        inside = [h for h in listed["memory"] if (h.affinity or 0) & within == within]
        expected = min(inside, key=lambda h: (not h.preferred, (h.affinity or 0).bit_count(), h.affinity), default=None)
        assert expected == best_listed_hint(lattice["memory"], within)


def test_policy_uses_the_lattice_beyond_eight_nodes() -> None:
    """With NUMA info and 10 nodes the policy answers with a HintList; on 2 nodes it keeps the listing."""
    big = default_machine_state(machine(sockets=NODES, threads=1, cores_per_numa=1, memory_gib=4), {})
    hints = StaticMemoryPolicy(NUMAInfo.from_distance_map(range(NODES))).calculate_hints(big, {"memory": 6 * GIB})
    assert isinstance(hints["memory"], HintList)
    assert 2 == hints["memory"].min_count
    small = default_machine_state(machine(sockets=2, threads=1, cores_per_numa=1, memory_gib=4), {})
    listed = StaticMemoryPolicy(NUMAInfo.from_distance_map(range(2))).calculate_hints(small, {"memory": 6 * GIB})
    assert [TopologyHint(0b11, True)] == listed["memory"]


def test_lattice_rejects_a_state_of_other_nodes() -> None:
    """A memory state over other NUMA nodes than the hints' is refused, naming both node lists."""
    state = default_machine_state(machine(sockets=2, threads=1, cores_per_numa=1, memory_gib=4), {})
    with pytest.raises(ValueError, match=r"memory state nodes \[0, 1\] are not the machine's NUMA nodes \[0, 1, 2\]"):
        lattice_memory_hints(state, {"memory": GIB}, {}, NUMAInfo.from_distance_map(range(3)))


def test_best_hint_outside_the_machine_is_none() -> None:
    """A required mask naming a node the machine lacks has no best hint."""
    numa_info = NUMAInfo.from_distance_map(range(NODES))
    state = default_machine_state(machine(sockets=NODES, threads=1, cores_per_numa=1, memory_gib=4), {})
    hints = lattice_memory_hints(state, {"memory": GIB}, {}, numa_info)["memory"]
    assert best_listed_hint(hints, 1 << NODES) is None
    assert TopologyHint(0b1, True) == best_listed_hint(hints)
    assert TopologyHint(0b100, True) == best_listed_hint(hints, 0b100)


STATIC_MEMORY = {
    "reservedSystemCPUs": "0",
    "memoryManagerPolicy": "Static",
    "systemReserved": {"memory": "924Mi"},
    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
    "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"},
}


def static_planner(nodes: int, policy: str) -> Planner:
    topology = machine(sockets=nodes, threads=1, cores_per_numa=2, memory_gib=8)
    return Planner(topology, config_from_mapping({**STATIC_MEMORY, "topologyManagerPolicy": policy}, env={}).planner)


def test_sixteen_node_static_memory_admission() -> None:
    """16 NUMA nodes, Static memory, single-numa-node: pods land on one node each; too big is rejected."""
    planner = static_planner(16, "single-numa-node")
    placed = [
        planner.admit(pod_from_dict(make_pod(f"p{i}", containers=[container("c", cpu="1", memory="6Gi")])))
        for i in range(3)
    ]
    assert [True] * 3 == [d.admitted for d in placed]
    assert [(0,), (1,), (2,)] == [d.numa_affinity for d in placed]
    fat = planner.admit(pod_from_dict(make_pod("fat", containers=[container("c", cpu="1", memory="10Gi")])))
    assert (False, "TopologyAffinityError") == (fat.admitted, fat.reason)


@pytest.mark.parametrize("policy", ["restricted", "best-effort", "none"])
def test_ten_node_planner_decides_as_with_the_listing(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same pods, admitted and released on 10 nodes, give the same decisions and memory state either way."""
    pods = [
        pod_from_dict(make_pod(f"p{i}", containers=[container("c", cpu="1", memory=f"{size}Gi")]))
        for i, size in enumerate([6, 12, 3, 20, 7, 7, 30, 2, 15, 60])
    ]

    def run() -> tuple[list[tuple[bool, tuple[int, ...] | None, str | None]], object]:
        planner = static_planner(NODES, policy)
        decisions = []
        for index, pod in enumerate(pods):
            decision = planner.admit(pod)
            decisions.append((decision.admitted, decision.numa_affinity, decision.reason))
            if index % 3 == 2:
                planner.release(pods[index - 1].uid)
        return decisions, planner.snapshot().memory

    lattice = run()
    monkeypatch.setattr("agent.alloc.memorymanager.policy_static.SMALL_LATTICE_NODES", 64)
    listed = run()
    assert listed == lattice
    assert any(not admitted for admitted, _, _ in lattice[0]) or policy == "none"
