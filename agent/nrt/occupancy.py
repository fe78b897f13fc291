"""Per NUMA node, how much CPU and memory the node has, lets pods have, and still has free (pure).

This is the one module of :mod:`agent.nrt` that reads the planner's
:class:`~agent.alloc.state.NodeState`; everything else works on the
:class:`Occupancy` it returns, so the NodeResourceTopology code does not follow
the allocation core's internals.

Per NUMA node (every node of the machine, memory-only ones included):

* ``cpu``, in whole CPUs: capacity = the node's online CPUs; allocatable =
  capacity − the reserved CPUs on it (``reservedSystemCPUs`` /
  ``kubeReserved`` + ``systemReserved``, as the kubelet's ``allocatable`` for
  PodResources is all CPUs − reserved); available = allocatable − the CPUs held
  by exclusive container slices and pod bubbles on it. CPUs a shared container
  merely runs on are available: the NodeResourceTopology counts what a new
  Guaranteed pod could still get exclusively.
* ``memory`` and ``hugepages-<size>``, in bytes: with ``memoryManagerPolicy:
  Static`` the memory manager's own tables (capacity = total, allocatable =
  total − ``reservedMemory`` (memory also less the node's hugepages),
  available = free). Without it neither the kubelet nor podpin places memory on
  NUMA nodes, so nothing is subtracted: available = allocatable, computed the
  same way from ``reservedMemory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent.alloc import NodeState, PlannerConfig
from agent.alloc.memorymanager import default_machine_state
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["Amounts", "Occupancy", "occupancy_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Amounts:
    """One resource on one NUMA node: what exists, what pods may have, what is still free."""

    capacity: int
    allocatable: int
    available: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Occupancy:
    """NUMA node id -> resource name -> :class:`Amounts` (CPUs in whole CPUs, memory in bytes)."""

    zones: Mapping[int, Mapping[str, Amounts]]


def occupancy_of(topology: Topology, config: PlannerConfig, state: NodeState | None) -> Occupancy:
    """Every NUMA node's CPU and memory amounts after the allocations in ``state`` (None: no pod admitted).

    Args:
        topology: the machine.
        config: the planner's settings; ``reservedMemory`` decides the memory amounts.
        state: the planner's snapshot.
    """
    reserved = state.reserved if state is not None else CPUSet()
    held = state.cpu.assigned() if state is not None else CPUSet()
    machine = state.memory.machine if state is not None and state.memory is not None else None
    if machine is None:
        machine = default_machine_state(topology, {e.numa_node: dict(e.limits) for e in config.reserved_memory})
        track_memory = False
    else:
        track_memory = True
    zones: dict[int, Mapping[str, Amounts]] = {}
    for node in topology.memory_numa_ids:
        cpus = topology.cpus_in_numa(node)
        allocatable = len(cpus - reserved)
        resources = {
            "cpu": Amounts(
                capacity=len(cpus), allocatable=allocatable, available=allocatable - len(cpus & held - reserved)
            )
        }
        memory = machine.get(node)
        for name, table in sorted(memory.tables.items()) if memory is not None else ():
            free = table.free if track_memory else table.allocatable
            resources[name] = Amounts(capacity=table.total, allocatable=table.allocatable, available=free)
        zones[node] = MappingProxyType(resources)
    return Occupancy(zones=MappingProxyType(zones))
