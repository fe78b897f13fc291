"""The Static memory policy: per-NUMA accounting, hugepages, NUMA groups, init-container reuse, pod bubbles."""

from __future__ import annotations

from typing import Any

import pytest

from agent.alloc import AllocationError, EmptyPodSharedPoolError
from agent.alloc.memorymanager import (
    Block,
    MemoryState,
    StaticMemoryPolicy,
    default_machine_state,
    hugepage_resource_name,
    pod_requested_memory,
    validate_memory_state,
)
from agent.alloc.topologymanager import TopologyHint
from agent.pods.model import pod_from_dict
from tests.support.machines import GIB, machine
from tests.support.podfactory import container, make_pod, resources, sidecar

MIB = 2**20


def state(
    memory_gib: int = 8, nodes: int = 2, hugepages_2m: int = 0, reserved: dict[int, dict[str, int]] | None = None
) -> MemoryState:
    topology = machine(sockets=nodes, threads=1, cores_per_numa=2, memory_gib=memory_gib, hugepages_2m=hugepages_2m)
    return MemoryState(machine=default_machine_state(topology, reserved or {}))


def pod(*args: Any, **kwargs: Any) -> Any:
    return pod_from_dict(make_pod(*args, **kwargs))


def test_hugepage_resource_names() -> None:
    """Page sizes in KiB map to the API's canonical resource names."""
    assert ["hugepages-2Mi", "hugepages-1Gi", "hugepages-64Ki"] == [
        hugepage_resource_name(k) for k in (2048, 1048576, 64)
    ]


def test_default_machine_state_subtracts_reservation_and_hugepages() -> None:
    """allocatable = MemTotal - reserved - hugepages, per node; hugepages have their own table."""
    machine_state = state(memory_gib=8, hugepages_2m=512, reserved={0: {"memory": GIB}}).machine
    memory0, pages0 = machine_state[0].tables["memory"], machine_state[0].tables["hugepages-2Mi"]
    assert (8 * GIB, GIB, 8 * GIB - GIB - GIB) == (memory0.total, memory0.system_reserved, memory0.allocatable)
    assert (GIB, GIB) == (pages0.total, pages0.free)
    assert 7 * GIB == machine_state[1].tables["memory"].allocatable


def test_hints_prefer_the_smallest_fitting_group() -> None:
    """One node fits 6Gi of an 8Gi node: both single nodes preferred, the pair not."""
    hints = StaticMemoryPolicy().calculate_hints(state().machine, {"memory": 6 * GIB})
    assert [TopologyHint(1, True), TopologyHint(2, True), TopologyHint(3, False)] == hints["memory"]


def test_request_larger_than_a_node_spans_a_group() -> None:
    """12Gi needs both nodes; the block is placed on the group and fills node 0 first."""
    memory = state()
    p = pod("big", containers=[container("c", cpu="1", memory="12Gi")])
    blocks = StaticMemoryPolicy().allocate(memory, p, p.containers[0], 3, False)
    assert (Block((0, 1), "memory", 12 * GIB),) == blocks
    assert (8 * GIB, 4 * GIB) == (
        memory.machine[0].tables["memory"].reserved,
        memory.machine[1].tables["memory"].reserved,
    )
    assert ((0, 1), (0, 1)) == (memory.machine[0].cells, memory.machine[1].cells)


def test_a_node_in_a_group_cannot_serve_a_single_node_block() -> None:
    """After a cross-NUMA block, no single-node hint exists on its nodes (KEP-1769 groups)."""
    memory = state(nodes=2, memory_gib=8)
    p = pod("big", containers=[container("c", cpu="1", memory="12Gi")])
    policy = StaticMemoryPolicy()
    policy.allocate(memory, p, p.containers[0], 3, False)
    hints = policy.calculate_hints(memory.machine, {"memory": GIB})
    assert [TopologyHint(3, False)] == hints["memory"]


def test_a_group_violation_is_refused() -> None:
    """A multi-node mask over a node already serving single-node blocks violates the group rule."""
    memory = state()
    policy = StaticMemoryPolicy()
    small = pod("small", containers=[container("c", cpu="1", memory="1Gi")])
    policy.allocate(memory, small, small.containers[0], 1, True)
    big = pod("big", containers=[container("c", cpu="1", memory="12Gi")])
    with pytest.raises(AllocationError) as err:
        policy.allocate(memory, big, big.containers[0], 3, False)
    assert "[memorymanager] preferred hint violates NUMA node allocation" == err.value.message


def test_no_node_fits_gives_the_kubelet_error() -> None:
    """Without a hint and with no NUMA set that fits, the default-hint error is the kubelet's."""
    memory = state(memory_gib=1)
    p = pod("huge", containers=[container("c", cpu="1", memory="64Gi")])
    with pytest.raises(AllocationError) as err:
        StaticMemoryPolicy().allocate(memory, p, p.containers[0], None, False)
    assert (
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
        == err.value.message
    )


def test_hint_extended_when_the_mask_lacks_free_memory() -> None:
    """A one-node hint that cannot hold the request is extended to the group that contains it."""
    memory = state()
    p = pod("p", containers=[container("c", cpu="1", memory="10Gi")])
    blocks = StaticMemoryPolicy().allocate(memory, p, p.containers[0], 1, False)
    assert (Block((0, 1), "memory", 10 * GIB),) == blocks


def test_init_container_memory_is_reused_by_the_app() -> None:
    """An init container's block shrinks by what the app reuses: the pod holds max(init, app), not the sum."""
    memory = state()
    policy = StaticMemoryPolicy()
    p = pod(
        "p",
        init_containers=[container("init", cpu="1", memory="2Gi")],
        containers=[container("app", cpu="1", memory="3Gi")],
    )
    policy.allocate(memory, p, p.init_containers[0], 1, True)
    policy.allocate(memory, p, p.containers[0], 1, True)
    assert 3 * GIB == memory.machine[0].tables["memory"].reserved
    assert (Block((0,), "memory", 0),) == memory.get(p.uid, "init")
    validate_memory_state(memory, state().machine)


def test_release_restores_the_machine() -> None:
    """Removing the pod gives every byte back and resets the groups."""
    memory = state()
    policy = StaticMemoryPolicy()
    p = pod("big", containers=[container("c", cpu="1", memory="12Gi")])
    policy.allocate(memory, p, p.containers[0], 3, False)
    policy.remove_pod(memory, p.uid)
    assert state().machine == memory.machine


def test_pod_requested_memory_counts_sidecars() -> None:
    """Pod scope requests: max(apps + sidecars, each init + sidecars declared before it)."""
    p = pod(
        "p",
        init_containers=[sidecar("mesh", cpu="1", memory="1Gi"), container("migrate", cpu="1", memory="4Gi")],
        containers=[container("app", cpu="1", memory="2Gi")],
    )
    assert {"memory": 5 * GIB} == pod_requested_memory(p)


class TestPodLevel:
    def kep_pod(self, **kwargs: Any) -> Any:
        return pod(
            "kep",
            init_containers=[sidecar("mesh", cpu="1", memory="1Gi"), container("warm")],
            containers=[container("db", cpu="2", memory="4Gi"), container("log")],
            pod_resources=resources(cpu="4", memory="8Gi"),
            **kwargs,
        )

    def test_partition(self) -> None:
        """Exclusive containers get their sizes, shared init ones the budget less earlier sidecars, others the rest."""
        memory = state()
        p = self.kep_pod()
        assert (0,) == StaticMemoryPolicy().allocate_pod(memory, p, 1, True)
        blocks = dict(memory.blocks[p.uid])
        assert {
            "mesh": (Block((0,), "memory", GIB),),
            "warm": (Block((0,), "memory", 7 * GIB),),
            "db": (Block((0,), "memory", 4 * GIB),),
            "log": (Block((0,), "memory", 3 * GIB),),
        } == blocks
        assert (Block((0,), "memory", 8 * GIB),) == memory.pod_blocks[p.uid]
        assert 8 * GIB == memory.machine[0].tables["memory"].reserved

    def test_memory_budget_without_room_for_shared_containers(self) -> None:
        """Exclusive containers using the whole memory budget leave none for the shared ones: the kubelet's message."""
        p = pod(
            "full",
            containers=[container("db", cpu="2", memory="8Gi"), container("log")],
            pod_resources=resources(cpu="4", memory="8Gi"),
        )
        with pytest.raises(EmptyPodSharedPoolError) as err:
            StaticMemoryPolicy().allocate_pod(state(), p, 1, True)
        assert (
            "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for "
            "shared containers" == err.value.message
        )

    def test_restored_pod_is_not_reserved_twice(self) -> None:
        """A pod whose pod-level blocks are restored keeps them and does not reserve again (kubelet #140906)."""
        memory = state()
        p = self.kep_pod()
        policy = StaticMemoryPolicy()
        policy.allocate_pod(memory, p, 1, True)
        reserved = memory.machine[0].tables["memory"].reserved
        policy.allocate_pod(memory, p, 1, True)
        assert reserved == memory.machine[0].tables["memory"].reserved

    @pytest.mark.parametrize("kept", [(), ("mesh",), ("db",), ("warm", "log"), ("mesh", "log"), ("db", "log")])
    def test_restore_with_a_gap_gives_every_container_its_fresh_blocks(self, kept: tuple[str, ...]) -> None:
        """Issue 17's overlap check for memory: whatever subset of container blocks survived a restart (gaps
        included), completing the pod gives every container exactly its fresh blocks and reserves nothing again,
        because sizes come from the spec and the pod total, never from what is left (memory is partitioned
        logically), so the CPU stale rule has no memory counterpart."""
        policy = StaticMemoryPolicy()
        fresh = state()
        p = self.kep_pod()
        policy.allocate_pod(fresh, p, 1, True)
        restored = fresh.copy()
        restored.blocks[p.uid] = {name: blocks for name, blocks in fresh.blocks[p.uid].items() if name in kept}
        policy.allocate_pod(restored, p, 1, True)
        assert (fresh.blocks[p.uid], fresh.machine) == (restored.blocks[p.uid], restored.machine)

    def test_release_returns_the_whole_budget(self) -> None:
        """Releasing a pod-level pod frees its pod-level reservation exactly."""
        memory = state()
        policy = StaticMemoryPolicy()
        policy.allocate_pod(memory, self.kep_pod(), 1, True)
        policy.remove_pod(memory, self.kep_pod().uid)
        assert state().machine == memory.machine
