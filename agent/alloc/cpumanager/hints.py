"""CPU topology hints (the kubelet's ``generateCPUTopologyHints``), for any machine size.

A hint is a set of NUMA nodes whose available (plus reusable) CPUs can hold the
request; it is preferred when its size is the smallest size whose *total* CPUs
could hold the request on an empty machine (or, with ``align-by-socket``, when
it spans exactly as many sockets as that minimum needs). Consequence kept from
the kubelet: when one node could hold the request empty but is too full now,
only wider, non-preferred hints exist and ``restricted``/``single-numa-node``
reject.

Up to :data:`~agent.alloc.topologymanager.lattice.SMALL_LATTICE_NODES` NUMA nodes the hints are
listed as the kubelet lists them (every subset by size, then lexicographically).
Beyond, the 2**N subsets are evaluated as NumPy arrays and handed to the merge
as a :class:`~agent.alloc.topologymanager.hint_list.HintList` bitmap, so a 16-node machine costs
milliseconds instead of seconds of Python loops.
"""

from __future__ import annotations

from itertools import combinations

from agent.alloc.topologymanager import (
    SMALL_LATTICE_NODES,
    HintList,
    NUMAInfo,
    TopologyHint,
    bitmap_from_flags,
    popcount_table,
)
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["cpu_hints", "lattice_cpu_hints", "listed_cpu_hints", "socket_aligned"]


def socket_aligned(topology: Topology, nodes: tuple[int, ...], min_affinity: int) -> bool:
    """``isHintSocketAligned``: the hint's NUMA nodes span as few sockets as the minimum size needs."""
    counters = topology.counters
    per_socket = counters.num_numa_nodes // counters.num_sockets if counters.num_sockets else 0
    if per_socket == 0:
        return False
    min_sockets = (min_affinity + per_socket - 1) // per_socket
    return len(topology.sockets_in_numa(*nodes)) == min_sockets


def listed_cpu_hints(
    topology: Topology, available: CPUSet, reusable: CPUSet, request: int, align_by_socket: bool
) -> list[TopologyHint]:
    """The hints as the kubelet lists them: every NUMA subset by size, then lexicographically."""
    nodes = topology.numa_ids
    totals = [len(topology.cpus_in_numa(n)) for n in nodes]
    free = [len(available & topology.cpus_in_numa(n)) for n in nodes]
    reusable_nodes = 0
    for numa in topology.numa_of(reusable):
        reusable_nodes |= 1 << numa
    min_affinity = len(nodes)
    found: list[tuple[int, tuple[int, ...]]] = []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(range(len(nodes)), size):
            if size < min_affinity and sum(totals[i] for i in combo) >= request:
                min_affinity = size
            ids = tuple(nodes[i] for i in combo)
            mask = 0
            for node in ids:
                mask |= 1 << node
            if reusable_nodes & ~mask:
                continue
            if len(reusable) + sum(free[i] for i in combo) < request:
                continue
            found.append((mask, ids))
    return [
        TopologyHint(
            mask,
            mask.bit_count() == min_affinity or (align_by_socket and socket_aligned(topology, ids, min_affinity)),
        )
        for mask, ids in found
    ]


def lattice_cpu_hints(
    topology: Topology, numa_info: NUMAInfo, available: CPUSet, reusable: CPUSet, request: int, align_by_socket: bool
) -> HintList:
    """The same hints judged for all 2**N subsets at once on NumPy arrays, as a :class:`HintList` bitmap."""
    import numpy as np

    nodes = numa_info.nodes
    totals = np.zeros(1, dtype=np.int64)
    free = np.zeros(1, dtype=np.int64)
    for node in nodes:
        cpus = topology.cpus_in_numa(node)
        totals = np.concatenate((totals, totals + len(cpus)))
        free = np.concatenate((free, free + len(available & cpus)))
    positions = np.arange(1 << len(nodes), dtype=np.int64)
    counts = popcount_table(len(nodes))
    fitting = (totals >= request) & (positions > 0)
    min_affinity = int(counts[fitting].min()) if fitting.any() else len(topology.numa_ids)
    required = 0
    for numa in topology.numa_of(reusable):
        required |= 1 << nodes.index(numa)
    feasible = ((positions & required) == required) & (free + len(reusable) >= request) & (positions > 0)
    preferred = feasible & (counts == min_affinity)
    if align_by_socket:
        for position in np.flatnonzero(feasible & ~preferred):
            ids = tuple(nodes[i] for i in range(len(nodes)) if int(position) >> i & 1)
            if socket_aligned(topology, ids, min_affinity):
                preferred[position] = True
    return HintList.from_bitmaps(numa_info, masks=bitmap_from_flags(feasible), preferred=bitmap_from_flags(preferred))


def cpu_hints(
    topology: Topology,
    available: CPUSet,
    reusable: CPUSet,
    request: int,
    *,
    align_by_socket: bool = False,
    numa_info: NUMAInfo | None = None,
) -> list[TopologyHint] | HintList:
    """Every NUMA subset that can hold ``request`` CPUs from ``available`` (plus ``reusable``), with preference.

    Args:
        topology: the machine.
        available: the shared pool minus reserved CPUs.
        reusable: CPUs of the pod that may be taken again (init containers'; a hint must contain them all).
        request: how many CPUs.
        align_by_socket: the ``align-by-socket`` option.
        numa_info: the topology manager's nodes; with more than 8 nodes (all of them with CPUs) the
            result is a :class:`HintList` over them.
    """
    nodes = topology.numa_ids
    if numa_info is not None and len(nodes) > SMALL_LATTICE_NODES and numa_info.nodes == nodes:
        return lattice_cpu_hints(topology, numa_info, available, reusable, request, align_by_socket)
    return listed_cpu_hints(topology, available, reusable, request, align_by_socket)
