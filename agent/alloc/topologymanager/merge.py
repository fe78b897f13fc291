"""The topology hint merge without the cartesian product: the kubelet's answer, in milliseconds.

The kubelet folds every permutation of the hint lists (one hint per resource)
with ``HintMerger.compare``; with one hint per feasible NUMA subset that is
``(2**N - 1) ** lists`` permutations, hopeless beyond 8 nodes. The fold does not
depend on the order of the permutations, because ``compare`` ranks every
permuted result on one total order (equal rank means equal hint):

1. A preferred result with a non-empty mask beats every non-preferred one, and
   among those the fitter mask wins (``NUMAInfo.narrowest`` or ``closest``).
   A permutation is preferred iff all its hints are preferred and all its
   non-nil masks are one mask ``M``: every list offers ``M`` preferred or a
   preferred nil hint (or every list offers a preferred nil: the default mask).
   So the preferred results are an intersection of per-list bitmaps.
2. Otherwise every result is non-preferred and, with ``T`` the kubelet's
   ``bestNonPreferredAffinityCount``, the winner is the fittest mask of ``T``
   nodes if one is achievable, else the fittest of the largest size below
   ``T``, else the fittest overall. It only matters *which* masks the
   permutations can produce: the set of ANDs of the product.

That set is computed exactly, without enumerating the product, by the zeta and
Möbius transforms of :mod:`agent.alloc.topologymanager.lattice` (Python integers up to
:data:`~agent.alloc.topologymanager.lattice.SMALL_LATTICE_NODES` NUMA nodes, NumPy beyond).
Each resource's hints arrive as a :class:`~agent.alloc.topologymanager.hint_list.HintList`, the
compact form over lattice positions (bit i of a position = the i-th node id of
``NUMAInfo.nodes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent.alloc.topologymanager.hint import HintError, TopologyHint
from agent.alloc.topologymanager.hint_list import HintList
from agent.alloc.topologymanager.lattice import (
    MAX_LATTICE_NODES,
    SMALL_LATTICE_NODES,
    and_products_flags,
    and_products_ints,
    distance_list,
    distance_sums,
    flags_from_bitmap,
    is_identity,
    levels,
    mask_at,
    popcount_table,
    position_of,
)
from agent.alloc.topologymanager.numa_info import NUMAInfo

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["LatticeMerger"]


class LatticeMerger:
    """The kubelet's ``HintMerger.Merge`` result for any hint lists, without the product.

    Built once per policy: it holds the per-machine tables (mask sizes and, for
    ``closest``, distance sums of all ``2**N`` masks).
    """

    __slots__ = ("_distance_list", "_distance_sums", "_identity", "_info", "_levels", "_popcounts")

    def __init__(self, numa_info: NUMAInfo, *, closest: bool = False) -> None:
        """Precompute the tables for one machine.

        Args:
            numa_info: the machine's NUMA nodes (and distances for ``closest``).
            closest: rank masks with ``NUMAInfo.closest`` instead of ``narrowest``.

        Raises:
            HintError: more than 20 nodes, or ``closest`` without distances.
        """
        size_bits = len(numa_info.nodes)
        if size_bits > MAX_LATTICE_NODES:
            raise HintError(f"hint merge over {size_bits} NUMA nodes: at most {MAX_LATTICE_NODES} are supported")
        if closest and not numa_info.has_distances:
            raise HintError(f"closest-NUMA ranking needs the distances of NUMA nodes {list(numa_info.nodes)}")
        self._info = numa_info
        self._identity = is_identity(numa_info.nodes)
        small = size_bits <= SMALL_LATTICE_NODES
        self._levels = levels(size_bits) if small else None
        self._distance_list = distance_list(numa_info) if closest and small else None
        self._popcounts = None if small else popcount_table(size_bits)
        self._distance_sums = distance_sums(numa_info) if closest and not small else None

    def merge(self, lists: Sequence[HintList]) -> TopologyHint:
        """The best hint of the cartesian product of ``lists`` (``{default, false}`` if none).

        Raises:
            HintError: a list was built over other NUMA nodes.
        """
        info = self._info
        for hint_list in lists:
            if hint_list.nodes != info.nodes:
                raise HintError(
                    f"hint list over NUMA nodes {list(hint_list.nodes)} given to a merge over {list(info.nodes)}"
                )
        if self._levels is not None:
            return self._merge_small(lists, self._levels)
        size = 1 << len(info.nodes)
        default = info.default_mask
        # A preferred result with a non-empty mask beats everything else.
        preferred = self._preferred_positions(lists)
        if preferred:
            return TopologyHint(self._mask(self._fittest(flags_from_bitmap(preferred, len(info.nodes)))), True)
        # Otherwise: every mask some permutation ANDs to (a nil hint stands for all nodes) ...
        nil_position = 1 << (size - 1)
        sets = [
            flags_from_bitmap(hint_list.masks | (nil_position if hint_list.nil else 0), len(info.nodes))
            for hint_list in lists
        ]
        achievable = and_products_flags(sets, len(info.nodes))
        achievable[0] = False
        if not achievable.any():
            return TopologyHint(default, False)
        # ... ranked as compare() ranks non-preferred hints: size == target, else the
        # largest size below it, else any size; then the fitter mask.
        target = max((hint_list.min_count for hint_list in lists), default=0)
        counts = self._popcounts
        assert counts is not None
        chosen = achievable & (counts == target)
        if not chosen.any():
            below = achievable & (counts < target)
            chosen = achievable & (counts == counts[below].max()) if below.any() else achievable
        return TopologyHint(self._mask(self._fittest(chosen)), False)

    def _merge_small(self, lists: Sequence[HintList], by_size: tuple[int, ...]) -> TopologyHint:
        """:meth:`merge` on a lattice of at most 256 masks, with Python integers (same rules)."""
        info = self._info
        preferred = self._preferred_positions(lists)
        if preferred:
            return TopologyHint(self._mask(self._fittest_small(preferred, by_size)), True)
        nil_position = 1 << ((1 << len(info.nodes)) - 1)
        achievable = (
            and_products_ints(
                [hint_list.masks | (nil_position if hint_list.nil else 0) for hint_list in lists], len(info.nodes)
            )
            & ~1
        )
        if not achievable:
            return TopologyHint(info.default_mask, False)
        target = max((hint_list.min_count for hint_list in lists), default=0)
        chosen = achievable & by_size[target] if target < len(by_size) else 0
        if not chosen:
            below = [k for k in range(min(target, len(by_size))) if achievable & by_size[k]]
            chosen = achievable & by_size[below[-1]] if below else achievable
        return TopologyHint(self._mask(self._fittest_small(chosen, by_size)), False)

    def _fittest_small(self, candidates: int, by_size: tuple[int, ...]) -> int:
        """:meth:`_fittest` on a bitmap: fewest nodes, then the lowest position or the lowest distance sum."""
        hit = next(candidates & level for level in by_size if candidates & level)
        if self._distance_list is None:
            return (hit & -hit).bit_length() - 1
        distances = self._distance_list
        return min((p for p in range(hit.bit_length()) if hit >> p & 1), key=lambda p: (distances[p], p))

    def _preferred_positions(self, lists: Sequence[HintList]) -> int:
        """Bitmap of the non-empty merged masks of the preferred permutations."""
        strict = [hint_list for hint_list in lists if not hint_list.nil_preferred]
        if strict:
            positions = strict[0].preferred
            foreign = strict[0].foreign_preferred
            for hint_list in strict[1:]:
                positions &= hint_list.preferred
                foreign &= hint_list.foreign_preferred
        else:
            positions = 1 << ((1 << len(self._info.nodes)) - 1)
            foreign = frozenset()
            for hint_list in lists:
                positions |= hint_list.preferred
                foreign |= hint_list.foreign_preferred
        for mask in foreign:
            positions |= 1 << position_of(mask, self._info.nodes)
        return positions & ~1

    def _fittest(self, candidates: NDArray[np.bool_]) -> int:
        """The position the kubelet's mask comparison ranks first among the candidates."""
        import numpy as np

        counts = self._popcounts
        assert counts is not None
        level = counts[candidates].min()
        positions = np.flatnonzero(candidates & (counts == level))
        if self._distance_sums is None:
            return int(positions[0])
        return int(positions[np.argmin(self._distance_sums[positions])])

    def _mask(self, position: int) -> int:
        return position if self._identity else mask_at(position, self._info.nodes)
