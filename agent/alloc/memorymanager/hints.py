"""The memory manager's ``calculateHints`` and ``findBestHint`` as bitmaps, for machines beyond 8 NUMA nodes.

The kubelet lists every NUMA subset one by one; at 16 nodes that is 65535
subsets per hint request and a Static-memory admission took 160-260 ms, against
about 1 ms for the CPU hints, which already come as a bitmap
(:mod:`agent.alloc.cpumanager.hints`). Here every subset is judged at once on NumPy
arrays over the lattice positions of :mod:`agent.alloc.topologymanager.lattice`, by the same
rules as :meth:`agent.alloc.memorymanager.policy_static.StaticMemoryPolicy.calculate_hints`:

* a subset is a candidate when its *allocatable* memory could hold every
  requested resource; the smallest candidate size is the preferred size;
* a single node already serving a multi-node group is no hint on its own;
* a multi-node subset may not include a node already used on its own, nor a
  node of a different group;
* its *free* memory, plus the memory the pod's finished init containers left on
  exactly that subset, must hold every resource.

Up to :data:`~agent.alloc.topologymanager.lattice.SMALL_LATTICE_NODES` nodes the policy keeps
the kubelet's listing: it is as fast there and the vectors check it literally.
A property test holds both forms equal on random 10-node machines.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.alloc.memorymanager.state import NUMAMemory
from agent.alloc.topologymanager import (
    HintList,
    NUMAInfo,
    TopologyHint,
    bitmap_from_flags,
    flags_from_bitmap,
    mask_at,
    mask_of,
    popcount_table,
    position_of,
)

__all__ = ["Reusable", "best_listed_hint", "lattice_memory_hints"]

Requests = Mapping[str, int]
Reusable = Mapping[tuple[int, ...], Mapping[str, int]]
"""Memory of the pod's finished init containers, by the exact NUMA set it sits on."""


def _amounts(machine: Mapping[int, NUMAMemory], nodes: tuple[int, ...], resource: str, field: str) -> list[int]:
    return [getattr(machine[n].tables[resource], field) if resource in machine[n].tables else 0 for n in nodes]


def lattice_memory_hints(
    machine: Mapping[int, NUMAMemory], requests: Requests, reusable: Reusable, numa_info: NUMAInfo
) -> dict[str, HintList]:
    """``calculateHints`` over every subset of ``numa_info.nodes`` at once; empty when no subset fits.

    ``machine`` must describe exactly ``numa_info.nodes``.
    """
    import numpy as np

    nodes = numa_info.nodes
    if tuple(sorted(machine)) != nodes:
        raise ValueError(f"memory state nodes {sorted(machine)} are not the machine's NUMA nodes {list(nodes)}")
    size = 1 << len(nodes)
    positions = np.arange(size, dtype=np.int64)
    counts = popcount_table(len(nodes))

    def subset_sums(values: list[int]) -> np.ndarray:
        """Sum of ``values`` over the nodes of every position (doubling, one node at a time)."""
        sums = np.zeros(1, dtype=np.int64)
        for value in values:
            sums = np.concatenate((sums, sums + value))
        return sums

    fits = positions > 0
    enough = positions > 0
    for resource, wanted in requests.items():
        fits &= subset_sums(_amounts(machine, nodes, resource, "allocatable")) >= wanted
        free = subset_sums(_amounts(machine, nodes, resource, "free"))
        for numa, sizes in reusable.items():
            if sizes.get(resource) and set(numa) <= set(nodes):
                free[position_of(sum(1 << n for n in numa), nodes)] += sizes[resource]
        enough &= free >= wanted
    if not fits.any():
        return {}
    min_affinity = int(counts[fits].min())
    allowed = np.ones(size, dtype=bool)
    multi = counts > 1
    for index, node in enumerate(nodes):
        memory = machine[node]
        if len(memory.cells) > 1:
            allowed[1 << index] = False
        if memory.assignments == 0:
            continue
        includes = ((positions >> index) & 1).astype(bool)
        if len(memory.cells) == 1:
            allowed &= ~(includes & multi)
        else:
            group = position_of(sum(1 << c for c in memory.cells), nodes)
            allowed &= ~(includes & multi & (positions != group))
    offered = fits & allowed & enough
    if not offered.any():
        return {}
    preferred = offered & (counts == min_affinity)
    hints = HintList.from_bitmaps(numa_info, masks=bitmap_from_flags(offered), preferred=bitmap_from_flags(preferred))
    return dict.fromkeys(requests, hints)


def best_listed_hint(hints: HintList, within: int = 0) -> TopologyHint | None:
    """``findBestHint`` over the hints whose mask contains ``within``: preferred first, then the narrowest.

    Among masks of one size the lowest wins, as ``IsNarrowerThan`` orders them;
    lattice positions over sorted node ids keep that order. None when no hint
    contains ``within``.
    """
    import numpy as np

    nodes = hints.nodes
    if within & ~mask_of(nodes):
        return None
    size_bits = len(nodes)
    positions = np.arange(1 << size_bits, dtype=np.int64)
    required = position_of(within, nodes)
    inside = (positions & required) == required
    counts = popcount_table(size_bits)
    offered = flags_from_bitmap(hints.masks, size_bits) & inside
    preferred = flags_from_bitmap(hints.preferred, size_bits) & offered
    for pool, is_preferred in ((preferred, True), (offered, False)):
        if pool.any():
            narrowest = pool & (counts == counts[pool].min())
            return TopologyHint(mask_at(int(np.flatnonzero(narrowest)[0]), nodes), is_preferred)
    return None
