"""Topology hints and NUMA bitmasks (the kubelet's ``topologymanager.TopologyHint`` and ``bitmask``).

A NUMA affinity is a plain ``int`` bitmask, bit *n* = NUMA node *n*, as the
kubelet's ``bitmask.BitMask`` (``pkg/kubelet/cm/topologymanager/bitmask/bitmask.go``)
is a ``uint64``: node ids are 0..63. ``None`` stands for the Go ``nil`` mask,
which a hint uses to say "any node will do"; it is different from ``0``, a
non-nil mask naming no node.

The machine's NUMA facts the merge ranks masks with are in
:mod:`agent.alloc.topologymanager.numa_info`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "MAX_NUMA_ID",
    "HintError",
    "ProviderHints",
    "TopologyHint",
    "ids_of",
    "is_narrower_than",
    "mask_of",
]

#: Highest NUMA node id a mask can hold (the kubelet's bitmask is 64 bits wide).
MAX_NUMA_ID = 63

_MASK_LIMIT = 1 << (MAX_NUMA_ID + 1)


class HintError(ValueError):
    """A hint, NUMA mask or NUMA description that is not valid; the message names the value."""


def mask_of(ids: Iterable[int]) -> int:
    """The bitmask of NUMA node ids (``mask_of([0, 2]) == 0b101``).

    Raises:
        HintError: an id is not an integer in 0..63.
    """
    mask = 0
    for node in ids:
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node <= MAX_NUMA_ID:
            raise HintError(f"invalid NUMA node id {node!r}: must be an integer in 0..{MAX_NUMA_ID}")
        mask |= 1 << node
    return mask


def ids_of(mask: int) -> tuple[int, ...]:
    """The NUMA node ids of a bitmask, ascending (``ids_of(0b101) == (0, 2)``)."""
    if mask < 0:
        raise HintError(f"invalid NUMA mask {mask!r}: must be non-negative")
    ids: list[int] = []
    while mask:
        low = mask & -mask
        ids.append(low.bit_length() - 1)
        mask ^= low
    return tuple(ids)


def is_narrower_than(first: int, second: int) -> bool:
    """The kubelet's ``first.IsNarrowerThan(second)``.

    Fewer nodes is narrower; with as many nodes, the smaller integer value (the
    mask with the lower-numbered nodes) is narrower. A mask is not narrower than
    itself.
    """
    first_count, second_count = first.bit_count(), second.bit_count()
    if first_count == second_count:
        return first < second
    return first_count < second_count


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """One provider's statement about where a resource could be placed.

    ``affinity`` is the NUMA bitmask (bit n = node n), or ``None`` for the Go
    nil mask ("no preference"); ``preferred`` says the placement is the best
    this provider can do.
    """

    affinity: int | None
    preferred: bool

    def __post_init__(self) -> None:
        affinity = self.affinity
        if affinity is not None and (
            isinstance(affinity, bool) or not isinstance(affinity, int) or not 0 <= affinity < _MASK_LIMIT
        ):
            raise HintError(f"invalid hint affinity {affinity!r}: must be None or a 64-bit NUMA mask")
        if not isinstance(self.preferred, bool):
            raise HintError(f"invalid hint preference {self.preferred!r}: must be a bool")

    @property
    def nodes(self) -> tuple[int, ...] | None:
        """The NUMA node ids of the affinity, or ``None`` for the nil mask."""
        return None if self.affinity is None else ids_of(self.affinity)


ProviderHints: TypeAlias = Mapping[str, Sequence[TopologyHint] | None] | None
"""What one hint provider returns: resource name -> its hints.

``None`` or an empty mapping means the provider has no preference. For a
resource, ``None`` means "no preference" and an empty sequence means "cannot be
satisfied anywhere" (the kubelet's nil vs empty slice).
"""
