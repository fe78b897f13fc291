"""Prometheus metrics of the agent: event counters and a collector that reads the latest snapshot.

Two kinds of metric live here, for two reasons (``docs/style.md``, "Logging and metrics"):

* **Events** (admissions, pinning attempts, cgroup writes, drift repairs,
  latencies) happen once and are counted where the reconciler records the
  outcome. They are plain ``Counter``/``Histogram``/``Gauge`` objects, attributes
  of :class:`AgentMetrics`, on that object's own registry.
* **State** (pool sizes, exclusive CPUs per NUMA node, containers by assignment
  type, CPU usage per pool) is a function of the node's allocations. Keeping it
  in gauges the reconciler sets would let a missed update show a stale value
  forever; instead :class:`PlanCollector` computes every family from the latest
  pass (:class:`PassView`: the reconciler's snapshot) at scrape time, so nothing carries over from one scrape to
  the next and a pod that is gone simply has no series.

Each :class:`AgentMetrics` owns a fresh ``CollectorRegistry`` (never the global
``REGISTRY``), so tests build as many as they like and the agent exposes exactly
what is registered here. Multiprocess mode is not used: the agent is a single
process.

Metric names are fixed by the agent's configuration contract; the kubelet's own
names (``kubelet_cpu_manager_*``, ``resource_manager_*``) are the model, with
the ``podpin_`` prefix and seconds instead of milliseconds.
"""

from __future__ import annotations

import platform
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from agent import __version__
from agent.alloc import AssignmentType, NodeState, Plan, PodPlan, Pool, assignment_type
from agent.alloc.cpumanager.restore import StaleCause
from agent.alloc.tally import AlignBoundary, AlignScope, AllocationEvent, EventKind
from agent.cpuset import CPUSet
from agent.fault_boundary import Stage
from agent.pods import ContainerKind
from agent.runtime import IdentityErrorReason, IdentitySource
from agent.topology import Topology

__all__ = [
    "AgentMetrics",
    "PassView",
    "PlanCollector",
    "UsageKey",
    "POD_STATES",
    "USAGE_POOLS",
    "ADMISSION_ERROR_REASONS",
    "EVENT_TYPES",
    "EVENT_RESULTS",
    "SET_ASIDE_REASONS",
    "HTTP_DROP_REASONS",
    "ALIGNMENTS",
    "CGROUP_ERROR_KINDS",
    "AUDITED_POOLS",
    "IDENTITY_SOURCES",
    "IDENTITY_ERROR_REASONS",
    "CLAIM_REFUSED_REASONS",
    "CONDITION_RESULTS",
    "ADMISSION_BUCKETS",
    "PIN_LATENCY_BUCKETS",
    "RECONCILE_BUCKETS",
]

NAMESPACE = "podpin"

UsageKey = tuple[Pool, str, str]
"""``(pool, namespace, pod)``: the key of one CPU usage counter."""
#: ``podpin_pods{state}`` values.
POD_STATES = ("admitted", "rejected")
#: The pools whose usage is exported per pod: the pinned ones. A pinned pod holds at least one CPU of its own, so
#: there are at most two series per CPU of the node; the node shared pool's usage per container is cAdvisor's
#: ``container_cpu_usage_seconds_total`` (one series per pod of the node would churn with every pod).
USAGE_POOLS = (Pool.EXCLUSIVE, Pool.POD_SHARED)
#: The kubelet's admission failure reasons; their ``podpin_admission_errors_total`` series start at 0.
ADMISSION_ERROR_REASONS = (
    "TopologyAffinityError",
    "SMTAlignmentError",
    "EmptyPodSharedPoolError",
    "UnexpectedAdmissionError",
)
#: Kubernetes Event types (``podpin_events_total{type}``).
EVENT_TYPES = ("Normal", "Warning")
#: What happened to a recorded Event (``agent.kube.events.EventOutcome``).
EVENT_RESULTS = ("posted", "patched", "failed", "dropped")
#: How a new container was named (``podpin_container_pins_total{source}``).
IDENTITY_SOURCES = tuple(IdentitySource)
#: Why a runtime bundle named no container (``podpin_runtime_identity_errors_total{reason}``).
IDENTITY_ERROR_REASONS = tuple(IdentityErrorReason)

#: Why a checkpoint was set aside at start (``podpin_checkpoints_set_aside_total{reason}``).
SET_ASIDE_REASONS = ("corrupt", "invalid")
#: Why the HTTP server closed a connection without answering (``podpin_http_connections_dropped_total{reason}``).
HTTP_DROP_REASONS = ("capacity", "deadline", "too_large")
#: What happened to a wanted pod condition (``podpin_condition_patches_total{result}``; agent/kube/conditions.py).
CONDITION_RESULTS = ("patched", "gone", "failed")
#: Why a pod was kept off a cgroup it claimed (``cgroup_claims_refused``).
CLAIM_REFUSED_REASONS = ("mirror_not_node_owned", "mirror_owner_uid_mismatch", "cgroup_taken")

#: The ``(scope, boundary)`` pairs podpin counts, as the kubelet's ``container_aligned_compute_resources_count``:
#: NUMA alignment per container (container scope) or per pod (pod scope) under ``single-numa-node``, and whole
#: physical cores per container allocation under ``full-pcpus-only``, and new container allocations on one uncore
#: cache (counted only when aligned, as the kubelet does).
ALIGNMENTS = (
    (AlignScope.CONTAINER, AlignBoundary.NUMA_NODE),
    (AlignScope.POD, AlignBoundary.NUMA_NODE),
    (AlignScope.CONTAINER, AlignBoundary.PHYSICAL_CPU),
    (AlignScope.CONTAINER, AlignBoundary.UNCORE_CACHE),
)
#: ``podpin_affinity_violations{pool}`` values: the pools whose containers hold sets of their own.
AUDITED_POOLS = (Pool.EXCLUSIVE, Pool.POD_SHARED)
#: ``podpin_cgroup_write_errors_total{errno}`` values that are not an OS errno name: a read-back that differs from
#: the plan (``mismatch``), a value that cannot be parsed or would empty a cpuset (``invalid``).
CGROUP_ERROR_KINDS = ("mismatch", "invalid")

#: Admission runs the pure planner: typically well under a millisecond, seconds would mean a bug.
ADMISSION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
#: Pod seen -> cgroups written and verified; includes waiting for the container cgroup to appear.
PIN_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: One reconcile pass over every pod cgroup of the node (reads, writes, read-backs).
RECONCILE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class PassView(Protocol):
    """What the scrape-time collectors read of the reconciler's latest pass.

    The reconciler's ``Snapshot`` (``agent/reconcile/snapshot.py``) is the one value of this shape: it lives beside
    the reconciler, which makes it, and this layer, below the reconciler, names only the four fields it reads. The
    reconciler replaces its snapshot by one attribute assignment after every pass, so a scrape from the server
    thread never sees half a pass.
    """

    @property
    def state(self) -> NodeState:
        """The planner's node state after the pass."""

    @property
    def plan(self) -> Plan:
        """The plan the pass applied (every pod bound to the node)."""

    @property
    def topology(self) -> Topology:
        """The machine, for per-NUMA-node counts."""

    @property
    def usage(self) -> Mapping[UsageKey, float]:
        """CPU seconds consumed per ``(pool, namespace, pod)``, from ``cpu.stat``."""


def _pod_shared_pool(pod: PodPlan) -> CPUSet:
    """The pod shared pool: the bubble minus the slices of its long-running exclusive containers (empty without a
    bubble).

    Computed from the bubble rather than from the pod_shared containers, so a
    pool that no container uses yet is still reported. A regular init
    container's slice is not subtracted: it returns to the pool once the init
    container finished.
    """
    if pod.bubble is None:
        return CPUSet()
    pool = pod.bubble
    for container in pod.containers:
        if container.pool == Pool.EXCLUSIVE and container.kind != ContainerKind.INIT:
            pool = pool - container.cpus
    return pool


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{NAMESPACE}_{name}", documentation, labels=list(labels) if labels else None)


@dataclass(frozen=True, slots=True)
class _Families:
    """One scrape's families, empty until filled; a new set per scrape, so nothing carries over."""

    shared_pool: GaugeMetricFamily
    exclusive: GaugeMetricFamily
    exclusive_per_numa: GaugeMetricFamily
    shared_per_numa: GaugeMetricFamily
    node_cpus: GaugeMetricFamily
    reserved_per_numa: GaugeMetricFamily
    containers: GaugeMetricFamily
    pod_shared_pools: GaugeMetricFamily
    pods: GaugeMetricFamily
    usage: CounterMetricFamily

    @classmethod
    def empty(cls) -> _Families:
        return cls(
            shared_pool=_gauge(
                "shared_pool_size_millicores",
                "Size of the node shared pool minus the reserved CPUs, in millicores (as the kubelet counts it).",
            ),
            exclusive=_gauge(
                "exclusive_cpu_allocation_count",
                "CPUs held by exclusive containers (node and pod slices); pod shared pools are not counted.",
            ),
            exclusive_per_numa=_gauge(
                "allocation_per_numa", "CPUs held by exclusive containers per NUMA node.", "numa_node"
            ),
            shared_per_numa=_gauge(
                "numa_shared_cpus", "CPUs of the node shared pool minus the reserved CPUs per NUMA node.", "numa_node"
            ),
            node_cpus=_gauge(
                "node_cpus",
                "The online CPUs of each NUMA node by pool: exclusive, pod_shared, node_shared (minus the reserved "
                "CPUs); with podpin_reserved_cpus they add up to the NUMA node's online CPUs.",
                "pool",
                "numa_node",
            ),
            reserved_per_numa=_gauge("reserved_cpus", "The reserved CPUs per NUMA node.", "numa_node"),
            containers=_gauge(
                "containers",
                "Containers by CPU assignment: node_exclusive, pod_exclusive, pod_shared or node_shared.",
                "assignment_type",
            ),
            pod_shared_pools=_gauge(
                "pod_shared_pool_cpus",
                "CPUs in each pod's shared pool (its bubble minus exclusive slices).",
                "namespace",
                "pod",
            ),
            pods=_gauge("pods", "Pods bound to the node by admission outcome.", "state"),
            usage=CounterMetricFamily(
                f"{NAMESPACE}_pool_cpu_usage_seconds",
                "CPU time consumed by each pinned pod's containers in its exclusive CPUs and its pod shared pool, "
                "from cpu.stat.",
                labels=["pool", "namespace", "pod"],
            ),
        )

    def all(self) -> tuple[Metric, ...]:
        """In exposition order."""
        return (
            self.shared_pool,
            self.exclusive,
            self.exclusive_per_numa,
            self.shared_per_numa,
            self.node_cpus,
            self.reserved_per_numa,
            self.containers,
            self.pod_shared_pools,
            self.pods,
            self.usage,
        )


class PlanCollector:
    """Computes the state metrics from the latest pass (:class:`PassView`) on every scrape.

    The callable returns None until the reconciler's first pass; then the
    collector yields nothing, because a zero pool size would be a lie.
    """

    def __init__(self, snapshot: Callable[[], PassView | None]) -> None:
        """Keep the snapshot source.

        Args:
            snapshot: returns the latest snapshot (or None); called once per scrape.
        """
        self._snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        """The families this collector yields, without samples (so registering it never calls ``collect``)."""
        yield from _Families.empty().all()

    def collect(self) -> Iterator[Metric]:
        """Every state family, computed from one snapshot."""
        snapshot = self._snapshot()
        if snapshot is None:
            return
        families = _Families.empty()
        self._pools(snapshot, families)
        self._containers(snapshot.plan, families)
        for (pool, namespace, pod), seconds in sorted(snapshot.usage.items()):
            if pool in USAGE_POOLS:
                families.usage.add_metric([pool, namespace, pod], seconds)
        yield from families.all()

    @staticmethod
    def _pools(snapshot: PassView, families: _Families) -> None:
        """Pool sizes from the state, the planner's truth, as one partition of the online CPUs.

        Exclusive CPUs are those of exclusive containers only: a pod bubble's
        shared pool is reported apart (the kubelet's count of exclusive CPUs
        knows no pod shared pool). The node shared pool leaves out the reserved
        CPUs everywhere, as the kubelet's pool size does (shared containers also
        run on the reserved CPUs unless ``strict-cpu-reservation``), so the
        per-NUMA counts add up to the node-wide ones.
        """
        state, topology = snapshot.state, snapshot.topology
        pod_pools = CPUSet()
        for pod in snapshot.plan.pods:
            pod_pools = pod_pools | _pod_shared_pool(pod)
        pools = {
            Pool.EXCLUSIVE: state.cpu.assigned() - pod_pools,
            Pool.POD_SHARED: pod_pools,
            Pool.NODE_SHARED: state.cpu.default - state.reserved,
        }
        families.shared_pool.add_metric([], len(pools[Pool.NODE_SHARED]) * 1000)
        families.exclusive.add_metric([], len(pools[Pool.EXCLUSIVE]))
        for node in topology.memory_numa_ids:
            cpus = topology.cpus_in_numa(node)
            families.exclusive_per_numa.add_metric([str(node)], len(pools[Pool.EXCLUSIVE] & cpus))
            families.shared_per_numa.add_metric([str(node)], len(pools[Pool.NODE_SHARED] & cpus))
            for pool, members in pools.items():
                families.node_cpus.add_metric([pool, str(node)], len(members & cpus))
            families.reserved_per_numa.add_metric([str(node)], len(state.reserved & cpus))

    @staticmethod
    def _containers(plan: Plan, families: _Families) -> None:
        by_type = dict.fromkeys(AssignmentType, 0)
        pools: dict[tuple[str, str], int] = defaultdict(int)
        pods = dict.fromkeys(POD_STATES, 0)
        for pod in plan.pods:
            for container in pod.containers:
                by_type[assignment_type(pod, container)] += 1
            if pod.bubble is not None:
                # Two pods share namespace/name while a recreated pod replaces a gone one
                # that is not yet released; one series each would be a duplicate.
                pools[(pod.namespace, pod.name)] += len(_pod_shared_pool(pod))
            if pod.admitted:
                pods["admitted"] += 1
            elif pod.reason is not None:
                pods["rejected"] += 1
        for kind, count in by_type.items():
            families.containers.add_metric([kind], count)
        for (namespace, name), size in sorted(pools.items()):
            families.pod_shared_pools.add_metric([namespace, name], size)
        for outcome, count in pods.items():
            families.pods.add_metric([outcome], count)


class AgentMetrics:
    """The agent's registry and its event metrics (the reconciler updates the attributes).

    Attributes:
        registry: the registry the server exposes; holds the process metrics,
            the :class:`PlanCollector` and every attribute below.
        pinning_requests: exclusive-CPU allocation attempts, as the kubelet's CPU manager counts them: one per
            container ``Allocate`` that asks for exclusive CPUs (one per exclusive slice of a pod-level pod).
        pinning_errors: those attempts that failed (the pod is then rejected); cgroup failures are not counted here.
        memory_pinning_requests: memory allocations of the Static memory policy, as the kubelet's memory manager
            counts them: one per container ``Allocate`` of a Guaranteed pod, one per pod-level ``AllocatePod``.
        memory_pinning_errors: those allocations that failed.
        admission_requests: pods through admission.
        admission_errors: rejected pods, by the kubelet ``reason``.
        admission_duration: seconds one admission took (planner only).
        cgroup_writes: cgroup file writes, by ``file`` and ``result`` (``ok`` or the errno name).
        drift_repairs: cgroup values found changed behind the agent's back and rewritten.
        pin_latency: seconds from seeing a container to its cgroups written and verified.
        reconcile_duration: seconds one reconcile pass took.
        events: Kubernetes Events, by ``type`` (Normal/Warning) and ``result`` (posted/patched/failed/dropped).
        ready: 1 when the agent is ready (first pass done, not blocked).
        kubelet_pinning: 1 when the kubelet's CPU manager is ``static`` (podpin then refuses to write).
        malformed_pods: pods that could not be read into a PodView, by ``reason``.
        source_errors: failures of the pod source (API errors, unreadable manifests).
        checkpoint_write_errors: failed checkpoint saves, by ``errno`` (``ENOSPC``, ``EIO``, ``EROFS``...).
        checkpoint_stale: 1 while the checkpoint on disk is behind the agent's state (saves failing), else 0.
        checkpoints_set_aside: checkpoints renamed ``.corrupt-<time>`` at start, by ``reason``
            (``corrupt``: unreadable or unparseable; ``invalid``: does not fit this machine or configuration).
        http_dropped: HTTP connections closed without an answer, by ``reason`` (``capacity``: the oldest
            idle one, for a newer client; ``deadline``: too slow; ``too_large``: a request head over the limit).
        container_pins: new container cgroups pinned to their planned set, by the ``source`` that named them.
        runtime_identity_errors: container bundles that could not name their container, by ``reason``.
        devices_unknown: pods admitted without device hints, their devices unknown within ``deviceWaitTimeout``.
        cgroup_write_errors: cgroup failures (a write or read the kernel refused, a read-back that differs from the
            plan, a value that cannot be used), by ``errno`` name (or ``mismatch``/``invalid``); a cgroup that
            vanished with its container is not one.
        aligned: allocations aligned on a ``boundary`` at a ``scope`` (the kubelet's
            ``container_aligned_compute_resources_count``).
        aligned_failures: allocations that failed to align (``container_aligned_compute_resources_failure_count``).
        build_info: always 1; the ``version`` of podpin and the ``python`` that runs it.
        affinity_violations: threads of pinned containers, by ``pool``, whose affinity reaches outside the
            container's planned CPUs, at the last affinity audit.
        affinity_audits: affinity audits completed.
        nri_requests: NRI requests from the runtime, by ``method`` and ``result`` (``agent/nri/report.py``).
        nri_connected: 1 while the NRI plugin is registered and synchronized, else 0.
        nri_available: 1 while ``nri.enabled`` and the runtime's NRI socket exists (NRI is on in the runtime), else 0;
            with ``nri_connected`` at 0 the runtime offers NRI and podpin is not its plugin (PodpinNRIDisconnected).
        cgroup_unwatched_containers: container cgroups whose files the watcher could not watch (the inotify watch
            limit): a runtime's rewrite of their ``cpu.max`` or cpusets waits for the next full pass.
        config_restart_needed: 1 while changed configuration keys wait for a restart (``agent/config_follow.py``).
        condition_patches: patches of the pod condition ``podpin.io/CPUsPinned``, by ``result``.
        cgroup_claims_refused: pods kept off a cgroup they claimed, by ``reason`` (``mirror_not_node_owned``: a
            ``kubernetes.io/config.mirror`` annotation on a pod no Node owns, ignored; ``cgroup_taken``: the pod
            would map to a cgroup another pod holds, left out).
        cpus_moved: exclusive sets (container slices, pod bubbles) changed when a checkpoint was re-adopted after
            a hotplug or a reservation change; each also gets a ``PodpinCPUsMoved`` Warning Event.
        stale_allocations: CPUs a pod held when it was admitted again (restored or seen on its cgroups) that broke
            the stale rule, by ``cause`` (:mod:`agent.alloc.cpumanager.restore`); each also gets a
            ``PodpinStaleAllocation`` Warning Event.
    """

    def __init__(self, snapshot: Callable[[], PassView | None]) -> None:
        """Build a fresh registry with the process collector, the plan collector and the event metrics.

        Args:
            snapshot: returns the reconciler's latest snapshot (:class:`PassView`; None before its first pass).
        """
        # No ``_created`` series: one more series per counter child, a timestamp Prometheus does not need (the
        # counters start at 0 with the agent) and dashboards never read.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        registry = CollectorRegistry()
        self.registry = registry
        ProcessCollector(registry=registry)
        self.plan_collector = PlanCollector(snapshot)
        registry.register(self.plan_collector)

        def counter(name: str, documentation: str, *labels: str) -> Counter:
            return Counter(name, documentation, labels, namespace=NAMESPACE, registry=registry)

        def gauge(name: str, documentation: str) -> Gauge:
            return Gauge(name, documentation, namespace=NAMESPACE, registry=registry)

        def histogram(name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, documentation, namespace=NAMESPACE, registry=registry, buckets=buckets)

        self.pinning_requests = counter(
            "pinning_requests", "Exclusive-CPU allocation attempts (one per container allocation, as the kubelet's)."
        )
        self.pinning_errors = counter("pinning_errors", "Failed exclusive-CPU allocation attempts (as the kubelet's).")
        self.memory_pinning_requests = counter(
            "memory_pinning_requests",
            "Memory allocations of the Static memory policy (one per container of a Guaranteed pod, one per "
            "pod-level pod), as the kubelet's memory_manager_pinning_requests_total.",
        )
        self.memory_pinning_errors = counter(
            "memory_pinning_errors",
            "Failed memory allocations of the Static memory policy, as the kubelet's "
            "memory_manager_pinning_errors_total.",
        )
        self.admission_requests = counter("admission_requests", "Pods through admission.")
        self.admission_errors = counter("admission_errors", "Pods rejected by admission, by kubelet reason.", "reason")
        self.admission_duration = histogram(
            "admission_duration_seconds", "Duration of one pod admission by the planner.", ADMISSION_BUCKETS
        )
        self.cgroup_writes = counter(
            "cgroup_writes", "cgroup file writes by file and result (ok or errno name).", "file", "result"
        )
        self.drift_repairs = counter("drift_repairs", "cgroup values changed by someone else and rewritten.")
        self.pin_latency = histogram(
            "pin_latency_seconds",
            "Time from seeing a container to its cgroups written and verified.",
            PIN_LATENCY_BUCKETS,
        )
        self.reconcile_duration = histogram(
            "reconcile_duration_seconds", "Duration of one reconcile pass.", RECONCILE_BUCKETS
        )
        self.events = counter("events", "Kubernetes Events by type and result.", "type", "result")
        self.ready = gauge("ready", "1 when the agent is ready, else 0.")
        self.kubelet_pinning = gauge(
            "kubelet_pinning", "1 when the kubelet's CPU manager pins CPUs itself (podpin does not write), else 0."
        )
        self.malformed_pods = counter("malformed_pods", "Pods that could not be read, by reason.", "reason")
        self.container_pins = counter(
            "container_pins",
            "New container cgroups pinned to their planned set, by how the container was named "
            "(nri, bundle: the runtime said; status: the pod status did).",
            "source",
        )
        self.runtime_identity_errors = counter(
            "runtime_identity_errors",
            "Container bundles that could not name their container (or named another pod), by reason.",
            "reason",
        )
        self.source_errors = counter("source_errors", "Failures of the pod source.")
        self.internal_errors = counter(
            "internal_errors",
            "Unexpected exceptions caught at the boundary of one pass, pod, bundle, PodResources answer or cgroup "
            "directory (agent.internal_error in the log); the agent went on with everything else.",
            "stage",
        )
        for stage in Stage:
            self.internal_errors.labels(stage=stage)
        self.devices_unknown = counter(
            "devices_unknown",
            "Pods admitted without device hints: their devices were not known within deviceWaitTimeout.",
        )
        self.checkpoint_write_errors = counter(
            "checkpoint_write_errors", "Failed checkpoint saves, by errno name (retried on every pass).", "errno"
        )
        self.checkpoint_stale = gauge(
            "checkpoint_stale", "1 while the checkpoint on disk is behind the agent's state (saves failing), else 0."
        )
        self.checkpoints_set_aside = counter(
            "checkpoints_set_aside", "Checkpoints renamed .corrupt-<time> at start and rebuilt, by reason.", "reason"
        )
        self.http_dropped = counter(
            "http_connections_dropped", "HTTP connections closed without an answer, by reason.", "reason"
        )
        self.nri_requests = counter(
            "nri_requests",
            "NRI requests from the runtime, by method and result (ok, error, timeout, ...).",
            "method",
            "result",
        )
        self.nri_connected = gauge(
            "nri_connected", "1 while podpin is registered with the runtime's NRI and synchronized, else 0."
        )
        self.nri_available = gauge(
            "nri_available",
            "1 while nri.enabled and the runtime's NRI socket exists (NRI is on in the runtime), else 0.",
        )
        self.cgroup_unwatched_containers = gauge(
            "cgroup_unwatched_containers",
            "Container cgroups whose cpu.max and cpuset files the watcher could not watch (the inotify watch limit): "
            "a rewrite there is repaired at the next full pass, not at once.",
        )
        self.condition_patches = counter(
            "condition_patches",
            "Patches of the pod condition podpin.io/CPUsPinned, by result (patched; gone: the pod was deleted or "
            "replaced; failed: after retries).",
            "result",
        )
        for result in CONDITION_RESULTS:
            self.condition_patches.labels(result=result)
        self.config_restart_needed = gauge(
            "config_restart_needed",
            "1 while the configuration has changed keys that take effect only when the agent restarts "
            "(config.restart_needed names them), else 0.",
        )
        # Closed label sets start at 0, so rate() and alerts work before the first occurrence.
        for reason in ADMISSION_ERROR_REASONS:
            self.admission_errors.labels(reason=reason)
        for source in IDENTITY_SOURCES:
            self.container_pins.labels(source=source)
        for reason in IDENTITY_ERROR_REASONS:
            self.runtime_identity_errors.labels(reason=reason)
        for event_type in EVENT_TYPES:
            for result in EVENT_RESULTS:
                self.events.labels(type=event_type, result=result)
        for reason in SET_ASIDE_REASONS:
            self.checkpoints_set_aside.labels(reason=reason)
        for reason in HTTP_DROP_REASONS:
            self.http_dropped.labels(reason=reason)
        self.cgroup_claims_refused = counter(
            "cgroup_claims_refused",
            "Pods kept off a cgroup they claimed (a mirror annotation, a taken cgroup).",
            "reason",
        )
        for reason in CLAIM_REFUSED_REASONS:
            self.cgroup_claims_refused.labels(reason=reason)
        self.cpus_moved = counter(
            "cpus_moved",
            "Exclusive sets changed at start because CPUs went offline or became reserved (only those CPUs moved).",
        )
        self._allocation_metrics(counter)
        self._audit_metrics(counter)

    def _audit_metrics(self, counter: Callable[..., Counter]) -> None:
        """The affinity audit's results (``agent/audit/affinity.py``)."""
        self.affinity_violations = Gauge(
            "affinity_violations",
            "Threads of pinned containers whose CPU affinity reaches outside their planned CPUs, at the last audit.",
            ["pool"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self.affinity_audits = counter(
            "affinity_audits", "Affinity audits completed (at most one per reconcilePeriod)."
        )
        for pool in AUDITED_POOLS:
            self.affinity_violations.labels(pool=pool).set(0)

    def _allocation_metrics(self, counter: Callable[..., Counter]) -> None:
        """The kubelet-modelled allocation counters, cgroup failures and the build info."""
        self.cgroup_write_errors = counter(
            "cgroup_write_errors",
            "cgroup failures by errno name (mismatch: read-back differs from the plan; invalid: unusable value).",
            "errno",
        )
        self.aligned = counter(
            "container_aligned_compute_resources",
            "Allocations aligned on a boundary (numa_node, physical_cpu, uncore_cache) at a scope (container, pod), "
            "as the kubelet's container_aligned_compute_resources_count.",
            "scope",
            "boundary",
        )
        self.aligned_failures = counter(
            "container_aligned_compute_resources_failure",
            "Allocations that failed to align, as the kubelet's container_aligned_compute_resources_failure_count.",
            "scope",
            "boundary",
        )
        self.stale_allocations = counter(
            "stale_allocations",
            "Restored allocations released as stale before their pod was allocated from scratch, by cause.",
            "cause",
        )
        for cause in StaleCause:
            self.stale_allocations.labels(cause=cause)
        self.build_info = Gauge(
            "build_info",
            "Always 1: the podpin version and the Python that runs it.",
            ["version", "python"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self.build_info.labels(version=__version__, python=platform.python_version()).set(1)
        for scope, boundary in ALIGNMENTS:
            self.aligned.labels(scope=scope, boundary=boundary)
            if boundary != AlignBoundary.UNCORE_CACHE:  # never counted as a failure, so no series
                self.aligned_failures.labels(scope=scope, boundary=boundary)

    def count_allocations(self, events: tuple[AllocationEvent, ...]) -> None:
        """Add one admission's pinning and alignment counts (:mod:`agent.alloc.tally`)."""
        for event in events:
            if event.kind == EventKind.PINNING:
                self.pinning_requests.inc()
                if not event.ok:
                    self.pinning_errors.inc()
            elif event.kind == EventKind.MEMORY_PINNING:
                self.memory_pinning_requests.inc()
                if not event.ok:
                    self.memory_pinning_errors.inc()
            elif event.stale is not None:
                self.stale_allocations.labels(cause=event.stale.cause).inc()
            elif event.scope is not None and event.boundary is not None:
                family = self.aligned if event.ok else self.aligned_failures
                family.labels(scope=event.scope, boundary=event.boundary).inc()
