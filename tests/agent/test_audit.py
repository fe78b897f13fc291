"""The node audits in the agent: stray threads of pinned containers, interference on exclusive CPUs.

The agent runs once over a fixture node (pods from manifests). For the
affinity audit, a container cgroup's ``cgroup.threads`` lists this test
process's own thread, whose real affinity (read with psutil) is compared with
the CPUs the plan gives the container. For interference, ``--proc-root`` points
at a fixture procfs whose ``stat`` holds chosen per-CPU times.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from prometheus_client.registry import CollectorRegistry
from structlog.testing import capture_logs

from agent.alloc import AssignmentType, Pool
from agent.alloc.tally import AlignBoundary, AlignScope
from agent.cpuset import CPUSet
from tests.support.agentfixture import kubeconfig, make_node, sample
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod
from tests.support.procfs_builder import write_proc_stat

DB = make_pod(
    "db",
    containers=[container("app", cpu="2", memory="1Gi"), container("side", cpu="500m", memory="1Gi")],
    states={"app": "running", "side": "running"},
)
OWN = CPUSet(os.sched_getaffinity(0))


def test_a_thread_outside_its_cpus_is_counted_and_logged(tmp_path: Path) -> None:
    """The container's thread may run on this machine's CPUs, not on its planned slice: one violation, logged."""
    node = make_node(tmp_path)
    node.add_pod(DB)
    tid = threading.get_native_id()
    (node.container_cgroup(DB, "app") / "cgroup.threads").write_text(f"{tid}\n")
    with capture_logs() as logs:
        agent = node.run_once()
    planned = agent.reconciler.snapshot.plan.pods[0].container("app").cpus if agent.reconciler.snapshot else None
    found = [
        (line["container"], line["cpus"], line["threads"]) for line in logs if line["event"] == "affinity.violation"
    ]
    expected_found = [("app", str(planned), {tid: str(OWN)})] if planned is not None and not OWN <= planned else []
    expected = (float(len(expected_found)), 0.0, 1.0, expected_found)
    actual = (
        sample(agent, "podpin_affinity_violations", pool="exclusive"),
        sample(agent, "podpin_affinity_violations", pool="pod_shared"),
        sample(agent, "podpin_affinity_audits_total"),
        found,
    )
    assert expected == actual
    assert [] != expected_found, f"this machine's affinity {OWN} lies inside the planned set {planned}"


def test_interference_is_exposed_for_exclusive_cpus_only(tmp_path: Path) -> None:
    """irq/softirq/steal seconds appear for the two exclusive CPUs, each with its owner; a shared CPU has none."""
    node = make_node(tmp_path)
    node.add_pod(DB)
    online = CPUSet.parse((node.sysfs / "devices/system/cpu/online").read_text())
    write_proc_stat(tmp_path / "proc", {cpu: (cpu + 0.5, cpu + 0.25, 0.75) for cpu in online})
    agent = node.run_once(proc_root=tmp_path / "proc")
    snapshot = agent.reconciler.snapshot
    assert snapshot is not None
    slice_ = snapshot.plan.pods[0].container("app").cpus
    shared = min(online - slice_)

    def times(cpu: int) -> tuple[float | None, ...]:
        name = "podpin_exclusive_cpu_interference_seconds_total"
        return tuple(sample(agent, name, cpu=str(cpu), mode=mode) for mode in ("irq", "softirq", "steal"))

    def owner(cpu: int) -> float | None:
        labels = {"cpu": str(cpu), "namespace": "default", "pod": "db", "container": "app", "pool": "exclusive"}
        return sample(agent, "podpin_exclusive_cpu_owner", **labels)

    expected = [(cpu + 0.5, cpu + 0.25, 0.75, 1.0) for cpu in slice_] + [(None, None, None, None)]
    actual = [(*times(cpu), owner(cpu)) for cpu in [*slice_, shared]]
    assert (2, expected) == (len(slice_), actual)


def test_violation_is_a_warning_event_on_the_pod(tmp_path: Path) -> None:
    """Through the API server: the pod gets one PodpinAffinityViolation Warning naming the container and thread."""
    node = make_node(tmp_path)
    tid = threading.get_native_id()
    with ApiServerEmulator() as api:
        api.add_pod(DB)
        node.add_pod(DB, manifest=False)
        (node.container_cgroup(DB, "app") / "cgroup.threads").write_text(f"{tid}\n")
        node.run_once(pods_dir=None, kubeconfig=str(kubeconfig(tmp_path / "kubeconfig", api.url)))
        warnings = [e for e in api.events if e["type"] == "Warning"]
    notes = [(e["involvedObject"]["name"], e["reason"], f"{tid} on {OWN}" in str(e["message"])) for e in warnings]
    assert [("db", "PodpinAffinityViolation", True)] == notes


def _label_values(registry: CollectorRegistry, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in registry.collect()
        for sample in family.samples
        if label in sample.labels and family.name.startswith("podpin_")
    }


def test_label_values_are_the_vocabulary(tmp_path: Path) -> None:
    """Every pool, assignment_type, scope and boundary label value the agent exposes is its StrEnum's value."""
    node = make_node(tmp_path)
    node.add_pod(DB)
    online = CPUSet.parse((node.sysfs / "devices/system/cpu/online").read_text())
    write_proc_stat(tmp_path / "proc", dict.fromkeys(online, (0.0, 0.0, 0.0)))
    registry = node.run_once(proc_root=tmp_path / "proc").metrics.registry
    vocabulary: dict[str, set[str]] = {
        "pool": {str(v) for v in Pool},
        "assignment_type": {str(v) for v in AssignmentType},
        "scope": {str(v) for v in AlignScope},
        "boundary": {str(v) for v in AlignBoundary},
    }
    found = {label: _label_values(registry, label) for label in vocabulary}
    assert dict.fromkeys(vocabulary, True) == {label: found[label] <= vocabulary[label] for label in vocabulary}
    assert {"exclusive", "pod_shared"} <= found["pool"]
