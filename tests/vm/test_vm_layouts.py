"""The VM layouts the end-to-end tests use: 8 vCPUs on 4 NUMA nodes, and on 2 nodes with SMT (2 threads/core).

Each layout boots once (``scenario_layout.py``); the expected sysfs and ``podpin topology`` views are
derived here from the qemu arguments, so a change in ``run-in-vm.sh`` or in qemu shows up as a diff.
(The plain 2-node layout is covered by ``test_kernel_facts.py``.)
"""

from __future__ import annotations

from typing import Any

from tests.vm import harness
from tests.vm.harness import GuestRun, VMConfig

LAYOUTS = [VMConfig(cpus=8, nodes=4), VMConfig(cpus=8, nodes=2, threads=2)]
layout = harness.scenario_fixture("scenario_layout.py", params=LAYOUTS)


def _cpus_per(config: VMConfig, unit: int) -> int:
    return config.cpus // unit


def _expected_cpus(config: VMConfig) -> dict[str, dict[str, Any]]:
    """Per CPU: core = lowest sibling id, socket and NUMA node from the contiguous ranges qemu assigns."""
    per_socket = _cpus_per(config, config.sockets or config.nodes)
    per_node = _cpus_per(config, config.nodes)
    return {
        str(c): {"core": c - c % config.threads, "socket": c // per_socket, "numa": c // per_node, "online": True}
        for c in range(config.cpus)
    }


def _siblings(config: VMConfig, cpu: int) -> str:
    first = cpu - cpu % config.threads
    return str(first) if config.threads == 1 else f"{first}-{first + config.threads - 1}"


def test_numa_node_cpulists(layout: GuestRun) -> None:
    """Each node's cpulist is the contiguous range ``-numa node,cpus=`` gave it."""
    step = layout.step("sysfs")
    assert layout.config.node_cpulists() == step["node_cpulists"], step.explain


def test_distances(layout: GuestRun) -> None:
    """qemu's default SLIT: 10 on the diagonal, 20 elsewhere."""
    step = layout.step("sysfs")
    nodes = range(layout.config.nodes)
    expected = {str(a): ["10" if a == b else "20" for b in nodes] for a in nodes}
    assert expected == step["node_distances"], step.explain


def test_core_siblings(layout: GuestRun) -> None:
    """With ``threads=2`` CPUs 2k and 2k+1 are one core's siblings; with ``threads=1`` each CPU is alone."""
    step = layout.step("sysfs")
    expected = {str(c): _siblings(layout.config, c) for c in range(layout.config.cpus)}
    assert expected == step["core_cpus"], step.explain


def test_packages(layout: GuestRun) -> None:
    """One package per NUMA node (``sockets`` = ``nodes``), in contiguous CPU ranges."""
    step = layout.step("sysfs")
    expected = {c: str(v["socket"]) for c, v in _expected_cpus(layout.config).items()}
    assert expected == step["packages"], step.explain


def test_podpin_topology_matches_qemu_arguments(layout: GuestRun) -> None:
    """podpin's topology JSON of the guest's /sys has the same nodes, cores, sockets and NUMA ids."""
    step = layout.step("podpin_topology")
    expected = (layout.config.node_cpulists(), _expected_cpus(layout.config))
    assert expected == (step["numa_nodes"], step["cpus"]), step.explain
