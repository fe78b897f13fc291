"""The differential harness's configurations (issue 17): one scenario's kubelet fields made into the kubelet's
configuration of run (a), the kubelet's and podpin's of run (b), and the guest machine both runs boot.

Run (a) is the kubelet deciding: the scenario's fields with the feature gates of pod-level resource managers on
(``PodLevelResources``, beta and on by default since 1.34, stated anyway; ``PodLevelResourceManagers``, alpha in
1.36) and the gates the scenario's CPU manager options need (``CPUManagerPolicyAlphaOptions`` for the alpha ones).
Run (b) is podpin deciding: the kubelet with its CPU and memory managers off (``none``/``None``, topology manager
``none``: with no manager giving hints it would admit everything anyway) but the same reservations, so that the
node's allocatable, and so the kubelet's resource-fit admission and the scheduler, are the same in both runs; and
podpin with the scenario's fields, which podpin reads under the kubelet's names. The pure part: no guest here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.cluster.node import NodeSpec
from tests.cluster.scenario_format import Machine, Scenario

__all__ = [
    "ALPHA_CPU_OPTIONS",
    "BASE_GATES",
    "PODPIN_READY_GATE",
    "kubelet_config_a",
    "kubelet_config_b",
    "node_spec",
    "podpin_config",
]

BASE_GATES: Mapping[str, bool] = {"PodLevelResources": True, "PodLevelResourceManagers": True}
"""The gates run (a) always turns on: with them, the static CPU manager decides pod-level resources (KEP-5526)."""

ALPHA_CPU_OPTIONS = frozenset({"align-by-socket", "distribute-cpus-across-cores", "strict-cpu-reservation"})
"""CPU manager policy options behind ``CPUManagerPolicyAlphaOptions`` (the others are beta or GA, on by default)."""

PODPIN_READY_GATE = "podpin.io/CPUsPinned"
"""The readiness gate run (b) adds to every pod, so podpin reports its decision on each (True or False with the
kubelet's reason) and the harness knows when it has decided: run (a) has no such gate (nobody would set it)."""

_RESERVATION_FIELDS = ("reservedSystemCPUs", "systemReserved", "kubeReserved")
EVICTION_HARD: Mapping[str, str] = {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
"""Both runs' hard eviction thresholds: the kubelet's default for memory (the Static memory manager's
``reservedMemory`` must add up to the reservations plus it, as the scenarios' README says), the test node's
tmpfs-friendly ones for the disks (tests/cluster/node.py)."""


def node_spec(machine: Machine) -> NodeSpec:
    """The guest QEMU boots for scenarios of this machine shape (the kubelet's configuration comes per scenario)."""
    return NodeSpec(
        cpus=machine.cpus,
        numa_nodes=machine.numa_nodes,
        sockets=machine.sockets,
        threads=machine.threads_per_core,
        memory_mb=machine.numa_nodes * machine.memory_mib_per_node,
    )


def kubelet_config_a(scenario: Scenario) -> dict[str, Any]:
    """Run (a)'s KubeletConfiguration overrides: the scenario's fields and the gates they need."""
    fields = scenario.kubelet.configuration()
    gates = dict(BASE_GATES)
    options = fields.get("cpuManagerPolicyOptions", {})
    if ALPHA_CPU_OPTIONS & set(options):
        gates["CPUManagerPolicyAlphaOptions"] = True
    return {**fields, "featureGates": gates, "evictionHard": dict(EVICTION_HARD)}


def kubelet_config_b(scenario: Scenario) -> dict[str, Any]:
    """Run (b)'s KubeletConfiguration overrides: managers off, the scenario's reservations kept.

    ``reservedMemory`` goes with the memory manager (the kubelet checks it against the Static policy only), so it
    is podpin's alone in run (b).
    """
    fields = scenario.kubelet.configuration()
    kept = {key: fields[key] for key in _RESERVATION_FIELDS if key in fields}
    return {
        **kept,
        "cpuManagerPolicy": "none",
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
        "featureGates": dict(BASE_GATES),
        "evictionHard": dict(EVICTION_HARD),
    }


def podpin_config(scenario: Scenario, *, node_name: str, state_dir: str, metrics: str) -> dict[str, Any]:
    """podpin's configuration in run (b): the scenario's fields (the kubelet's names and defaults) and where the
    agent keeps its checkpoint and answers its probes in the guest."""
    return {
        **scenario.kubelet.configuration(),
        "nodeName": node_name,
        "stateDir": state_dir,
        "metricsBindAddress": metrics,
        "cgroupDriver": "cgroupfs",
        "evictionHard": {"memory.available": EVICTION_HARD["memory.available"]},
        "logFormat": "json",
    }
