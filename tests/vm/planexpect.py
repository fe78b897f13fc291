"""Host side: what the kernel must show, derived from ``podpin plan --output json`` (for ``test_vm_agent.py``).

The planner is deterministic, so the expected values of the end-to-end tests are the plan of the same pods on
the guest's topology with the same configuration, turned here into the shapes the guest records: per pod
(``namespace/name``), per container, the CPUs, ``cpu.max`` and pod cgroup values podpin must write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.cpuset import CPUSet
from tests.vm.agentpods import CFS_PERIOD_US, PodSpec

__all__ = [
    "MAX",
    "Expected",
    "expected_cpu_max",
    "expected_pod_cgroups",
    "interim_sets",
    "pinned_pools",
    "plan_pod",
    "planned_cpus",
    "pod_key",
    "run_plan",
]

MAX = f"max {CFS_PERIOD_US}"
"""``cpu.max`` of a cgroup without quota, as the kernel prints it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """``podpin plan --output json`` for the pods present at ``--once`` (``initial``) and at the end (``every``)."""

    initial: Mapping[str, Any]
    every: Mapping[str, Any]


def run_plan(topology: Path, config: Path, manifests: list[Path]) -> Mapping[str, Any]:
    """``podpin plan --output json`` of ``manifests`` (admitted in this order) on ``topology`` with ``config``.

    Raises:
        AssertionError: ``podpin plan`` failed (with its stderr).
    """
    argv = [sys.executable, "-m", "agent", "plan", "--topology", str(topology), "--config", str(config)]
    proc = subprocess.run(
        [*argv, "--output", "json", *map(str, manifests)], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"podpin plan exited {proc.returncode}: {proc.stderr}")
    document: Mapping[str, Any] = json.loads(proc.stdout)
    return document


def plan_pod(plan: Mapping[str, Any], spec: PodSpec) -> Mapping[str, Any]:
    """The plan's entry for ``spec`` (found by uid).

    Raises:
        KeyError: the plan has no such pod.
    """
    for pod in plan["pods"]:
        if pod["uid"] == spec.uid:
            result: Mapping[str, Any] = pod
            return result
    raise KeyError(f"the plan has no pod {spec.namespace}/{spec.name}")


def pod_key(spec: PodSpec) -> str:
    """``namespace/name``: how observations and expectations name a pod."""
    return f"{spec.namespace}/{spec.name}"


def planned_cpus(plan: Mapping[str, Any], specs: tuple[PodSpec, ...]) -> dict[str, dict[str, str]]:
    """Per pod, per container: the CPUs the plan gives it (the node shared pool for node_shared containers)."""
    return {pod_key(s): {c["name"]: c["cpus"] for c in plan_pod(plan, s)["containers"]} for s in specs}


def interim_sets(plan: Mapping[str, Any], specs: tuple[PodSpec, ...]) -> dict[str, str]:
    """Where a pod's unidentified children (its sandbox) may run: its pod shared pool, else the node shared pool."""
    result = {}
    for spec in specs:
        shared = [c["cpus"] for c in plan_pod(plan, spec)["containers"] if c["pool"] == "pod_shared"]
        result[pod_key(spec)] = shared[0] if shared else plan["node"]["shared_pool"]
    return result


def pinned_pools(plan: Mapping[str, Any], specs: tuple[PodSpec, ...]) -> dict[str, dict[str, str]]:
    """The containers podpin writes a cpuset for (every container of a pod with a bubble or an exclusive one)."""
    result = {}
    for spec in specs:
        pod = plan_pod(plan, spec)
        if pod["bubble"] is not None or any(c["pool"] == "exclusive" for c in pod["containers"]):
            result[pod_key(spec)] = {c["name"]: c["cpus"] for c in pod["containers"]}
    return result


def expected_cpu_max(plan: Mapping[str, Any], specs: tuple[PodSpec, ...]) -> dict[str, dict[str, str]]:
    """``max`` where the plan says so (exclusive containers), else the quota the kubelet wrote."""
    result = {}
    for spec in specs:
        pod = plan_pod(plan, spec)
        result[pod_key(spec)] = {
            c["name"]: c["cpu_max"] or spec.container(c["name"]).kubelet_cpu_max for c in pod["containers"]
        }
    return result


def expected_pod_cgroups(plan: Mapping[str, Any], specs: tuple[PodSpec, ...]) -> dict[str, dict[str, str]]:
    """A managed pod's cgroup: its bubble (pod-level) or its containers' CPUs plus the node shared pool (classic),
    and ``cpu.max`` lifted to ``max`` when it has an exclusive container; other pods are left as the kubelet made them.
    """
    shared = CPUSet.parse(plan["node"]["shared_pool"])
    result = {}
    for spec in specs:
        pod = plan_pod(plan, spec)
        exclusive = any(c["pool"] == "exclusive" for c in pod["containers"])
        if pod["bubble"] is not None:
            cpus = pod["bubble"]
        elif exclusive:
            union = CPUSet()
            for c in pod["containers"]:
                union = union | CPUSet.parse(c["cpus"])
            cpus = str(union | shared)
        else:
            cpus = ""
        result[pod_key(spec)] = {"cpuset.cpus": cpus, "cpu.max": MAX if exclusive else spec.kubelet_cpu_max}
    return result
