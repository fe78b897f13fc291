"""What one admission did that the kubelet's resource-manager counters count, as values.

The kubelet counts its allocations where they happen: the CPU manager's
``Allocate`` (``pkg/kubelet/cm/cpumanager/policy_static.go``) adds one to
``cpu_manager_pinning_requests_total`` for each container that gets exclusive
CPUs, and one to ``cpu_manager_pinning_errors_total`` when that allocation
fails; with ``full-pcpus-only`` it also counts the allocation as aligned (or
not) on the ``physical_cpu`` boundary, and every new exclusive allocation whose
CPUs all share one uncore cache (``topology.Allocation.Aligned.UncoreCache``:
one CPU is always aligned) on the ``uncore_cache`` boundary, whatever the
options; a container that keeps CPUs it already held is not counted there, and
nothing counts an allocation that is not uncore aligned. The topology manager's scopes
(``pkg/kubelet/cm/topologymanager/scope_container.go``, ``scope_pod.go``) count
``container_aligned_compute_resources_count`` / ``..._failure_count`` on the
``numa_node`` boundary when the policy guarantees alignment
(``single-numa-node``): once per container in the ``container`` scope, once per
pod in the ``pod`` scope.

podpin's core does no I/O and no metrics, so
:func:`agent.alloc.admission.admit_pod` appends one :class:`AllocationEvent` per
such count to a list the planner hands it (like the ``--explain`` steps), and
the planner puts them on the :class:`~agent.alloc.planner.Decision`. The
reporter turns them into the ``podpin_`` counters; a rejected pod's events
include the allocations that succeeded before the one that failed, exactly as
the kubelet's counters would show them.

Pod-level pods (KEP-5526) allocate in one ``AllocatePod`` call: a success counts
one request per exclusive container slice, a failure of the CPU manager one
request and one error.

The memory manager's Static policy (``pkg/kubelet/cm/memorymanager/policy_static.go``)
counts ``memory_manager_pinning_requests_total`` once per ``Allocate`` of a
container of a Guaranteed pod (whatever it requests) and once per
``AllocatePod`` of a Guaranteed pod-level pod, and
``memory_manager_pinning_errors_total`` when that allocation fails. It runs
after the CPU manager's, so a container whose CPUs could not be allocated
never reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.alloc.cpumanager.restore import StaleAllocation

__all__ = ["AlignBoundary", "AlignScope", "AllocationEvent", "EventKind"]


class AlignScope(StrEnum):
    """The kubelet's ``scope`` label of the aligned-resources counters."""

    CONTAINER = "container"
    POD = "pod"


class AlignBoundary(StrEnum):
    """The kubelet's ``boundary`` label of the aligned-resources counters."""

    NUMA_NODE = "numa_node"
    PHYSICAL_CPU = "physical_cpu"
    UNCORE_CACHE = "uncore_cache"


class EventKind(StrEnum):
    """Which counter an event adds to."""

    PINNING = "pinning"
    """An exclusive-CPU allocation (``pinning_requests``, and ``pinning_errors`` when it failed)."""
    ALIGNMENT = "alignment"
    """An aligned allocation (``aligned_compute_resources`` or its ``_failure`` twin)."""
    MEMORY_PINNING = "memory_pinning"
    """A Static memory policy allocation (``memory_pinning_requests``, and ``memory_pinning_errors`` when it failed)."""
    STALE = "stale"
    """A restored allocation that could not be kept, released before the pod was allocated afresh."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationEvent:
    """One count: an allocation attempt or an alignment outcome, and whether it succeeded.

    ``scope`` and ``boundary`` are set for :attr:`EventKind.ALIGNMENT` only, ``stale`` for :attr:`EventKind.STALE`.
    """

    kind: EventKind
    ok: bool
    scope: AlignScope | None = None
    boundary: AlignBoundary | None = None
    stale: StaleAllocation | None = None

    @classmethod
    def pinning(cls, *, ok: bool) -> AllocationEvent:
        """An exclusive-CPU allocation attempt."""
        return cls(kind=EventKind.PINNING, ok=ok)

    @classmethod
    def memory_pinning(cls, *, ok: bool) -> AllocationEvent:
        """A memory allocation attempt of the Static memory policy."""
        return cls(kind=EventKind.MEMORY_PINNING, ok=ok)

    @classmethod
    def alignment(cls, scope: AlignScope, boundary: AlignBoundary, *, ok: bool) -> AllocationEvent:
        """An allocation the kubelet counts as aligned (``ok``) or failing to align."""
        return cls(kind=EventKind.ALIGNMENT, ok=ok, scope=scope, boundary=boundary)

    @classmethod
    def released_stale(cls, stale: StaleAllocation) -> AllocationEvent:
        """A restored allocation that broke the stale rule and was released."""
        return cls(kind=EventKind.STALE, ok=False, stale=stale)
