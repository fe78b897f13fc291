"""Metrics: event metrics on a fresh registry, scrape-time state metrics from a real planner's snapshot, promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from agent.alloc import Decision, Planner, Pool
from agent.alloc.tally import AllocationEvent
from agent.config import config_from_mapping
from agent.metrics import (
    ADMISSION_BUCKETS,
    PIN_LATENCY_BUCKETS,
    AgentMetrics,
    PlanCollector,
    UsageKey,
)
from agent.pods.model import PodView, pod_from_dict
from agent.reconcile import Snapshot
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

# A 2-socket, 2-NUMA-node machine with 8 single-thread cores per node: NUMA 0 = CPUs 0-7, NUMA 1 = 8-15.
CONFIG = {"reservedSystemCPUs": "0", "topologyManagerPolicy": "single-numa-node"}


def new_planner() -> Planner:
    return Planner(machine(threads=1), config_from_mapping(CONFIG, env={}).planner)


def view(*args: Any, **kwargs: Any) -> PodView:
    return pod_from_dict(make_pod(*args, **kwargs))


def kep() -> PodView:
    """5-CPU bubble on NUMA 0 = {1..5}: c1 exclusive {1,2,3}, c2 and c3 share {4,5}."""
    return view(
        "kep",
        containers=[
            container("c1", cpu="3", memory="1Gi"),
            container("c2", cpu_request="500m", cpu_limit="1", memory="1Gi"),
            container("c3"),
        ],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )


def guaranteed() -> PodView:
    """A classic Guaranteed pod: container a gets {6,7} exclusive from the node."""
    return view("db", containers=[container("a", cpu="2", memory="1Gi")], namespace="prod")


def burstable() -> PodView:
    """A Burstable pod: runs in the node shared pool."""
    return view("web", containers=[container("a", cpu_request="100m")])


def no_room() -> PodView:
    """Exclusive containers take the whole budget: rejected (TopologyAffinityError) under single-numa-node."""
    return view(
        "full",
        containers=[container("c1", cpu="3", memory="1Gi"), container("c2", cpu="2", memory="1Gi"), container("c3")],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )


def snapshot_of(planner: Planner, pods: list[PodView], usage: dict[UsageKey, float] | None = None) -> Snapshot:
    """Admit the pods in order and take the snapshot the reconciler would publish."""
    decisions: dict[str, Decision] = {}
    for pod in pods:
        decisions[pod.uid] = planner.admit(pod)
    return Snapshot(
        state=planner.snapshot(),
        plan=planner.plan(pods, decisions),
        topology=planner.topology,
        usage=usage or {},
    )


def node_snapshot() -> Snapshot:
    """The four-pod node most tests read."""
    return snapshot_of(
        new_planner(),
        [kep(), guaranteed(), burstable(), no_room()],
        usage={(Pool.POD_SHARED, "default", "kep"): 12.5, (Pool.NODE_SHARED, "default", "web"): 3.25},
    )


class TestStateMetrics:
    def test_pool_sizes_as_the_kubelet_counts_them(self) -> None:
        """Shared pool {0,8-15} minus reserved {0} = 8000 millicores; exclusive = slices {1,2,3} + {6,7} = 5: kep's
        pod shared pool {4,5} is not exclusive (failed before: 7, the whole bubble)."""
        metrics = AgentMetrics(node_snapshot)
        actual = (
            metrics.registry.get_sample_value("podpin_shared_pool_size_millicores"),
            metrics.registry.get_sample_value("podpin_exclusive_cpu_allocation_count"),
        )
        assert (8000.0, 5.0) == actual

    def test_per_numa_node_every_node_present(self) -> None:
        """Exclusive CPUs all on NUMA 0 (NUMA 1 reported as 0); the node shared pool without the reserved CPU 0:
        none on NUMA 0, {8-15} on NUMA 1, adding up to the pool size (failed before: NUMA 0 counted CPU 0)."""
        registry = AgentMetrics(node_snapshot).registry
        actual = {
            (name, node): registry.get_sample_value(name, {"numa_node": node})
            for name in ("podpin_allocation_per_numa", "podpin_numa_shared_cpus")
            for node in ("0", "1")
        }
        expected = {
            ("podpin_allocation_per_numa", "0"): 5.0,
            ("podpin_allocation_per_numa", "1"): 0.0,
            ("podpin_numa_shared_cpus", "0"): 0.0,
            ("podpin_numa_shared_cpus", "1"): 8.0,
        }
        assert expected == actual

    def test_node_cpus_partition_each_numa_node_by_pool(self) -> None:
        """NUMA 0 (CPUs 0-7): exclusive {1,2,3,6,7}, kep's pool {4,5}, reserved {0}; NUMA 1: all node shared. The
        pools add up to the NUMA node's CPUs."""
        registry = AgentMetrics(node_snapshot).registry
        actual = {
            (pool, node): registry.get_sample_value("podpin_node_cpus", {"pool": pool, "numa_node": node})
            for pool in ("exclusive", "pod_shared", "node_shared")
            for node in ("0", "1")
        }
        actual |= {("reserved", n): registry.get_sample_value("podpin_reserved_cpus", {"numa_node": n}) for n in "01"}
        expected = {
            ("exclusive", "0"): 5.0,
            ("pod_shared", "0"): 2.0,
            ("node_shared", "0"): 0.0,
            ("reserved", "0"): 1.0,
            ("exclusive", "1"): 0.0,
            ("pod_shared", "1"): 0.0,
            ("node_shared", "1"): 8.0,
            ("reserved", "1"): 0.0,
        }
        assert expected == actual

    def test_an_init_containers_slice_stays_in_the_pod_shared_pool(self) -> None:
        """A finished init container's slice returns to its pod's shared pool: the pool is the bubble minus the
        long-running slices (failed before: the init slice was taken out of the pool and counted exclusive)."""
        pod = view(
            "migrate",
            init_containers=[container("schema", cpu="1", memory="1Gi")],
            containers=[container("db", cpu="2", memory="1Gi"), container("proxy")],
            pod_resources=resources(cpu="3", memory="3Gi"),
        )
        registry = AgentMetrics(lambda: snapshot_of(new_planner(), [pod])).registry
        assert (2.0, 1.0) == (
            registry.get_sample_value("podpin_exclusive_cpu_allocation_count"),
            registry.get_sample_value("podpin_pod_shared_pool_cpus", {"namespace": "default", "pod": "migrate"}),
        )

    def test_containers_by_assignment_type(self) -> None:
        """db/a node_exclusive, kep/c1 pod_exclusive, kep/c2+c3 pod_shared, web/a + the rejected pod's 3 node_shared."""
        registry = AgentMetrics(node_snapshot).registry
        actual = {
            kind: registry.get_sample_value("podpin_containers", {"assignment_type": kind})
            for kind in ("node_exclusive", "pod_exclusive", "pod_shared", "node_shared")
        }
        assert {"node_exclusive": 1.0, "pod_exclusive": 1.0, "pod_shared": 2.0, "node_shared": 4.0} == actual

    def test_all_assignment_types_present_on_an_empty_node(self) -> None:
        """With no pods every assignment type is exported as 0, and the pods gauge too."""
        registry = AgentMetrics(lambda: snapshot_of(new_planner(), [])).registry
        actual = [
            registry.get_sample_value("podpin_containers", {"assignment_type": kind})
            for kind in ("node_exclusive", "pod_exclusive", "pod_shared", "node_shared")
        ] + [registry.get_sample_value("podpin_pods", {"state": s}) for s in ("admitted", "rejected")]
        assert [0.0] * 6 == actual

    def test_pods_by_admission_outcome(self) -> None:
        """Three admitted pods and one rejected."""
        registry = AgentMetrics(node_snapshot).registry
        actual = [registry.get_sample_value("podpin_pods", {"state": s}) for s in ("admitted", "rejected")]
        assert [3.0, 1.0] == actual

    def test_pod_shared_pool_per_pod(self) -> None:
        """Only pods with a bubble have a pod shared pool: kep's is {4,5}."""
        text = generate_latest(AgentMetrics(node_snapshot).registry).decode()
        actual = [line for line in text.splitlines() if line.startswith("podpin_pod_shared_pool_cpus")]
        assert ['podpin_pod_shared_pool_cpus{namespace="default",pod="kep"} 2.0'] == actual

    def test_pod_shared_pool_without_a_shared_container(self) -> None:
        """A bubble of 5 with exclusive slices of 3 and 1 leaves a pool of 1 CPU that no container uses yet."""
        pod = view(
            "all-exclusive",
            containers=[container("c1", cpu="3", memory="1Gi"), container("c2", cpu="1", memory="1Gi")],
            pod_resources=resources(cpu="5", memory="5Gi"),
        )
        registry = AgentMetrics(lambda: snapshot_of(new_planner(), [pod])).registry
        actual = registry.get_sample_value(
            "podpin_pod_shared_pool_cpus", {"namespace": "default", "pod": "all-exclusive"}
        )
        assert 1.0 == actual

    def test_same_name_pods_are_summed_not_duplicated(self) -> None:
        """A recreated pod (same namespace/name, new uid) next to its unreleased predecessor gives one series: 1 + 2."""
        first = view(
            "sts-0",
            containers=[container("c1", cpu="1", memory="1Gi"), container("c2")],
            pod_resources=resources(cpu="2", memory="2Gi"),
            uid="u1",
        )
        second = view(
            "sts-0",
            containers=[container("c1", cpu="1", memory="1Gi"), container("c2")],
            pod_resources=resources(cpu="3", memory="2Gi"),
            uid="u2",
        )
        text = generate_latest(AgentMetrics(lambda: snapshot_of(new_planner(), [first, second])).registry).decode()
        actual = [line for line in text.splitlines() if line.startswith("podpin_pod_shared_pool_cpus")]
        assert ['podpin_pod_shared_pool_cpus{namespace="default",pod="sts-0"} 3.0'] == actual

    def test_cpu_usage_counter_family(self) -> None:
        """``usage`` becomes podpin_pool_cpu_usage_seconds_total{pool,namespace,pod}, a counter, for the pinned pools
        only: node_shared usage per pod would be one series per pod of the node (failed before: it was exported)."""
        registry = AgentMetrics(node_snapshot).registry
        actual = [
            registry.get_sample_value(
                "podpin_pool_cpu_usage_seconds_total", {"pool": "pod_shared", "namespace": "default", "pod": "kep"}
            ),
            registry.get_sample_value(
                "podpin_pool_cpu_usage_seconds_total", {"pool": "node_shared", "namespace": "default", "pod": "web"}
            ),
        ]
        text = generate_latest(registry).decode()
        assert ([12.5, None], True) == (actual, "# TYPE podpin_pool_cpu_usage_seconds_total counter" in text)

    def test_nothing_carries_over_between_scrapes(self) -> None:
        """After kep is released its series are gone and the pools grow back, with no reset by anyone."""
        planner = new_planner()
        current = [snapshot_of(planner, [kep(), guaranteed()], usage={(Pool.POD_SHARED, "default", "kep"): 1.0})]
        registry = AgentMetrics(lambda: current[0]).registry
        before = (
            registry.get_sample_value("podpin_pod_shared_pool_cpus", {"namespace": "default", "pod": "kep"}),
            registry.get_sample_value("podpin_exclusive_cpu_allocation_count"),
        )
        planner.release(kep().uid)
        current[0] = snapshot_of(planner, [guaranteed()])
        after = (
            registry.get_sample_value("podpin_pod_shared_pool_cpus", {"namespace": "default", "pod": "kep"}),
            registry.get_sample_value("podpin_exclusive_cpu_allocation_count"),
            registry.get_sample_value(
                "podpin_pool_cpu_usage_seconds_total", {"pool": "pod_shared", "namespace": "default", "pod": "kep"}
            ),
            registry.get_sample_value("podpin_shared_pool_size_millicores"),
        )
        assert ((2.0, 5.0), (None, 2.0, None, 13000.0)) == (before, after)

    def test_no_state_metrics_before_the_first_pass(self) -> None:
        """A None snapshot yields no state samples (a 0 pool would be a lie); the process metrics are still there."""
        registry = AgentMetrics(lambda: None).registry
        actual = (
            registry.get_sample_value("podpin_shared_pool_size_millicores"),
            registry.get_sample_value("process_cpu_seconds_total") is not None,
        )
        assert (None, True) == actual


class TestPlanCollector:
    def test_describe_names_the_families_without_calling_the_snapshot(self) -> None:
        """Registering uses describe(): the snapshot callable is not called, and the names are the collector's."""
        calls: list[int] = []

        def source() -> Snapshot | None:
            calls.append(1)
            return None

        collector = PlanCollector(source)
        CollectorRegistry().register(collector)
        names = [(family.name, family.type, len(family.samples)) for family in collector.describe()]
        expected = [
            ("podpin_shared_pool_size_millicores", "gauge", 0),
            ("podpin_exclusive_cpu_allocation_count", "gauge", 0),
            ("podpin_allocation_per_numa", "gauge", 0),
            ("podpin_numa_shared_cpus", "gauge", 0),
            ("podpin_node_cpus", "gauge", 0),
            ("podpin_reserved_cpus", "gauge", 0),
            ("podpin_containers", "gauge", 0),
            ("podpin_pod_shared_pool_cpus", "gauge", 0),
            ("podpin_pods", "gauge", 0),
            ("podpin_pool_cpu_usage_seconds", "counter", 0),
        ]
        assert (expected, []) == (names, calls)

    def test_snapshot_read_once_per_scrape(self) -> None:
        """One scrape calls the snapshot callable exactly once, so every family describes the same pass."""
        calls: list[int] = []
        snap = node_snapshot()

        def source() -> Snapshot:
            calls.append(1)
            return snap

        registry = AgentMetrics(source).registry
        generate_latest(registry)
        assert 1 == len(calls)


class TestEventMetrics:
    def test_counters_and_gauges(self) -> None:
        """The reconciler's updates show under the contract's names."""
        metrics = AgentMetrics(lambda: None)
        metrics.pinning_requests.inc(3)
        metrics.pinning_errors.inc()
        metrics.admission_requests.inc(4)
        metrics.admission_errors.labels(reason="SMTAlignmentError").inc()
        metrics.cgroup_writes.labels(file="cpuset.cpus", result="ok").inc(2)
        metrics.cgroup_writes.labels(file="cpu.max", result="ENOENT").inc()
        metrics.drift_repairs.inc()
        metrics.events.labels(type="Warning", result="posted").inc()
        metrics.malformed_pods.labels(reason="InvalidQuantity").inc()
        metrics.source_errors.inc()
        metrics.ready.set(1)
        metrics.kubelet_pinning.set(1)
        r = metrics.registry
        actual = [
            r.get_sample_value("podpin_pinning_requests_total"),
            r.get_sample_value("podpin_pinning_errors_total"),
            r.get_sample_value("podpin_admission_requests_total"),
            r.get_sample_value("podpin_admission_errors_total", {"reason": "SMTAlignmentError"}),
            r.get_sample_value("podpin_cgroup_writes_total", {"file": "cpuset.cpus", "result": "ok"}),
            r.get_sample_value("podpin_cgroup_writes_total", {"file": "cpu.max", "result": "ENOENT"}),
            r.get_sample_value("podpin_drift_repairs_total"),
            r.get_sample_value("podpin_events_total", {"type": "Warning", "result": "posted"}),
            r.get_sample_value("podpin_malformed_pods_total", {"reason": "InvalidQuantity"}),
            r.get_sample_value("podpin_source_errors_total"),
            r.get_sample_value("podpin_ready"),
            r.get_sample_value("podpin_kubelet_pinning"),
        ]
        assert [3.0, 1.0, 4.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0] == actual

    def test_no_created_series(self) -> None:
        """Counters and histograms expose no ``_created`` series (failed before: one per counter child)."""
        metrics = AgentMetrics(node_snapshot)
        metrics.pinning_requests.inc()
        metrics.admission_duration.observe(0.001)
        text = generate_latest(metrics.registry).decode()
        assert [] == [line for line in text.splitlines() if "_created" in line]

    def test_memory_pinning_counts(self) -> None:
        """Memory allocation events count as the kubelet's memory_manager_pinning_requests/errors_total."""
        metrics = AgentMetrics(lambda: None)
        events = (AllocationEvent.memory_pinning(ok=True), AllocationEvent.memory_pinning(ok=False))
        metrics.count_allocations(events)
        r = metrics.registry
        assert (2.0, 1.0, 0.0) == (
            r.get_sample_value("podpin_memory_pinning_requests_total"),
            r.get_sample_value("podpin_memory_pinning_errors_total"),
            r.get_sample_value("podpin_pinning_requests_total"),
        )

    def test_closed_label_sets_start_at_zero(self) -> None:
        """Every kubelet reason and every Event type x result is exported as 0 before anything happens."""
        r = AgentMetrics(lambda: None).registry
        reasons = [
            r.get_sample_value("podpin_admission_errors_total", {"reason": reason})
            for reason in (
                "TopologyAffinityError",
                "SMTAlignmentError",
                "EmptyPodSharedPoolError",
                "UnexpectedAdmissionError",
            )
        ]
        events = [
            r.get_sample_value("podpin_events_total", {"type": t, "result": res})
            for t in ("Normal", "Warning")
            for res in ("posted", "patched", "failed", "dropped")
        ]
        assert [0.0] * 12 == reasons + events

    def test_histograms_in_seconds(self) -> None:
        """A 0.3 ms admission lands in the 0.5 ms bucket, not the 0.25 ms one; a 7 s pin below 10 s."""
        metrics = AgentMetrics(lambda: None)
        metrics.admission_duration.observe(0.0003)
        metrics.pin_latency.observe(7.0)
        metrics.reconcile_duration.observe(0.2)
        r = metrics.registry
        actual = [
            r.get_sample_value("podpin_admission_duration_seconds_bucket", {"le": "0.00025"}),
            r.get_sample_value("podpin_admission_duration_seconds_bucket", {"le": "0.0005"}),
            r.get_sample_value("podpin_pin_latency_seconds_bucket", {"le": "5.0"}),
            r.get_sample_value("podpin_pin_latency_seconds_bucket", {"le": "10.0"}),
            r.get_sample_value("podpin_reconcile_duration_seconds_count"),
        ]
        assert [0.0, 1.0, 0.0, 1.0, 1.0] == actual

    def test_bucket_ranges(self) -> None:
        """Admission buckets span 0.1 ms .. 1 s, pin latency 0.5 ms .. 10 s."""
        actual = (ADMISSION_BUCKETS[0], ADMISSION_BUCKETS[-1], PIN_LATENCY_BUCKETS[0], PIN_LATENCY_BUCKETS[-1])
        assert (0.0001, 1.0, 0.0005, 10.0) == actual

    def test_registries_are_independent_and_not_global(self) -> None:
        """Two AgentMetrics never share a counter, and nothing lands in the global REGISTRY."""
        one, two = AgentMetrics(lambda: None), AgentMetrics(lambda: None)
        one.pinning_requests.inc()
        actual = (
            one.registry.get_sample_value("podpin_pinning_requests_total"),
            two.registry.get_sample_value("podpin_pinning_requests_total"),
            REGISTRY.get_sample_value("podpin_pinning_requests_total"),
        )
        assert (1.0, 0.0, None) == actual


# Every metric of the configuration contract, with its exposition type.
CONTRACT = {
    "podpin_pinning_requests_total": "counter",
    "podpin_pinning_errors_total": "counter",
    "podpin_shared_pool_size_millicores": "gauge",
    "podpin_exclusive_cpu_allocation_count": "gauge",
    "podpin_allocation_per_numa": "gauge",
    "podpin_containers": "gauge",
    "podpin_pod_shared_pool_cpus": "gauge",
    "podpin_admission_duration_seconds": "histogram",
    "podpin_admission_requests_total": "counter",
    "podpin_admission_errors_total": "counter",
    "podpin_cgroup_writes_total": "counter",
    "podpin_drift_repairs_total": "counter",
    "podpin_pin_latency_seconds": "histogram",
    "podpin_reconcile_duration_seconds": "histogram",
    "podpin_pool_cpu_usage_seconds_total": "counter",
    "podpin_events_total": "counter",
    "podpin_ready": "gauge",
    "podpin_kubelet_pinning": "gauge",
    "podpin_cgroup_write_errors_total": "counter",
    "podpin_container_aligned_compute_resources_total": "counter",
    "podpin_container_aligned_compute_resources_failure_total": "counter",
    "podpin_build_info": "gauge",
}


class TestExposition:
    def test_every_contract_metric_is_exposed_with_its_type(self) -> None:
        """The text exposition holds each contract name with the contract's type."""
        text = generate_latest(AgentMetrics(node_snapshot).registry).decode()
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))
        actual = {name: types.get(name) for name in CONTRACT}
        assert CONTRACT == actual

    def test_promtool_check_metrics(self) -> None:
        """promtool parses the whole exposition; its one finding is the contract's kubelet-style ``_count`` gauge."""
        promtool = shutil.which("promtool")
        assert promtool is not None, "promtool is missing: apt-get install -y prometheus (Debian) provides it"
        metrics = AgentMetrics(node_snapshot)
        metrics.cgroup_writes.labels(file="cpuset.cpus", result="ok").inc()
        metrics.malformed_pods.labels(reason="InvalidQuantity").inc()
        text = generate_latest(metrics.registry)
        result = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
        )
        actual = (result.returncode, (result.stdout + result.stderr).decode())
        expected = (
            3,
            (
                'podpin_exclusive_cpu_allocation_count non-histogram and non-summary metrics should not have "_count" '
                "suffix\n"
            ),
        )
        assert expected == actual
