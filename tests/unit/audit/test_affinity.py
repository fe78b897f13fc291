"""The affinity audit: which threads of a pinned container may run outside its planned CPUs.

Thread ids come from a fixture cgroup's ``cgroup.threads``; affinities from the
real psutil probe, reading this test process's own threads only.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agent.alloc import ContainerPlan, PodPlan, Pool
from agent.audit import AffinityAudit, AffinityFinding, PsutilProbe, StrayThread, stray_threads
from agent.cpuset import CPUSet
from tests.support.plans import container_plan, pod_plan

OWN = CPUSet(os.sched_getaffinity(0))
ELSEWHERE = CPUSet([max(OWN) + 1])


def test_stray_threads_are_those_reaching_outside() -> None:
    """A thread on a subset of its CPUs is fine; one reaching outside strays; a gone one (None) is skipped."""
    planned = CPUSet([2, 3, 4])
    affinities = {10: CPUSet([2, 3]), 11: CPUSet([2, 3, 4]), 12: CPUSet([1, 2]), 13: None, 14: CPUSet([7])}
    expected = (StrayThread(tid=12, affinity=CPUSet([1, 2])), StrayThread(tid=14, affinity=CPUSet([7])))
    assert expected == stray_threads(planned, affinities)


def _cgroup(tmp_path: Path, threads: str) -> Path:
    path = tmp_path / "cri-containerd-abc.scope"
    path.mkdir()
    (path / "cgroup.threads").write_text(threads)
    return path


def _audit(pod: PodPlan, container: ContainerPlan, path: Path) -> tuple[AffinityFinding, ...]:
    audit = AffinityAudit(PsutilProbe(), period=10.0)
    assert audit.due(100.0)
    audit.audit(pod, [(container, path)])
    return audit.finish()


def test_threads_inside_their_cpus_are_clean(tmp_path: Path) -> None:
    """This process's thread, planned on exactly its own affinity: audited, visible, no stray thread."""
    path = _cgroup(tmp_path, f"{threading.get_native_id()}\n")
    container = container_plan("app", Pool.EXCLUSIVE, OWN)
    (finding,) = _audit(pod_plan("db", [container]), container, path)
    assert ((), True, "app") == (finding.threads, finding.visible, finding.container)


def test_thread_outside_its_cpus_is_found(tmp_path: Path) -> None:
    """Planned on a CPU this process may not use: its thread strays, with its real affinity."""
    tid = threading.get_native_id()
    path = _cgroup(tmp_path, f"{tid}\n")
    container = container_plan("app", Pool.POD_SHARED, ELSEWHERE)
    (finding,) = _audit(pod_plan("db", [container]), container, path)
    assert ((StrayThread(tid=tid, affinity=OWN),), Pool.POD_SHARED) == (finding.threads, finding.pool)


def test_threads_of_another_pid_namespace_make_the_audit_blind(tmp_path: Path) -> None:
    """cgroup.threads lists 0 for threads this PID namespace cannot see: the finding says it saw none."""
    path = _cgroup(tmp_path, "0\n0\n")
    container = container_plan("app", Pool.EXCLUSIVE, ELSEWHERE)
    (finding,) = _audit(pod_plan("db", [container]), container, path)
    assert ((), False) == (finding.threads, finding.visible)


def test_node_shared_containers_and_gone_cgroups_are_skipped(tmp_path: Path) -> None:
    """A node-shared container is not audited, nor a container whose cgroup has gone."""
    shared = container_plan("side", Pool.NODE_SHARED, ELSEWHERE)
    gone = container_plan("app", Pool.EXCLUSIVE, ELSEWHERE)
    audit = AffinityAudit(PsutilProbe(), period=10.0)
    audit.due(0.0)
    audit.audit(pod_plan("db", [shared, gone]), [(shared, _cgroup(tmp_path, "1\n")), (gone, tmp_path / "gone")])
    assert () == audit.finish()


def test_audits_are_at_least_a_period_apart() -> None:
    """due() starts an audit when none ran for a period: at 0, not at 9.9, again at 10."""
    audit = AffinityAudit(PsutilProbe(), period=10.0)
    assert (True, False, True) == (audit.due(0.0), audit.due(9.9), audit.due(10.0))
