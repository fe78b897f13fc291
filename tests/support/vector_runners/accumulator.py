"""Runner for ``accumulator.json``: the accumulator's free-domain orders and take bookkeeping."""

from __future__ import annotations

from typing import Any

from agent.alloc.cpumanager.assignment.accumulator import Accumulator
from tests.support import vectors


def run(case: dict[str, Any], _group: str | None) -> None:
    """Build the accumulator the case describes and compare the listed order or flags."""
    topology = vectors.topology(case["topology"])
    available = vectors.cpuset(case["available"])
    kind = case["kind"]
    if kind == "take":
        acc = Accumulator.of_cpus(topology, available, case["num_cpus"])
        for cpus in case["take_sequence"]:
            acc.take(vectors.cpuset(cpus))
        assert (case["expect_satisfied"], case["expect_failed"]) == (acc.is_satisfied(), acc.is_failed())
        return
    acc = Accumulator.of_cpus(topology, available, 0)
    if kind == "free_sockets_and_numa_nodes":
        assert (case["expect_sockets"], case["expect_numa_nodes"]) == (acc.free_sockets(), acc.free_numa_nodes())
        return
    listed = {
        "free_sockets": acc.free_sockets,
        "free_numa_nodes": acc.free_numa_nodes,
        "free_cores": acc.free_cores,
        "free_cpus": acc.free_cpus,
    }[kind]()
    if case["order_sensitive"]:
        assert case["expect"] == listed
    else:
        assert sorted(case["expect"]) == sorted(listed)
