"""Runner for ``take_by_topology.json``: one take-by-topology call per case.

The case's options become :class:`TakeOptions` and go through the public
``take_by_topology`` dispatch, so the vectors also check that
``distribute_across_numa`` selects the distributed algorithm.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.alloc import AllocationError
from agent.alloc.cpumanager.assignment import TakeOptions, take_by_topology
from tests.support import vectors

_FUNCTIONS = {"takeByTopologyNUMAPacked": False, "takeByTopologyNUMADistributed": True}


def options_of(case: dict[str, Any]) -> TakeOptions:
    """The :class:`TakeOptions` a vector case describes."""
    raw = case["options"]
    distributed = raw["distribute_across_numa"]
    assert _FUNCTIONS[case["function"]] == distributed
    return TakeOptions(
        distribute_across_numa=distributed,
        cpu_group_size=raw["cpu_group_size"] or 1,
        spread=raw["cpu_sorting_strategy"] == "spread",
        prefer_uncore=raw["prefer_align_by_uncore_cache"],
    )


def run(case: dict[str, Any], _group: str | None) -> None:
    """Take ``request`` CPUs from ``available`` and compare with the kubelet's result or error."""
    topology = vectors.topology(case["topology"])
    available = vectors.cpuset(case["available"])
    options = options_of(case)
    expect = case["expect"]
    if isinstance(expect, dict):
        with pytest.raises(AllocationError) as raised:
            take_by_topology(topology, available, case["request"], options)
        assert expect["message"] == str(raised.value)
    else:
        assert vectors.cpuset(expect) == take_by_topology(topology, available, case["request"], options)
