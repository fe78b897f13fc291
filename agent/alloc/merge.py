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

That set is computed exactly over the lattice of the ``2**N`` node subsets: the
superset-sum (zeta) transform of each list's indicator counts, for every mask
``y``, the hints ``⊇ y``; the pointwise product counts the permutations whose
AND is ``⊇ y``; the Möbius transform turns that into the permutations whose AND
is exactly ``y``. NumPy does this in O(lists * N * 2**N), about a millisecond
for 16 nodes; counts are collapsed to 0/1 before a product could overflow int64.

Masks live here as *positions* over ``NUMAInfo.nodes`` (bit i of a position =
the i-th node id); on machines whose ids are 0..N-1, as nearly all are, a
position is the mask itself. :class:`HintList` is the compact form of one
resource's hints (bitmaps of the masks offered and the masks preferred) that a
provider can build straight from bitmaps; plain hint sequences are converted.

Machines with at most :data:`SMALL_LATTICE_NODES` NUMA nodes (256 masks; nearly
every machine) run the same transforms on Python integers, which are exact and
quick at that size; NumPy (about 11 MiB of an agent's memory) is imported only
for larger lattices. The property tests hold both paths to the literal merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, TypeAlias

from agent.alloc.hints import HintError, NUMAInfo, TopologyHint, ids_of, mask_of

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "MAX_LATTICE_NODES",
    "SMALL_LATTICE_NODES",
    "CompactProviderHints",
    "HintList",
    "LatticeMerger",
    "and_products",
    "bitmap_from_flags",
    "lists_from_providers",
    "popcount_table",
]

#: The lattice holds 2**N entries per list; 20 nodes is 8 MiB per int64 array.
MAX_LATTICE_NODES = 20

#: Products of permutation counts stay below this, so int64 never overflows.
_INT64_SAFE = 1 << 62

#: Up to this many NUMA nodes the lattice is computed with Python integers, without NumPy.
SMALL_LATTICE_NODES = 8


# -- positions and bitmaps ------------------------------------------------------------
def _compress(mask: int, nodes: tuple[int, ...]) -> int:
    """The position of ``mask`` over ``nodes`` (bits of other nodes are dropped)."""
    position = 0
    for index, node in enumerate(nodes):
        if mask >> node & 1:
            position |= 1 << index
    return position


def _expand(position: int, nodes: tuple[int, ...]) -> int:
    """The NUMA mask of a position over ``nodes``."""
    return mask_of(nodes[index] for index in ids_of(position))


def _is_identity(nodes: tuple[int, ...]) -> bool:
    """True when node ids are 0..N-1, so positions are masks."""
    return nodes == tuple(range(len(nodes)))


def _bitmap_of(positions: Iterable[int], size: int) -> int:
    """A bitmap with bit p set for every position p (``size`` = number of positions)."""
    ordered = list(positions)
    if len(ordered) <= 64 or size <= 1 << SMALL_LATTICE_NODES:
        bitmap = 0
        for position in ordered:
            bitmap |= 1 << position
        return bitmap
    import numpy as np

    flags = np.zeros(size, dtype=bool)
    flags[ordered] = True
    return _to_bitmap(flags)


def _to_array(bitmap: int, size: int) -> NDArray[np.bool_]:
    """The bitmap as a bool array of ``size`` entries."""
    import numpy as np

    raw = np.frombuffer(bitmap.to_bytes(max(1, (size + 7) // 8), "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:size].astype(bool)


def _to_bitmap(flags: NDArray[np.bool_]) -> int:
    """A bool array as a bitmap (bit p set where ``flags[p]``)."""
    import numpy as np

    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


@cache
def _popcounts(size_bits: int) -> NDArray[np.uint8]:
    """Number of nodes of every position of a ``size_bits``-node lattice (read-only)."""
    import numpy as np

    counts = np.zeros(1 << size_bits, dtype=np.uint8)
    for bit in range(size_bits):
        counts[1 << bit : 2 << bit] = counts[: 1 << bit] + 1
    counts.flags.writeable = False
    return counts


def popcount_table(size_bits: int) -> NDArray[np.uint8]:
    """Number of nodes of every position of a ``size_bits``-node lattice (NumPy, read-only); for providers."""
    return _popcounts(size_bits)


def bitmap_from_flags(flags: NDArray[np.bool_]) -> int:
    """A bool array over the lattice positions as a bitmap, for :meth:`HintList.from_bitmaps`."""
    return _to_bitmap(flags)


@cache
def _singletons(size_bits: int) -> int:
    """Bitmap of the one-node positions."""
    return sum(1 << (1 << bit) for bit in range(size_bits))


def _distance_sums(numa_info: NUMAInfo) -> NDArray[np.int64]:
    """Sum of the distances over every ordered node pair of every position, self pairs included.

    For masks with as many nodes, comparing these sums is comparing the
    kubelet's average distances (same divisor; the sums are exact in float64).
    """
    import numpy as np

    rows = numa_info.distances
    sums = np.zeros(1, dtype=np.int64)
    for high in range(len(numa_info.nodes)):
        pair_sums = np.zeros(1, dtype=np.int64)
        for low in range(high):
            pair_sums = np.concatenate((pair_sums, pair_sums + (rows[high][low] + rows[low][high])))
        sums = np.concatenate((sums, sums + pair_sums + rows[high][high]))
    sums.flags.writeable = False
    return sums


# -- the small lattice, in Python integers ------------------------------------------------
@cache
def _levels(size_bits: int) -> tuple[int, ...]:
    """Bitmap of the positions with k nodes, for k = 0..size_bits."""
    levels = [0] * (size_bits + 1)
    for position in range(1 << size_bits):
        levels[position.bit_count()] |= 1 << position
    return tuple(levels)


def _distance_list(numa_info: NUMAInfo) -> tuple[int, ...]:
    """:func:`_distance_sums` as Python integers (small lattices)."""
    rows = numa_info.distances
    sums = [0]
    for high in range(len(numa_info.nodes)):
        pair_sums = [0]
        for low in range(high):
            pair_sums += [value + rows[high][low] + rows[low][high] for value in pair_sums]
        sums += [value + pair + rows[high][high] for value, pair in zip(sums, pair_sums, strict=True)]
    return tuple(sums)


def _transform(table: list[int], size_bits: int, sign: int) -> None:
    """In place: superset sums (``sign`` 1, zeta) or their inverse (``sign`` -1, Möbius)."""
    size = len(table)
    for bit in range(size_bits):
        step = 1 << bit
        for position in range(size):
            if not position & step:
                table[position] += sign * table[position | step]


def _and_products_small(bitmaps: Sequence[int], size_bits: int) -> int:
    """:func:`_and_products` on bitmaps with Python integers (exact, no overflow to guard)."""
    size = 1 << size_bits
    if not bitmaps:
        return 1 << (size - 1)
    if len(bitmaps) == 1:
        return bitmaps[0]
    if 0 in bitmaps:
        return 0
    product: list[int] | None = None
    for bitmap in bitmaps:
        table = [bitmap >> position & 1 for position in range(size)]
        _transform(table, size_bits, 1)
        product = table if product is None else [a * b for a, b in zip(product, table, strict=True)]
    assert product is not None
    _transform(product, size_bits, -1)
    achievable = 0
    for position, count in enumerate(product):
        if count > 0:
            achievable |= 1 << position
    return achievable


# -- the subset lattice ---------------------------------------------------------------
def _zeta(table: NDArray[np.int64], size_bits: int) -> NDArray[np.int64]:
    """In place, per row: entry y becomes the sum over its supersets."""
    rows = table.shape[0]
    for bit in range(size_bits):
        view = table.reshape(rows, -1, 2, 1 << bit)
        view[:, :, 0, :] += view[:, :, 1, :]
    return table


def _mobius(table: NDArray[np.int64], size_bits: int) -> NDArray[np.int64]:
    """In place, per row: the inverse of :func:`_zeta`."""
    rows = table.shape[0]
    for bit in range(size_bits):
        view = table.reshape(rows, -1, 2, 1 << bit)
        view[:, :, 0, :] -= view[:, :, 1, :]
    return table


def _and_products(sets: Sequence[NDArray[np.bool_]], size_bits: int) -> NDArray[np.bool_]:
    """Which positions are the AND of one member of each set (the sets as bool arrays)."""
    import numpy as np

    size = 1 << size_bits
    if not sets:
        result = np.zeros(size, dtype=bool)
        result[size - 1] = True
        return result
    if len(sets) == 1:
        return sets[0].copy()
    sizes = [int(flags.sum()) for flags in sets]
    if 0 in sizes:
        return np.zeros(size, dtype=bool)
    supersets = _zeta(np.stack(sets).astype(np.int64), size_bits)
    product = supersets[0].copy()
    bound = sizes[0]
    for row in range(1, len(sets)):
        if bound * sizes[row] >= _INT64_SAFE:
            exact = _mobius(product.reshape(1, size), size_bits)[0] > 0
            product = _zeta(exact.astype(np.int64).reshape(1, size), size_bits)[0]
            bound = int(exact.sum())
        product *= supersets[row]
        bound *= sizes[row]
    achievable: NDArray[np.bool_] = _mobius(product.reshape(1, size), size_bits)[0] > 0
    return achievable


def and_products(bitmaps: Sequence[int], size_bits: int) -> int:
    """The set ``{a1 & a2 & ... : a1 in S1, a2 in S2, ...}`` without enumerating the product.

    Args:
        bitmaps: one set per factor, as a bitmap over the ``2**size_bits``
            positions (bit p set = position p is in the set).
        size_bits: number of lattice bits (NUMA nodes), at most 20.

    Returns:
        The bitmap of the ANDs (with no factor, the all-ones position alone).
    """
    if not 0 <= size_bits <= MAX_LATTICE_NODES:
        raise HintError(f"lattice of {size_bits} bits: must be 0..{MAX_LATTICE_NODES}")
    size = 1 << size_bits
    for index, bitmap in enumerate(bitmaps):
        if bitmap < 0 or bitmap.bit_length() > size:
            raise HintError(f"set {index} has bits beyond the {size} positions of a {size_bits}-bit lattice")
    if size_bits <= SMALL_LATTICE_NODES:
        return _and_products_small(list(bitmaps), size_bits)
    return _to_bitmap(_and_products([_to_array(bitmap, size) for bitmap in bitmaps], size_bits))


# -- hint lists -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class HintList:
    """One resource's hints in compact form, over the positions of ``nodes``.

    Build it with :meth:`from_hints` or :meth:`from_bitmaps`. The merge needs
    only these facts, not the order of the hints:

    * ``masks``: bitmap, bit p set when some non-nil hint's mask restricted to
      ``nodes`` has position p;
    * ``preferred``: bitmap of the positions of preferred hints whose masks lie
      within ``nodes`` (a subset of ``masks``);
    * ``foreign_preferred``: full masks of preferred hints that name nodes
      outside ``nodes`` (the kubelet compares those masks whole; normally empty);
    * ``nil`` / ``nil_preferred``: a nil-mask hint / a preferred one is present;
    * ``min_count``: the list's share of ``bestNonPreferredAffinityCount``
      (the kubelet's running minimum of mask sizes, restarted after an empty mask).
    """

    nodes: tuple[int, ...]
    masks: int = 0
    preferred: int = 0
    foreign_preferred: frozenset[int] = frozenset()
    nil: bool = False
    nil_preferred: bool = False
    min_count: int = 0

    def __post_init__(self) -> None:
        default = mask_of(self.nodes)
        size_bits = len(self.nodes)
        if size_bits > MAX_LATTICE_NODES:
            raise HintError(f"hint list over {size_bits} NUMA nodes: at most {MAX_LATTICE_NODES} are supported")
        size = 1 << size_bits
        for name, bitmap in (("masks", self.masks), ("preferred", self.preferred)):
            if bitmap < 0 or bitmap.bit_length() > size:
                raise HintError(f"hint list {name} bitmap has bits beyond the {size} masks of {size_bits} NUMA nodes")
        stray = self.preferred & ~self.masks
        if stray:
            first = (stray & -stray).bit_length() - 1
            raise HintError(f"hint list prefers NUMA nodes {list(_ids(first, self.nodes))}, which it does not offer")
        for mask in self.foreign_preferred:
            if not mask & ~default or not self.masks >> _compress(mask, self.nodes) & 1:
                raise HintError(
                    f"hint list foreign mask {list(ids_of(mask))} is within {list(self.nodes)} or not offered"
                )
        if self.nil_preferred and not self.nil:
            raise HintError("hint list has a preferred nil hint but no nil hint")
        if not 0 <= self.min_count <= 64:
            raise HintError(f"hint list min_count {self.min_count} is not a mask size (0..64)")

    @classmethod
    def from_hints(cls, hints: Iterable[TopologyHint], numa_info: NUMAInfo) -> HintList:
        """The compact form of a plain hint sequence (its order only matters for ``min_count``)."""
        nodes = numa_info.nodes
        default = numa_info.default_mask
        identity = _is_identity(nodes)
        offered: set[int] = set()
        preferred: set[int] = set()
        foreign: set[int] = set()
        nil = nil_preferred = False
        min_count = 0
        for hint in hints:
            affinity = hint.affinity
            if affinity is None:
                nil = True
                nil_preferred = nil_preferred or hint.preferred
                continue
            count = affinity.bit_count()
            if min_count == 0 or count < min_count:
                min_count = count
            if affinity & ~default:
                offered.add(_compress(affinity, nodes))
                if hint.preferred:
                    foreign.add(affinity)
                continue
            position = affinity if identity else _compress(affinity, nodes)
            offered.add(position)
            if hint.preferred:
                preferred.add(position)
        size = 1 << len(nodes)
        return cls(
            nodes=nodes,
            masks=_bitmap_of(offered, size),
            preferred=_bitmap_of(preferred, size),
            foreign_preferred=frozenset(foreign),
            nil=nil,
            nil_preferred=nil_preferred,
            min_count=min_count,
        )

    @classmethod
    def from_bitmaps(
        cls, numa_info: NUMAInfo, *, masks: int, preferred: int = 0, nil: bool = False, nil_preferred: bool = False
    ) -> HintList:
        """Hints given as bitmaps over the positions of ``numa_info.nodes``.

        Bit p of ``masks`` offers the mask with position p, bit p of
        ``preferred`` (a subset) marks it preferred. The hints count as listed in
        ascending mask order, which only matters for an empty mask (position 0):
        it does not lower ``min_count`` when other masks are offered.
        """
        checked = cls(nodes=numa_info.nodes, masks=masks, preferred=preferred, nil=nil, nil_preferred=nil_preferred)
        if masks <= 1:
            return checked
        size_bits = len(numa_info.nodes)
        if size_bits <= SMALL_LATTICE_NODES:
            offered_masks = masks & ~1
            count = next(k for k, level in enumerate(_levels(size_bits)) if level & offered_masks)
            return replace(checked, min_count=count)
        offered = _to_array(masks & ~1, 1 << size_bits)
        return replace(checked, min_count=int(_popcounts(size_bits)[offered].min()))

    @classmethod
    def dont_care(cls, numa_info: NUMAInfo) -> HintList:
        """``[{nil, preferred}]``: the resource can go anywhere."""
        return cls(nodes=numa_info.nodes, nil=True, nil_preferred=True)

    @classmethod
    def impossible(cls, numa_info: NUMAInfo) -> HintList:
        """``[{nil, not preferred}]``: what an empty hint list stands for."""
        return cls(nodes=numa_info.nodes, nil=True)

    @property
    def is_empty(self) -> bool:
        """True when the list holds no hint at all."""
        return not self.masks and not self.nil

    def single_numa(self) -> HintList:
        """Only the preferred hints with a nil or one-node mask (``filterSingleNumaHints``)."""
        singles = self.preferred & _singletons(len(self.nodes))
        foreign = frozenset(mask for mask in self.foreign_preferred if mask.bit_count() == 1)
        masks = singles | (1 if foreign else 0)
        return HintList(
            nodes=self.nodes,
            masks=masks,
            preferred=singles,
            foreign_preferred=foreign,
            nil=self.nil_preferred,
            nil_preferred=self.nil_preferred,
            min_count=1 if masks else 0,
        )


def _ids(position: int, nodes: tuple[int, ...]) -> tuple[int, ...]:
    return ids_of(_expand(position, nodes))


CompactProviderHints: TypeAlias = Mapping[str, Sequence[TopologyHint] | HintList | None] | None
"""What one hint provider returns, each resource as plain hints or as a :class:`HintList`.

A plain ``ProviderHints`` is one of these. An empty :class:`HintList` means
what an empty sequence means: the resource cannot be satisfied anywhere.
"""


def lists_from_providers(providers: Sequence[CompactProviderHints], numa_info: NUMAInfo) -> list[HintList]:
    """``filterProvidersHints`` in compact form: one :class:`HintList` per resource of every provider.

    Raises:
        HintError: a :class:`HintList` was built for other NUMA nodes.
    """
    dont_care = HintList.dont_care(numa_info)
    impossible = HintList.impossible(numa_info)
    lists: list[HintList] = []
    for hints in providers:
        if not hints:
            lists.append(dont_care)
            continue
        for resource, resource_hints in hints.items():
            if resource_hints is None:
                lists.append(dont_care)
            elif isinstance(resource_hints, HintList):
                if resource_hints.nodes != numa_info.nodes:
                    raise HintError(
                        f"hints of resource {resource!r} are over NUMA nodes {list(resource_hints.nodes)}, "
                        f"but the machine has {list(numa_info.nodes)}"
                    )
                lists.append(impossible if resource_hints.is_empty else resource_hints)
            elif len(resource_hints) == 0:
                lists.append(impossible)
            else:
                lists.append(HintList.from_hints(resource_hints, numa_info))
    return lists


# -- the merge ------------------------------------------------------------------------
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
        self._identity = _is_identity(numa_info.nodes)
        small = size_bits <= SMALL_LATTICE_NODES
        self._levels = _levels(size_bits) if small else None
        self._distance_list = _distance_list(numa_info) if closest and small else None
        self._popcounts = None if small else _popcounts(size_bits)
        self._distance_sums = _distance_sums(numa_info) if closest and not small else None

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
            return TopologyHint(self._mask(self._fittest(_to_array(preferred, size))), True)
        # Otherwise: every mask some permutation ANDs to (a nil hint stands for all nodes) ...
        nil_position = 1 << (size - 1)
        sets = [_to_array(hint_list.masks | (nil_position if hint_list.nil else 0), size) for hint_list in lists]
        achievable = _and_products(sets, len(info.nodes))
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

    def _merge_small(self, lists: Sequence[HintList], levels: tuple[int, ...]) -> TopologyHint:
        """:meth:`merge` on a lattice of at most 256 masks, with Python integers (same rules)."""
        info = self._info
        preferred = self._preferred_positions(lists)
        if preferred:
            return TopologyHint(self._mask(self._fittest_small(preferred, levels)), True)
        nil_position = 1 << ((1 << len(info.nodes)) - 1)
        achievable = _and_products_small(
            [hint_list.masks | (nil_position if hint_list.nil else 0) for hint_list in lists], len(info.nodes)
        ) & ~1
        if not achievable:
            return TopologyHint(info.default_mask, False)
        target = max((hint_list.min_count for hint_list in lists), default=0)
        chosen = achievable & levels[target] if target < len(levels) else 0
        if not chosen:
            below = [k for k in range(min(target, len(levels))) if achievable & levels[k]]
            chosen = achievable & levels[below[-1]] if below else achievable
        return TopologyHint(self._mask(self._fittest_small(chosen, levels)), False)

    def _fittest_small(self, candidates: int, levels: tuple[int, ...]) -> int:
        """:meth:`_fittest` on a bitmap: fewest nodes, then the lowest position or the lowest distance sum."""
        hit = next(candidates & level for level in levels if candidates & level)
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
            positions |= 1 << _compress(mask, self._info.nodes)
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
        return position if self._identity else _expand(position, self._info.nodes)
