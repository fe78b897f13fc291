"""The machine's NUMA nodes and distances as the topology manager ranks masks with them.

:class:`NUMAInfo` is the kubelet's ``NUMAInfo``
(``pkg/kubelet/cm/topologymanager/numa_info.go``): the node ids of the machine
and their SLIT distances, with the two ways the merge ranks two masks,
:meth:`NUMAInfo.narrowest` and :meth:`NUMAInfo.closest`. Both the literal merge
(the test oracle ``tests/oracles/merge_reference.py``) and the fast one
(:mod:`agent.alloc.topologymanager.merge`) rank with these rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.alloc.topologymanager.hint import HintError, ids_of, is_narrower_than, mask_of

if TYPE_CHECKING:
    from agent.topology import Topology

__all__ = ["NUMAInfo"]

#: Distances are kept below 2**32 so that a mask's distance sum (at most 64*64
#: terms) stays an exact float64, as the kubelet's ``float64`` average needs.
_DISTANCE_LIMIT = 1 << 32


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMAInfo:
    """The machine's NUMA node ids and SLIT distances, as the topology manager uses them.

    ``nodes`` are the ids the default (all-nodes) mask is made of, ascending.
    ``distances[i][j]`` is the distance from ``nodes[i]`` to ``nodes[j]`` (a
    square matrix over the *positions* of ``nodes``), or ``()`` when the
    distances are unknown; only ``prefer-closest-numa-nodes`` needs them.
    """

    nodes: tuple[int, ...]
    distances: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        nodes = self.nodes
        mask_of(nodes)
        if list(nodes) != sorted(set(nodes)):
            raise HintError(f"NUMA node ids must be unique and ascending, got {list(nodes)}")
        if not self.distances:
            return
        if len(self.distances) != len(nodes):
            raise HintError(f"NUMA distances have {len(self.distances)} rows for {len(nodes)} nodes {list(nodes)}")
        for node, row in zip(nodes, self.distances, strict=True):
            if len(row) != len(nodes):
                raise HintError(f"NUMA distances of node {node} have {len(row)} entries for {len(nodes)} nodes")
            for other, value in zip(nodes, row, strict=True):
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _DISTANCE_LIMIT:
                    raise HintError(
                        f"NUMA distance from node {node} to node {other} is {value!r}: "
                        f"must be an integer in 0..{_DISTANCE_LIMIT - 1}"
                    )

    @classmethod
    def from_topology(cls, topology: Topology) -> NUMAInfo:
        """Every NUMA node of the machine (``memory_numa_ids``) with its SLIT distances."""
        nodes = tuple(topology.memory_numa_ids)
        distances = tuple(tuple(topology.distance(a, b) for b in nodes) for a in nodes)
        return cls(nodes=nodes, distances=distances)

    @classmethod
    def from_distance_map(cls, nodes: Iterable[int], distances: Mapping[int, Sequence[int]] | None = None) -> NUMAInfo:
        """Build from the kubelet/cadvisor shape: ``distances[a][b]``, row per node id, indexed by node id.

        Raises:
            HintError: a node has no row, or its row does not reach every node id.
        """
        ids = tuple(nodes)
        if not distances:
            return cls(nodes=ids)
        matrix: list[tuple[int, ...]] = []
        for node in ids:
            row = distances.get(node)
            if row is None:
                raise HintError(f"NUMA distances lack a row for node {node}")
            if ids and len(row) <= max(ids):
                raise HintError(f"NUMA distances of node {node} have {len(row)} entries, too few for node {max(ids)}")
            matrix.append(tuple(row[other] for other in ids))
        return cls(nodes=ids, distances=tuple(matrix))

    @property
    def default_mask(self) -> int:
        """The mask of every node (the kubelet's ``DefaultAffinityMask``)."""
        return mask_of(self.nodes)

    @property
    def has_distances(self) -> bool:
        """True when distances are known (``prefer-closest-numa-nodes`` needs them)."""
        return bool(self.distances) or not self.nodes

    def distance(self, a: int, b: int) -> int:
        """SLIT distance from node ``a`` to node ``b``.

        Raises:
            HintError: the distances are unknown or a node is not one of ``nodes``.
        """
        if not self.distances:
            raise HintError(f"NUMA distances are unknown (nodes {list(self.nodes)})")
        for node in (a, b):
            if node not in self.nodes:
                raise HintError(f"NUMA node {node} is not one of the machine's nodes {list(self.nodes)}")
        return self.distances[self.nodes.index(a)][self.nodes.index(b)]

    def average_distance(self, mask: int) -> float:
        """Mean distance over every ordered pair of the mask's nodes, self pairs included.

        The kubelet's ``NUMADistances.CalculateAverageFor``: a float64 sum divided
        by the number of pairs, 0 for an empty mask.
        """
        ids = ids_of(mask)
        if not ids:
            return 0.0
        total = 0.0
        for a in ids:
            for b in ids:
                total += float(self.distance(a, b))
        return total / float(len(ids) * len(ids))

    def narrowest(self, first: int, second: int) -> int:
        """The kubelet's ``Narrowest``: ``first`` if it is narrower, else ``second``."""
        return first if is_narrower_than(first, second) else second

    def closest(self, first: int, second: int) -> int:
        """The kubelet's ``Closest`` (``prefer-closest-numa-nodes``).

        Fewer nodes first; with as many nodes, the lower average distance; with
        the same average, the smaller integer value.
        """
        if first.bit_count() != second.bit_count():
            return self.narrowest(first, second)
        first_distance = self.average_distance(first)
        second_distance = self.average_distance(second)
        if first_distance == second_distance:
            return min(first, second)
        return first if first_distance < second_distance else second
