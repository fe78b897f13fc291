"""One resource's topology hints in compact form: :class:`HintList`, and providers' hints as lists.

:class:`HintList` is the compact form of one resource's hints (bitmaps of the
masks offered and the masks preferred, over the lattice positions of
:mod:`agent.alloc.topologymanager.lattice`) that a provider can build straight from bitmaps;
plain hint sequences are converted. :func:`lists_from_providers` is the
kubelet's ``filterProvidersHints`` over either form.

It is separate from :mod:`agent.alloc.topologymanager.merge` because hint providers
(:mod:`agent.alloc.cpumanager.hints`, :mod:`agent.alloc.cpumanager.policy_static`, :mod:`agent.alloc.admission`)
build and pass these lists without needing the merge, and the merge only
consumes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from agent.alloc.topologymanager.hint import HintError, TopologyHint, ids_of, mask_of
from agent.alloc.topologymanager.lattice import (
    MAX_LATTICE_NODES,
    SMALL_LATTICE_NODES,
    bitmap_of,
    flags_from_bitmap,
    is_identity,
    levels,
    mask_at,
    popcount_table,
    position_of,
    singletons,
)
from agent.alloc.topologymanager.numa_info import NUMAInfo

__all__ = ["CompactProviderHints", "HintList", "lists_from_providers"]


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
            if not mask & ~default or not self.masks >> position_of(mask, self.nodes) & 1:
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
        identity = is_identity(nodes)
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
                offered.add(position_of(affinity, nodes))
                if hint.preferred:
                    foreign.add(affinity)
                continue
            position = affinity if identity else position_of(affinity, nodes)
            offered.add(position)
            if hint.preferred:
                preferred.add(position)
        size = 1 << len(nodes)
        return cls(
            nodes=nodes,
            masks=bitmap_of(offered, size),
            preferred=bitmap_of(preferred, size),
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
            count = next(k for k, level in enumerate(levels(size_bits)) if level & offered_masks)
            return replace(checked, min_count=count)
        offered = flags_from_bitmap(masks & ~1, size_bits)
        return replace(checked, min_count=int(popcount_table(size_bits)[offered].min()))

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
        singles = self.preferred & singletons(len(self.nodes))
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
    return ids_of(mask_at(position, nodes))


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
