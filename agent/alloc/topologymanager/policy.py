"""The topology manager policies: ``none``, ``best-effort``, ``restricted``, ``single-numa-node``.

A policy turns the hints of every provider into one NUMA affinity and an
admit/reject decision, exactly as the kubelet's ``Policy.Merge`` does
(``policy_none.go``, ``policy_best_effort.go``, ``policy_restricted.go``,
``policy_single_numa_node.go``). The merging is :class:`LatticeMerger`'s, which
gives the kubelet's result without walking the cartesian product; the literal
walk is the test oracle ``tests/oracles/merge_reference.py`` the tests compare with.

The policy is chosen once, by :func:`make_policy`, from the configured name.
Limits on the node count (the kubelet's 8 NUMA nodes unless
``max-allowable-numa-nodes``) are configuration checks made by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Protocol

from agent.alloc.topologymanager.hint import TopologyHint
from agent.alloc.topologymanager.hint_list import CompactProviderHints, lists_from_providers
from agent.alloc.topologymanager.merge import LatticeMerger
from agent.alloc.topologymanager.numa_info import NUMAInfo

__all__ = [
    "BestEffortPolicy",
    "NonePolicy",
    "RestrictedPolicy",
    "SingleNumaNodePolicy",
    "TopologyManagerPolicy",
    "TopologyPolicy",
    "TopologyPolicyError",
    "make_policy",
]


class TopologyManagerPolicy(StrEnum):
    """``topologyManagerPolicy``: the names :func:`make_policy` accepts."""

    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class TopologyPolicyError(ValueError):
    """A policy that cannot be built: unknown name, or closest-NUMA ranking without distances."""


class TopologyPolicy(Protocol):
    """What the scopes need from a topology manager policy."""

    @property
    def name(self) -> TopologyManagerPolicy:
        """The configured name (``topologyManagerPolicy``)."""
        ...

    @property
    def alignment_guaranteed(self) -> bool:
        """True when an admitted pod is always on one NUMA node (drives the aligned-resources metrics)."""
        ...

    def merge(self, providers: Sequence[CompactProviderHints], /) -> tuple[TopologyHint, bool]:
        """The best NUMA affinity for the providers' hints, and whether to admit."""
        ...


@dataclass(frozen=True, slots=True)
class NonePolicy:
    """``none``: no alignment; every pod is admitted with a nil affinity."""

    name: ClassVar[TopologyManagerPolicy] = TopologyManagerPolicy.NONE
    alignment_guaranteed: ClassVar[bool] = False

    def merge(self, _providers: Sequence[CompactProviderHints], /) -> tuple[TopologyHint, bool]:
        """``{nil, preferred}`` and admit, without looking at the hints."""
        return TopologyHint(None, True), True


@dataclass(frozen=True, slots=True)
class _MergingPolicy:
    """A policy that merges the hints; subclasses decide admission."""

    name: ClassVar[TopologyManagerPolicy]
    alignment_guaranteed: ClassVar[bool] = False

    numa_info: NUMAInfo
    prefer_closest: bool = False
    _merger: LatticeMerger = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        closest = self.prefer_closest and self.name != TopologyManagerPolicy.SINGLE_NUMA_NODE
        object.__setattr__(self, "_merger", LatticeMerger(self.numa_info, closest=closest))

    def _best(self, providers: Sequence[CompactProviderHints]) -> TopologyHint:
        return self._merger.merge(lists_from_providers(providers, self.numa_info))


@dataclass(frozen=True, slots=True)
class BestEffortPolicy(_MergingPolicy):
    """``best-effort``: store the best hint, preferred or not; always admit."""

    name: ClassVar[TopologyManagerPolicy] = TopologyManagerPolicy.BEST_EFFORT

    def merge(self, providers: Sequence[CompactProviderHints], /) -> tuple[TopologyHint, bool]:
        """The best hint and ``True``."""
        return self._best(providers), True


@dataclass(frozen=True, slots=True)
class RestrictedPolicy(_MergingPolicy):
    """``restricted``: admit only when the best hint is preferred."""

    name: ClassVar[TopologyManagerPolicy] = TopologyManagerPolicy.RESTRICTED

    def merge(self, providers: Sequence[CompactProviderHints], /) -> tuple[TopologyHint, bool]:
        """The best hint, admitted iff it is preferred."""
        best = self._best(providers)
        return best, best.preferred


@dataclass(frozen=True, slots=True)
class SingleNumaNodePolicy(_MergingPolicy):
    """``single-numa-node``: only preferred one-node (or nil) hints take part; admit a preferred result.

    The merge ranks masks by narrowness even with ``prefer_closest`` (one-node
    masks all have the same self-distance), and reports the all-nodes mask,
    which only the all-nil permutation produces, as nil.
    """

    name: ClassVar[TopologyManagerPolicy] = TopologyManagerPolicy.SINGLE_NUMA_NODE
    alignment_guaranteed: ClassVar[bool] = True

    def merge(self, providers: Sequence[CompactProviderHints], /) -> tuple[TopologyHint, bool]:
        """The best single-node hint (nil for "anywhere"), admitted iff preferred."""
        lists = [hint_list.single_numa() for hint_list in lists_from_providers(providers, self.numa_info)]
        best = self._merger.merge(lists)
        if best.affinity == self.numa_info.default_mask:
            best = TopologyHint(None, best.preferred)
        return best, best.preferred


def make_policy(name: str, numa_info: NUMAInfo, *, prefer_closest: bool = False) -> TopologyPolicy:
    """The policy named ``name`` for a machine's NUMA nodes.

    Args:
        name: ``topologyManagerPolicy``: a :class:`TopologyManagerPolicy` (or its value).
        numa_info: the machine's NUMA node ids and distances.
        prefer_closest: the ``prefer-closest-numa-nodes`` policy option.

    Raises:
        TopologyPolicyError: unknown name, or ``prefer_closest`` without NUMA distances.
    """
    if name == TopologyManagerPolicy.NONE:
        return NonePolicy()
    policy = _MERGING_POLICIES.get(name)
    if policy is None:
        raise TopologyPolicyError(
            f"unknown topology manager policy {name!r}: expected one of {', '.join(TopologyManagerPolicy)}"
        )
    if prefer_closest and not numa_info.has_distances:
        raise TopologyPolicyError(
            f"topology manager policy option prefer-closest-numa-nodes needs NUMA distances, "
            f"and NUMA nodes {list(numa_info.nodes)} have none"
        )
    return policy(numa_info, prefer_closest)


#: The policies that merge hints, by name (a plain string finds its member: ``StrEnum`` hashes as its value).
_MERGING_POLICIES: dict[str, Callable[[NUMAInfo, bool], TopologyPolicy]] = {
    TopologyManagerPolicy.BEST_EFFORT: BestEffortPolicy,
    TopologyManagerPolicy.RESTRICTED: RestrictedPolicy,
    TopologyManagerPolicy.SINGLE_NUMA_NODE: SingleNumaNodePolicy,
}
