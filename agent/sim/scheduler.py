"""Which node a pod goes to: the scheduler's ``NodeResourcesFit`` filter and a scoring choice.

The simulation needs placement across nodes to be as blind to CPU topology as
the real scheduler is: kube-scheduler only compares *amounts* (the pod's CPU
and memory requests plus overhead against what is left of the node's
allocatable), never NUMA nodes. A pod the scheduler places can still be
rejected by the node's planner, as the kubelet would; that is the
fragmentation this simulation measures.

* Pod requests: ``spec.resources`` requests when the pod sets them (KEP-2837,
  the scheduler uses the pod-level values), else the effective container
  requests (KEP-753: apps + sidecars, or the largest init container); plus
  ``spec.overhead``.
* Node allocatable: CPU = (online CPUs − reserved CPUs) × 1000m, the reserved
  count being the planner's (``kubeReserved`` + ``systemReserved``, or
  ``reservedSystemCPUs``); memory = the NUMA nodes' MemTotal − kube/system
  reserved memory − the ``evictionHard`` memory threshold; at most 110 pods
  (the kubelet's default ``maxPods``). A topology that reports no memory is not
  memory-limited.
* ``first-fit`` picks the lowest-numbered node that fits. ``most-allocated``
  (kube-scheduler's bin-packing score, CPU and memory weighted 1:1) picks the
  node whose requested share after placing the pod is highest,
  ``least-allocated`` (kube-scheduler's default score) the lowest; ties go to
  the lowest-numbered node. Being blind to NUMA, a scheduler keeps sending
  pods to a node whose planner rejects them; with ``first-fit`` and
  ``single-numa-node`` that is every later pod of the same size, as on a real
  cluster whose scheduler always prefers that node.
* ``numa-aware`` adds scheduler-plugins' NodeResourceTopologyMatch filter and
  score over each node's NodeResourceTopology (:mod:`agent.sim.numa_aware`);
  the engine drives it through :meth:`Scheduler.fits` and
  :meth:`Scheduler.least_allocated`, since it needs each node's topology
  object, which only the engine has.
* A pod the node's planner rejects fails there (the kubelet's admission
  error is terminal) and frees its requests again, so only admitted pods count
  against a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.alloc import PlannerConfig
from agent.config import NodeAllocatable
from agent.pods import PodView, effective_requests
from agent.topology import Topology

__all__ = [
    "MAX_PODS",
    "SCHEDULERS",
    "Requests",
    "Scheduler",
    "SchedulerName",
    "allocated_share",
    "fits",
    "least_allocated_score",
    "node_allocatable",
    "pod_requests",
]


class SchedulerName(StrEnum):
    """``podpin simulate --scheduler``: how a node is chosen (module docstring)."""

    FIRST_FIT = "first-fit"
    MOST_ALLOCATED = "most-allocated"
    LEAST_ALLOCATED = "least-allocated"
    NUMA_AWARE = "numa-aware"


SCHEDULERS: tuple[SchedulerName, ...] = tuple(SchedulerName)

MAX_PODS = 110
"""The kubelet's default ``maxPods``."""


@dataclass(frozen=True, slots=True)
class Requests:
    """CPU in millicores and memory in bytes."""

    cpu: int
    memory: int

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Requests) -> Requests:
        return Requests(self.cpu - other.cpu, self.memory - other.memory)


def pod_requests(pod: PodView) -> Requests:
    """What the scheduler counts: pod-level requests if set, else effective container requests; plus overhead."""
    source = pod.pod_resources.requests if pod.pod_resources is not None else effective_requests(pod)
    return Requests(
        source.get("cpu", 0) + pod.overhead.get("cpu", 0),
        source.get("memory", 0) + pod.overhead.get("memory", 0),
    )


def node_allocatable(topology: Topology, planner: PlannerConfig, reservations: NodeAllocatable) -> Requests:
    """A node's allocatable CPU and memory (module docstring); memory 0 means not memory-limited."""
    cpus = len(topology.online_cpus) - planner.num_reserved_cpus()
    capacity = sum(node.memory_bytes for node in topology.numa_nodes)
    reserved = reservations.reserved_memory + reservations.eviction_hard_memory
    memory = max(0, capacity - reserved) if capacity else 0
    return Requests(cpus * 1000, memory)


def fits(allocatable: Requests, requested: Requests, pods: int, pod: Requests) -> bool:
    """``NodeResourcesFit`` on a node that holds ``pods`` pods requesting ``requested``."""
    after = requested + pod
    if pods >= MAX_PODS or after.cpu > allocatable.cpu:
        return False
    return not allocatable.memory or after.memory <= allocatable.memory


def allocated_share(allocatable: Requests, requested: Requests, pod: Requests) -> float:
    """The node's requested share (CPU and memory weighted 1:1) after placing the pod."""
    after = requested + pod
    shares = [after.cpu / allocatable.cpu if allocatable.cpu else 0.0]
    if allocatable.memory:
        shares.append(after.memory / allocatable.memory)
    return sum(shares) / len(shares)


def least_allocated_score(allocatable: Requests, requested: Requests, pod: Requests) -> int:
    """kube-scheduler's ``NodeResourcesFit`` ``LeastAllocated`` score (0-100) after placing the pod."""
    after = requested + pod
    scores = []
    for total, used in ((allocatable.cpu, after.cpu), (allocatable.memory, after.memory)):
        if total:
            scores.append(max(0, total - used) * 100 // total)
    return sum(scores) // len(scores) if scores else 0


class Scheduler:
    """Places pods on ``nodes`` identical nodes and keeps their requested totals."""

    def __init__(self, nodes: int, allocatable: Requests, policy: SchedulerName = SchedulerName.FIRST_FIT) -> None:
        """Start with every node empty.

        Raises:
            ValueError: fewer than one node, or an unknown policy.
        """
        if nodes < 1:
            raise ValueError(f"nodes: {nodes} must be at least 1")
        if policy not in SCHEDULERS:
            raise ValueError(f"scheduler: {policy!r} is not one of {', '.join(SCHEDULERS)}")
        self.allocatable = allocatable
        self.policy = policy
        self._requested = [Requests(0, 0)] * nodes
        self._pods = [0] * nodes

    def fits(self, node: int, pod: Requests) -> bool:
        """``NodeResourcesFit``: the pod's requests fit what is left of the node's allocatable."""
        return self._fits(node, pod)

    def least_allocated(self, node: int, pod: Requests) -> int:
        """kube-scheduler's ``NodeResourcesFit`` ``LeastAllocated`` score (0-100) after placing the pod."""
        return least_allocated_score(self.allocatable, self._requested[node], pod)

    def _fits(self, node: int, pod: Requests) -> bool:
        return fits(self.allocatable, self._requested[node], self._pods[node], pod)

    def _score(self, node: int, pod: Requests) -> float:
        return allocated_share(self.allocatable, self._requested[node], pod)

    def pick(self, pod: Requests) -> int | None:
        """The node for a pod with these requests, or None when it fits no node."""
        nodes = range(len(self._pods))
        if self.policy == SchedulerName.FIRST_FIT:
            return next((node for node in nodes if self._fits(node, pod)), None)
        fitting = [node for node in nodes if self._fits(node, pod)]
        if not fitting:
            return None
        # numa-aware without topology objects is its NodeResourcesFit part (the engine adds the rest)
        if self.policy in (SchedulerName.LEAST_ALLOCATED, SchedulerName.NUMA_AWARE):
            return min(fitting, key=lambda node: (self._score(node, pod), node))
        return max(fitting, key=lambda node: (self._score(node, pod), -node))

    def bind(self, node: int, pod: Requests) -> None:
        """Count an admitted pod against its node."""
        self._requested[node] = self._requested[node] + pod
        self._pods[node] += 1

    def requested(self, node: int) -> Requests:
        """What the admitted pods on a node request."""
        return self._requested[node]
