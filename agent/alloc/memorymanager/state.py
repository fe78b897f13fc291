"""The memory manager's state, in the kubelet's shape, and its consistency check.

Per NUMA node and memory resource (``memory``, ``hugepages-<size>``) a
:class:`MemoryTable` keeps ``total``, ``system_reserved``, ``allocatable =
total − system_reserved`` (for ``memory`` also minus the node's hugepages),
``reserved`` (held by pods) and ``free`` (``free + reserved == allocatable``).
Per node, ``assignments`` counts the memory blocks placed on it and ``cells``
is the NUMA group it belongs to: a node serving a single-node block cannot
join a multi-node group, and a node in a group is only reused with exactly
that group (KEP-1769 "single vs cross NUMA node allocation").

Like :class:`~agent.alloc.cpumanager.state.CPUState` this is a mutable working copy;
the planner copies it per admission and keeps it only on success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.topology import Topology

__all__ = [
    "Block",
    "MemoryTable",
    "NUMAMemory",
    "MemoryState",
    "MemoryStateError",
    "hugepage_resource_name",
    "default_machine_state",
    "validate_memory_state",
]


class MemoryStateError(ValueError):
    """A memory state that does not add up; the message names the node and resource."""


@dataclass(frozen=True, slots=True)
class Block:
    """Memory of one resource reserved for a container (or a pod) on a set of NUMA nodes."""

    numa: tuple[int, ...]
    resource: str
    size: int


@dataclass(slots=True)
class MemoryTable:
    total: int
    system_reserved: int
    allocatable: int
    reserved: int
    free: int

    def copy(self) -> MemoryTable:
        return MemoryTable(self.total, self.system_reserved, self.allocatable, self.reserved, self.free)


@dataclass(slots=True)
class NUMAMemory:
    assignments: int
    cells: tuple[int, ...]
    tables: dict[str, MemoryTable]

    def copy(self) -> NUMAMemory:
        return NUMAMemory(self.assignments, self.cells, {k: v.copy() for k, v in self.tables.items()})


@dataclass(slots=True)
class MemoryState:
    """Machine state, container blocks and pod-level blocks (mutable working copy)."""

    machine: dict[int, NUMAMemory] = field(default_factory=dict)
    blocks: dict[str, dict[str, tuple[Block, ...]]] = field(default_factory=dict)
    pod_blocks: dict[str, tuple[Block, ...]] = field(default_factory=dict)

    def copy(self) -> MemoryState:
        return MemoryState(
            machine={n: m.copy() for n, m in self.machine.items()},
            blocks={uid: dict(containers) for uid, containers in self.blocks.items()},
            pod_blocks=dict(self.pod_blocks),
        )

    def get(self, pod_uid: str, container: str) -> tuple[Block, ...] | None:
        return self.blocks.get(pod_uid, {}).get(container)

    def set(self, pod_uid: str, container: str, blocks: Iterable[Block]) -> None:
        self.blocks.setdefault(pod_uid, {})[container] = tuple(blocks)

    def delete(self, pod_uid: str, container: str) -> None:
        containers = self.blocks.get(pod_uid)
        if containers is None:
            return
        containers.pop(container, None)
        if not containers:
            del self.blocks[pod_uid]


def hugepage_resource_name(page_kib: int) -> str:
    """``hugepages-2Mi`` for 2048 KiB pages, ``hugepages-1Gi`` for 1048576 KiB (the canonical BinarySI form)."""
    size = page_kib * 1024
    for suffix, unit in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size % unit == 0:
            return f"hugepages-{size // unit}{suffix}"
    return f"hugepages-{size}"


def default_machine_state(
    topology: Topology, system_reserved: Mapping[int, Mapping[str, int]]
) -> dict[int, NUMAMemory]:
    """``getDefaultMachineState``: every NUMA node's tables before any pod.

    Args:
        topology: the machine (NUMA nodes with MemTotal and hugepages).
        system_reserved: ``reservedMemory`` as {node: {resource: bytes}}.
    """
    machine: dict[int, NUMAMemory] = {}
    for node in topology.numa_nodes:
        reserved = system_reserved.get(node.id, {})
        tables: dict[str, MemoryTable] = {}
        hugepages_total = 0
        for page_kib in sorted(node.hugepages):
            name = hugepage_resource_name(page_kib)
            total = node.hugepages_bytes(page_kib)
            held = reserved.get(name, 0)
            tables[name] = MemoryTable(total, held, total - held, 0, total - held)
            hugepages_total += total
        held = reserved.get("memory", 0)
        allocatable = node.memory_bytes - held - hugepages_total
        tables["memory"] = MemoryTable(node.memory_bytes, held, allocatable, 0, allocatable)
        machine[node.id] = NUMAMemory(0, (node.id,), tables)
    return machine


def validate_memory_state(state: MemoryState, expected_machine: dict[int, NUMAMemory]) -> None:
    """Check that the machine state equals the default state with every block applied.

    Tables must keep ``free + reserved == allocatable``, per node the number of
    blocks must equal ``assignments``, a node's group must be the mask of the
    blocks on it, and per group and resource the reserved bytes must equal the
    blocks' sizes.

    Raises:
        MemoryStateError: naming the node, resource and both numbers.
    """
    if set(state.machine) != set(expected_machine):
        raise MemoryStateError(
            f"NUMA nodes in the memory state {sorted(state.machine)} differ from the machine's "
            f"{sorted(expected_machine)}"
        )
    accounted: list[Block] = []
    for uid, containers in state.blocks.items():
        if uid in state.pod_blocks:
            continue
        for blocks in containers.values():
            accounted.extend(blocks)
    for blocks in state.pod_blocks.values():
        accounted.extend(blocks)
    counts = dict.fromkeys(state.machine, 0)
    groups: dict[int, tuple[int, ...]] = {}
    reserved_by_group: dict[tuple[tuple[int, ...], str], int] = {}
    for block in accounted:
        for node in block.numa:
            if node not in counts:
                raise MemoryStateError(f"a {block.resource} block is placed on unknown NUMA node {node}")
            counts[node] += 1
            if groups.setdefault(node, block.numa) != block.numa:
                raise MemoryStateError(
                    f"NUMA node {node} holds blocks of two NUMA groups {list(groups[node])} and {list(block.numa)}"
                )
        key = (block.numa, block.resource)
        reserved_by_group[key] = reserved_by_group.get(key, 0) + block.size
    for node, memory in sorted(state.machine.items()):
        expected = expected_machine[node]
        if memory.assignments != counts[node]:
            raise MemoryStateError(
                f"NUMA node {node}: {memory.assignments} assignments recorded but {counts[node]} blocks placed on it"
            )
        if counts[node] and memory.cells != groups[node]:
            raise MemoryStateError(
                f"NUMA node {node}: group {list(memory.cells)} differs from its blocks' {list(groups[node])}"
            )
        for name, table in memory.tables.items():
            base = expected.tables.get(name)
            if base is None or (table.total, table.system_reserved, table.allocatable) != (
                base.total,
                base.system_reserved,
                base.allocatable,
            ):
                raise MemoryStateError(f"NUMA node {node}: {name} capacity differs from the machine's")
            if table.free + table.reserved != table.allocatable or table.free < 0 or table.reserved < 0:
                raise MemoryStateError(
                    f"NUMA node {node}: {name} free {table.free} + reserved {table.reserved} != allocatable "
                    f"{table.allocatable}"
                )
    for (group, name), size in sorted(reserved_by_group.items()):
        held = sum(state.machine[n].tables[name].reserved for n in group if name in state.machine[n].tables)
        if held != size:
            raise MemoryStateError(
                f"NUMA nodes {list(group)}: {name} reserved {held} bytes but the blocks on them hold {size}"
            )
