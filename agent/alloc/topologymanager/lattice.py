"""The lattice of NUMA-node subsets: positions, bitmaps, and the ANDs of a product of sets.

The hint merge (:mod:`agent.alloc.topologymanager.merge`) needs to know which masks the
permutations of the hint lists can AND to. That set is computed exactly over
the lattice of the ``2**N`` node subsets: the superset-sum (zeta) transform of
each list's indicator counts, for every mask ``y``, the hints ``⊇ y``; the
pointwise product counts the permutations whose AND is ``⊇ y``; the Möbius
transform turns that into the permutations whose AND is exactly ``y``. NumPy
does this in O(lists * N * 2**N), about a millisecond for 16 nodes; counts are
collapsed to 0/1 before a product could overflow int64.

Masks live here as *positions* over ``NUMAInfo.nodes`` (bit i of a position =
the i-th node id); on machines whose ids are 0..N-1, as nearly all are, a
position is the mask itself. A set of positions is a bitmap (bit p set =
position p is in the set).

Machines with at most :data:`SMALL_LATTICE_NODES` NUMA nodes (256 masks; nearly
every machine) run the same transforms on Python integers, which are exact and
quick at that size; NumPy (about 11 MiB of an agent's memory) is imported only
for larger lattices. The property tests hold both paths to the literal merge.

It is separate from the merge because it is plain arithmetic on the subset
lattice, with no notion of hints or of the kubelet's ranking; the compact hint
lists (:mod:`agent.alloc.topologymanager.hint_list`), the merge and the CPU hint provider
(:mod:`agent.alloc.cpumanager.hints`) all build on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING

from agent.alloc.topologymanager.hint import HintError, ids_of, mask_of

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from agent.alloc.topologymanager.numa_info import NUMAInfo

__all__ = [
    "MAX_LATTICE_NODES",
    "SMALL_LATTICE_NODES",
    "and_products",
    "and_products_flags",
    "and_products_ints",
    "bitmap_from_flags",
    "bitmap_of",
    "distance_list",
    "distance_sums",
    "flags_from_bitmap",
    "is_identity",
    "levels",
    "mask_at",
    "popcount_table",
    "position_of",
    "singletons",
]

#: The lattice holds 2**N entries per list; 20 nodes is 8 MiB per int64 array.
MAX_LATTICE_NODES = 20

#: Products of permutation counts stay below this, so int64 never overflows.
_INT64_SAFE = 1 << 62

#: Up to this many NUMA nodes the lattice is computed with Python integers, without NumPy.
SMALL_LATTICE_NODES = 8


# -- positions and bitmaps ------------------------------------------------------------
def position_of(mask: int, nodes: tuple[int, ...]) -> int:
    """The position of ``mask`` over ``nodes`` (bits of other nodes are dropped)."""
    position = 0
    for index, node in enumerate(nodes):
        if mask >> node & 1:
            position |= 1 << index
    return position


def mask_at(position: int, nodes: tuple[int, ...]) -> int:
    """The NUMA mask of a position over ``nodes``."""
    return mask_of(nodes[index] for index in ids_of(position))


def is_identity(nodes: tuple[int, ...]) -> bool:
    """True when node ids are 0..N-1, so positions are masks."""
    return nodes == tuple(range(len(nodes)))


def bitmap_of(positions: Iterable[int], size: int) -> int:
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
    return bitmap_from_flags(flags)


def _to_array(bitmap: int, size: int) -> NDArray[np.bool_]:
    """The bitmap as a bool array of ``size`` entries."""
    import numpy as np

    raw = np.frombuffer(bitmap.to_bytes(max(1, (size + 7) // 8), "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:size].astype(bool)


def flags_from_bitmap(bitmap: int, size_bits: int) -> NDArray[np.bool_]:
    """A bitmap over the positions of a ``size_bits``-node lattice as a bool array."""
    return _to_array(bitmap, 1 << size_bits)


def bitmap_from_flags(flags: NDArray[np.bool_]) -> int:
    """A bool array as a bitmap (bit p set where ``flags[p]``)."""
    import numpy as np

    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


@cache
def popcount_table(size_bits: int) -> NDArray[np.uint8]:
    """Number of nodes of every position of a ``size_bits``-node lattice (read-only)."""
    import numpy as np

    counts = np.zeros(1 << size_bits, dtype=np.uint8)
    for bit in range(size_bits):
        counts[1 << bit : 2 << bit] = counts[: 1 << bit] + 1
    counts.flags.writeable = False
    return counts


@cache
def singletons(size_bits: int) -> int:
    """Bitmap of the one-node positions."""
    return sum(1 << (1 << bit) for bit in range(size_bits))


def distance_sums(numa_info: NUMAInfo) -> NDArray[np.int64]:
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
def levels(size_bits: int) -> tuple[int, ...]:
    """Bitmap of the positions with k nodes, for k = 0..size_bits."""
    levels = [0] * (size_bits + 1)
    for position in range(1 << size_bits):
        levels[position.bit_count()] |= 1 << position
    return tuple(levels)


def distance_list(numa_info: NUMAInfo) -> tuple[int, ...]:
    """:func:`distance_sums` as Python integers (small lattices)."""
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


def and_products_ints(bitmaps: Sequence[int], size_bits: int) -> int:
    """:func:`and_products_flags` on bitmaps with Python integers (exact, no overflow to guard)."""
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


def and_products_flags(sets: Sequence[NDArray[np.bool_]], size_bits: int) -> NDArray[np.bool_]:
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
        return and_products_ints(list(bitmaps), size_bits)
    return bitmap_from_flags(and_products_flags([_to_array(bitmap, size) for bitmap in bitmaps], size_bits))
