"""Runner for ``topology_merge_internals.json``: the kubelet merger's intermediate steps.

The literal steps live in ``merge_reference``; where the fast merge keeps the
same fact (a list's share of the affinity count target, the single-NUMA
filter) its :class:`HintList` is checked too.
"""

from __future__ import annotations

from typing import Any

from agent.alloc.topologymanager import HintList, NUMAInfo, TopologyHint, is_narrower_than, mask_of
from tests.oracles.merge_reference import HintMerger, filter_single_numa_hints, max_of_min_affinity_counts
from tests.support.vector_runners.topology_merge import hint


def _hints(raw: list[Any] | None) -> list[TopologyHint] | None:
    return None if raw is None else [hint(item) for item in raw]


def _lists(raw: list[Any] | None) -> list[list[TopologyHint] | None] | None:
    return None if raw is None else [_hints(item) for item in raw]


def _info_covering(lists: list[list[TopologyHint] | None]) -> NUMAInfo:
    """NUMA nodes 0..n covering every node the hints name."""
    union = 0
    for hints in lists:
        for item in hints or ():
            union |= item.affinity or 0
    return NUMAInfo(nodes=tuple(range(max(union.bit_length(), 1))))


def _compare(case: dict[str, Any]) -> None:
    merger = HintMerger(
        numa_info=NUMAInfo(nodes=()),
        hints=[],
        best_non_preferred_affinity_count=case["best_non_preferred_affinity_count"],
    )
    current = None if case["current"] is None else hint(case["current"])
    candidate = hint(case["candidate"])
    winner = merger.compare(current, candidate)
    assert case["expect"] == ("candidate" if winner is candidate else "current")


def _max_of_min(case: dict[str, Any]) -> None:
    lists = _lists(case["hints"]) or []
    assert case["expect"] == max_of_min_affinity_counts(lists)
    info = _info_covering(lists)
    assert case["expect"] == max((HintList.from_hints(hints or (), info).min_count for hints in lists), default=0)


def _single_numa(case: dict[str, Any]) -> None:
    lists = _lists(case["input"]) or []
    assert _lists(case["expect"]) == filter_single_numa_hints(lists)
    info = _info_covering(lists)
    expected = [HintList.from_hints(hints or (), info) for hints in _lists(case["expect"]) or []]
    assert expected == [HintList.from_hints(hints or (), info).single_numa() for hints in lists]


def _narrower(case: dict[str, Any]) -> None:
    assert case["expect_first_narrower"] == is_narrower_than(mask_of(case["first"]), mask_of(case["second"]))


_RUNNERS = {
    "compare_hints_narrowest": _compare,
    "max_of_min_affinity_counts": _max_of_min,
    "filter_single_numa_hints": _single_numa,
    "bitmask_is_narrower_than": _narrower,
}


def run(case: dict[str, Any], group: str | None) -> None:
    """The case's internal step gives the kubelet's expected value."""
    assert group is not None, "topology_merge_internals.json is an object of lists"
    _RUNNERS[group](case)
