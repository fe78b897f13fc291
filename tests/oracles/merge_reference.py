"""The kubelet's topology hint merge, literally: every permutation of the cartesian product.

It follows the steps of ``pkg/kubelet/cm/topologymanager/policy.go``
(``filterProvidersHints``, ``HintMerger``, ``mergePermutation``,
``maxOfMinAffinityCounts``) and of the policies' ``Merge`` methods one by one,
in our own code. Its cost is
the product of the hint list lengths, exponential in the number of NUMA nodes,
so podpin does not use it to admit pods: it is the oracle the fast merge in
:mod:`agent.alloc.topologymanager.merge` is tested against, and the baseline of
``scripts/bench_merge.py``. Keep it literal; cleverness belongs in ``merge.py``.

Go ``nil`` slices are ``None`` where the kubelet's tests tell nil from empty
(``filter_single_numa_hints``); everywhere else a missing list is empty.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from agent.alloc.topologymanager import HintError, NUMAInfo, ProviderHints, TopologyHint

__all__ = [
    "HintMerger",
    "filter_providers_hints",
    "filter_single_numa_hints",
    "max_of_min_affinity_counts",
    "merge_permutation",
    "reference_merge",
]

_HintLists = Sequence[Sequence[TopologyHint] | None]


def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """One hint list per resource of every provider, in provider order (``filterProvidersHints``).

    A provider with no hints (``None`` or empty) says "don't care": ``[{nil, true}]``.
    A resource whose hints are ``None`` says the same; an empty list says "cannot
    be satisfied": ``[{nil, false}]``. Resources keep the mapping's order (the
    kubelet's is Go's random map order, which the merge does not depend on).
    """
    all_hints: list[list[TopologyHint]] = []
    for hints in providers:
        if not hints:
            all_hints.append([TopologyHint(None, True)])
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                all_hints.append([TopologyHint(None, True)])
            elif len(resource_hints) == 0:
                all_hints.append([TopologyHint(None, False)])
            else:
                all_hints.append(list(resource_hints))
    return all_hints


def filter_single_numa_hints(all_hints: _HintLists) -> list[list[TopologyHint] | None] | None:
    """Keep the preferred hints with a nil or one-node mask (``filterSingleNumaHints``).

    Mirrors Go's slices: a list left with no hint is ``None`` (nil), and so is
    the result when there is no list at all.
    """
    filtered_all: list[list[TopologyHint] | None] | None = None
    for resource_hints in all_hints:
        filtered: list[TopologyHint] | None = None
        for hint in resource_hints or ():
            if hint.affinity is None and hint.preferred:
                filtered = (filtered or []) + [hint]
            if hint.affinity is not None and hint.affinity.bit_count() == 1 and hint.preferred:
                filtered = (filtered or []) + [hint]
        filtered_all = (filtered_all or []) + [filtered]
    return filtered_all


def max_of_min_affinity_counts(all_hints: _HintLists | None) -> int:
    """The largest, over the lists, of each list's smallest non-nil mask size (``maxOfMinAffinityCounts``).

    Literal, quirk included: the running minimum restarts after an empty mask
    (``minCount == 0 || count < minCount``), so an empty mask only counts when
    no non-empty mask follows it in its list.
    """
    max_of_min = 0
    for resource_hints in all_hints or ():
        min_count = 0
        for hint in resource_hints or ():
            if hint.affinity is None:
                continue
            count = hint.affinity.bit_count()
            if min_count == 0 or count < min_count:
                min_count = count
        max_of_min = max(max_of_min, min_count)
    return max_of_min


def merge_permutation(default_affinity: int, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """AND the default mask with every non-nil mask (``mergePermutation``).

    Preferred only if every hint is preferred and every non-nil mask is the same.
    """
    preferred = True
    affinities: list[int] = []
    for hint in permutation:
        if hint.affinity is not None:
            affinities.append(hint.affinity)
            if hint.affinity != affinities[0]:
                preferred = False
        if not hint.preferred:
            preferred = False
    merged = default_affinity
    for affinity in affinities:
        merged &= affinity
    return TopologyHint(merged, preferred)


def _count(hint: TopologyHint) -> int:
    return 0 if hint.affinity is None else hint.affinity.bit_count()


@dataclass(frozen=True, slots=True, kw_only=True)
class HintMerger:
    """The kubelet's ``HintMerger``: folds every permutation into the best hint.

    ``closest`` selects ``NUMAInfo.closest`` over ``NUMAInfo.narrowest`` to rank
    masks (prefer-closest-numa-nodes, never for single-numa-node).
    """

    numa_info: NUMAInfo
    hints: _HintLists
    best_non_preferred_affinity_count: int
    closest: bool = False

    @classmethod
    def new(
        cls, numa_info: NUMAInfo, hints: _HintLists, policy_name: str, *, prefer_closest: bool = False
    ) -> HintMerger:
        """``NewHintMerger``: the affinity count target comes from the hints."""
        return cls(
            numa_info=numa_info,
            hints=hints,
            best_non_preferred_affinity_count=max_of_min_affinity_counts(hints),
            closest=prefer_closest and policy_name != "single-numa-node",
        )

    def _compare_masks(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        """``compareNumaAffinityMasks``: the fitter mask; the current one on equal masks."""
        if candidate.affinity == current.affinity:
            return current
        first, second = current.affinity or 0, candidate.affinity or 0
        best = self.numa_info.closest(first, second) if self.closest else self.numa_info.narrowest(first, second)
        return current if best == first else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        """``HintMerger.compare``: the better of the best hint so far and a candidate.

        Returns one of its two arguments (by identity), or ``None`` while no
        candidate with a non-empty mask has been seen.
        """
        if _count(candidate) == 0:
            return current
        if current is None:
            return candidate
        if not current.preferred and candidate.preferred:
            return candidate
        if current.preferred and not candidate.preferred:
            return current
        if current.preferred and candidate.preferred:
            return self._compare_masks(current, candidate)
        target = self.best_non_preferred_affinity_count
        current_count, candidate_count = _count(current), _count(candidate)
        if current_count > target:
            return self._compare_masks(current, candidate)
        if current_count == target:
            if candidate_count != target:
                return current
            return self._compare_masks(current, candidate)
        if candidate_count > target:
            return current
        if candidate_count == target:
            return candidate
        if candidate_count > current_count:
            return candidate
        if candidate_count < current_count:
            return current
        return self._compare_masks(current, candidate)

    def merge(self) -> TopologyHint:
        """Fold every permutation (first list outermost); ``{default, false}`` if none wins."""
        default_affinity = self.numa_info.default_mask
        best: TopologyHint | None = None
        for permutation in itertools.product(*(hints or () for hints in self.hints)):
            best = self.compare(best, merge_permutation(default_affinity, permutation))
        if best is None:
            return TopologyHint(default_affinity, False)
        return best


def reference_merge(
    policy_name: str, numa_info: NUMAInfo, providers: Sequence[ProviderHints], *, prefer_closest: bool = False
) -> tuple[TopologyHint, bool]:
    """A policy's ``Merge``: the best hint and whether the pod is admitted.

    ``none`` does not merge; ``best-effort`` always admits; ``restricted``
    admits a preferred hint; ``single-numa-node`` merges only preferred
    one-node (or nil) hints, reports the all-nodes mask as nil and admits a
    preferred hint.

    Raises:
        HintError: the policy name is not one of the four.
    """
    if policy_name == "none":
        return TopologyHint(None, True), True
    filtered = filter_providers_hints(providers)
    if policy_name == "best-effort":
        return HintMerger.new(numa_info, filtered, policy_name, prefer_closest=prefer_closest).merge(), True
    if policy_name == "restricted":
        best = HintMerger.new(numa_info, filtered, policy_name, prefer_closest=prefer_closest).merge()
        return best, best.preferred
    if policy_name == "single-numa-node":
        single = filter_single_numa_hints(filtered) or []
        best = HintMerger.new(numa_info, single, policy_name, prefer_closest=prefer_closest).merge()
        if best.affinity == numa_info.default_mask:
            best = TopologyHint(None, best.preferred)
        return best, best.preferred
    raise HintError(f"unknown topology manager policy {policy_name!r}")
