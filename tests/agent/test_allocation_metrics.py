"""The allocation counters mean what the kubelet's mean: attempts, failed attempts, aligned allocations.

``podpin_pinning_requests_total`` / ``podpin_pinning_errors_total`` count
exclusive-CPU allocations as the kubelet's CPU manager ``Allocate`` does (one per
container that asks for exclusive CPUs; a failed one is an error),
``podpin_container_aligned_compute_resources_total`` and its ``_failure`` twin
count the topology manager's NUMA alignment (``single-numa-node``) and the CPU
manager's whole-core alignment (``full-pcpus-only``) and uncore cache alignment, and a cgroup the kernel
refuses is a ``podpin_cgroup_write_errors_total{errno}``, never a pinning error.
Each test runs the agent once over a fixture node (pods from manifests, the
kernel emulation) and reads its registry.
"""

from __future__ import annotations

import errno
import platform
from pathlib import Path
from typing import Any

from agent import __version__
from agent.runner import Agent
from tests.support.agentfixture import AgentNode, make_node, sample
from tests.support.cgroupfs_builder import FaultyOps
from tests.support.podfactory import container, make_pod

PINNING = ("podpin_pinning_requests_total", "podpin_pinning_errors_total")
ALIGNED = "podpin_container_aligned_compute_resources_total"
MISALIGNED = "podpin_container_aligned_compute_resources_failure_total"


def _pod(name: str, *cpus: str, ts: int = 1) -> dict[str, Any]:
    """A Guaranteed pod with one running container per entry of ``cpus`` (``c0``, ``c1``...)."""
    containers = [container(f"c{i}", cpu=cpu, memory="1Gi") for i, cpu in enumerate(cpus)]
    return make_pod(
        name,
        containers=containers,
        states={c["name"]: "running" for c in containers},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def _run(tmp_path: Path, *pods: dict[str, Any], ops: Any = None, **config: Any) -> Agent:
    node = make_node(tmp_path)
    node.write_config(**config)
    for raw in pods:
        node.add_pod(raw)
    return node.run_once(ops)


def _pinning(agent: Agent) -> tuple[float | None, ...]:
    return tuple(sample(agent, name) for name in PINNING)


def _aligned(agent: Agent, scope: str, boundary: str) -> tuple[float | None, float | None]:
    labels = {"scope": scope, "boundary": boundary}
    return sample(agent, ALIGNED, **labels), sample(agent, MISALIGNED, **labels)


def test_one_request_per_exclusive_container(tmp_path: Path) -> None:
    """Two exclusive containers and a shared one (500m) are two pinning requests and no error."""
    agent = _run(tmp_path, _pod("db", "2", "4", "500m"))
    assert (2.0, 0.0) == _pinning(agent)


def test_smt_rejection_is_a_failed_request_and_a_physical_cpu_failure(tmp_path: Path) -> None:
    """full-pcpus-only: 2 CPUs admitted (aligned), then 3 CPUs refused (SMTAlignmentError): 2 requests, 1 error."""
    agent = _run(
        tmp_path,
        _pod("even", "2", ts=1),
        _pod("odd", "3", ts=2),
        cpuManagerPolicyOptions={"full-pcpus-only": "true"},
        topologyManagerScope="container",
    )
    expected = ((2.0, 1.0), (1.0, 1.0), 1.0)
    actual = (
        _pinning(agent),
        _aligned(agent, "container", "physical_cpu"),
        sample(agent, "podpin_admission_errors_total", reason="SMTAlignmentError"),
    )
    assert expected == actual


def test_single_numa_node_counts_alignment_per_container(tmp_path: Path) -> None:
    """single-numa-node, container scope: two containers aligned; a 20-CPU container fits no node: one failure.

    The refused container never reaches the CPU manager, so it is no pinning request, as in the kubelet.
    """
    agent = _run(
        tmp_path,
        _pod("fits", "2", "2", ts=1),
        _pod("huge", "20", ts=2),
        topologyManagerPolicy="single-numa-node",
        topologyManagerScope="container",
    )
    expected = ((2.0, 0.0), (2.0, 1.0), (0.0, 0.0))
    actual = (_pinning(agent), _aligned(agent, "container", "numa_node"), _aligned(agent, "pod", "numa_node"))
    assert expected == actual


def test_single_numa_node_pod_scope_counts_once_per_pod(tmp_path: Path) -> None:
    """single-numa-node, pod scope: a two-container pod is one aligned pod; a pod too big for a node one failure."""
    agent = _run(
        tmp_path,
        _pod("fits", "2", "2", ts=1),
        _pod("huge", "10", "10", ts=2),
        topologyManagerPolicy="single-numa-node",
        topologyManagerScope="pod",
    )
    expected = ((2.0, 0.0), (1.0, 1.0), (0.0, 0.0))
    actual = (_pinning(agent), _aligned(agent, "pod", "numa_node"), _aligned(agent, "container", "numa_node"))
    assert expected == actual


def test_best_effort_counts_no_alignment(tmp_path: Path) -> None:
    """best-effort guarantees no alignment, so the kubelet counts none: the series stay at 0."""
    agent = _run(tmp_path, _pod("db", "2"))
    assert ((0.0, 0.0), (0.0, 0.0)) == (_aligned(agent, "container", "numa_node"), _aligned(agent, "pod", "numa_node"))


def test_uncore_cache_counts_allocations_on_one_uncore_cache(tmp_path: Path) -> None:
    """Each new exclusive allocation whose CPUs share one L3 is counted, whatever the policy; one spanning both
    sockets' L3s (20 CPUs, 16 per socket) is not, and no failure series exists for this boundary."""
    agent = _run(tmp_path, _pod("db", "2", "4", ts=1), _pod("wide", "20", ts=2))
    expected = ((3.0, 0.0), (2.0, None))
    assert expected == (_pinning(agent), _aligned(agent, "container", "uncore_cache"))


def test_cgroup_fault_is_a_cgroup_write_error_not_a_pinning_error(tmp_path: Path) -> None:
    """The kernel refuses the container's cpuset.cpus (EBUSY): a cgroup_write_errors{errno=EBUSY}, no pinning error."""
    node: AgentNode = make_node(tmp_path)
    raw = _pod("db", "2")
    node.add_pod(raw)
    faults = FaultyOps(
        node.tree.ops(),
        write_errors={node.container_cgroup(raw, "c0") / "cpuset.cpus": errno.EBUSY},
        read_errors={},
        before_write={},
    )
    agent = node.run_once(faults)
    expected = ((1.0, 0.0), 1.0)
    actual = (_pinning(agent), sample(agent, "podpin_cgroup_write_errors_total", errno="EBUSY"))
    assert expected == actual


def test_build_info(tmp_path: Path) -> None:
    """podpin_build_info is 1, labelled with podpin's version and the running Python's."""
    agent = _run(tmp_path)
    actual = sample(agent, "podpin_build_info", version=__version__, python=platform.python_version())
    assert 1.0 == actual
