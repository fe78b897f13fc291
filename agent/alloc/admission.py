"""Topology manager scopes: who is asked for hints, when, and in which order allocation runs.

The kubelet's topology manager admits a pod through a scope:

* ``container`` (and the policy ``none``, which the kubelet runs as scope
  "none"): init containers first, then app containers; for each, gather the
  providers' hints, merge, reject or store the hint, and allocate.
* ``pod``: gather pod-level hints once, merge once, store the same hint for
  every container, then allocate each container (classic pods) or the whole pod
  at once (KEP-5526 pods: ``AllocatePod``).

The providers are the CPU manager, the memory manager (``Static``) and the
device manager, which is asked only when the pod's devices are known
(:class:`~agent.alloc.devicemanager.PodDevices`): a pod without devices costs
what it cost before devices existed, and gets the same answer.

:func:`admit_pod` does that over working copies of the CPU and memory states;
the planner keeps the copies only when it returns. Any provider error is
turned into the kubelet's typed admission error here, so callers see only
:class:`~agent.alloc.errors.PlacementError`. Asked to (``steps``), it also
records each merge as a :class:`~agent.alloc.trace.MergeStep` for
``podpin plan --explain``; given ``events``, it records what the kubelet's
pinning and alignment counters would count (:mod:`agent.alloc.tally`); it never
logs. Before anything else it drops CPUs the pod already holds that break the
stale rule (:mod:`agent.alloc.cpumanager.restore`), so a restart never plans two
exclusive owners of one CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agent.alloc.cpumanager import CPUState, PodCPUAllocation, StaticCPUPolicy
from agent.alloc.cpumanager.restore import release_stale
from agent.alloc.devicemanager import DeviceManager
from agent.alloc.devices import PodDevices
from agent.alloc.errors import AllocationError, PlacementError, TopologyAffinityError, UnexpectedAdmissionError
from agent.alloc.memorymanager import MemoryState, StaticMemoryPolicy
from agent.alloc.tally import AlignBoundary, AlignScope, AllocationEvent
from agent.alloc.topologymanager import (
    CompactProviderHints,
    TopologyHint,
    TopologyManagerPolicy,
    TopologyManagerScope,
    TopologyPolicy,
)
from agent.alloc.trace import MergeStep, resource_hints
from agent.pods import ContainerView, PodView, QOSClass, uses_pod_level_path

__all__ = ["Admission", "Providers", "admit_pod", "POD_LEVEL_REJECTION", "takes_pod_level_path"]

#: The status message the kubelet gives a pod-level pod its pod-scope merge rejected.
POD_LEVEL_REJECTION = "Pod Scope pod with pod-level resources failed admission under pod-scope topology manager"


@dataclass(frozen=True, slots=True)
class Providers:
    """The hint providers of one node: the CPU policy, the memory policy when it is ``Static``, the device manager."""

    cpu: StaticCPUPolicy | None
    memory: StaticMemoryPolicy | None
    devices: DeviceManager | None = None


Named = list[tuple[str, CompactProviderHints]]
"""Each provider's hints with the provider's name (``cpu``, ``memory``, ``device``), in the kubelet's order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """What admitting one pod decided (the states carry the allocations themselves)."""

    hints: dict[str, TopologyHint] = field(default_factory=dict)
    pod_level: bool = False
    pod_cpu: PodCPUAllocation | None = None
    pod_numa: tuple[int, ...] | None = None
    exclusive_requests: int = 0


def _wrap(error: PlacementError) -> PlacementError:
    """Typed errors keep their reason; plain allocation failures become ``UnexpectedAdmissionError``."""
    if isinstance(error, AllocationError):
        return UnexpectedAdmissionError.wrap(error)
    return error


def _container_hints(
    providers: Providers,
    cpu: CPUState,
    memory: MemoryState,
    pod: PodView,
    container: ContainerView,
    devices: PodDevices | None,
) -> Named:
    hints: Named = []
    if providers.cpu is not None:
        hints.append(("cpu", providers.cpu.container_hints(cpu, pod, container)))
    if providers.memory is not None:
        hints.append(("memory", providers.memory.container_hints(memory, pod, container)))
    if providers.devices is not None and devices is not None:
        found = providers.devices.container_hints(container, devices)
        if found:
            hints.append(("device", found))
    return hints


def _pod_hints(
    providers: Providers, cpu: CPUState, memory: MemoryState, pod: PodView, devices: PodDevices | None
) -> Named:
    hints: Named = []
    if providers.cpu is not None:
        hints.append(("cpu", providers.cpu.pod_hints(cpu, pod)))
    if providers.memory is not None:
        hints.append(("memory", providers.memory.pod_hints(memory, pod)))
    if providers.devices is not None and devices is not None:
        found = providers.devices.pod_hints(pod, devices)
        if found:
            hints.append(("device", found))
    return hints


def _merge(
    policy: TopologyPolicy, hints: Named, container: str | None, steps: list[MergeStep] | None
) -> tuple[TopologyHint, bool]:
    """The policy's merge of these hints, recorded in ``steps`` when a walk-through was asked for."""
    best, admit = policy.merge([given for _, given in hints])
    if steps is not None:
        found = tuple(entry for name, given in hints for entry in resource_hints(name, given))
        steps.append(MergeStep(container=container, hints=found, best=best, admitted=admit))
    return best, admit


def _count(events: list[AllocationEvent] | None, event: AllocationEvent) -> None:
    if events is not None:
        events.append(event)


def _cpu_allocate(
    cpu_policy: StaticCPUPolicy,
    cpu: CPUState,
    pod: PodView,
    container: ContainerView,
    hint: TopologyHint,
    events: list[AllocationEvent] | None,
) -> bool:
    """The CPU manager's ``Allocate``, counted as the kubelet counts it; True if the container got exclusive CPUs.

    Counted (``agent/alloc/tally.py``): the pinning request, its ``physical_cpu``
    alignment under ``full-pcpus-only``, and a new allocation on one uncore cache.

    ``allocate`` returns None (nothing counted) for a shared container before it
    can fail, so a failure is always a failed exclusive allocation.
    """
    smt = cpu_policy.options.full_pcpus_only
    fresh = cpu.get(pod.uid, container.name) is None
    try:
        cpus = cpu_policy.allocate(cpu, pod, container, hint.affinity)
        got = cpus is not None
    except PlacementError:
        _count(events, AllocationEvent.pinning(ok=False))
        if smt:
            _count(events, AllocationEvent.alignment(AlignScope.CONTAINER, AlignBoundary.PHYSICAL_CPU, ok=False))
        raise
    if got:
        _count(events, AllocationEvent.pinning(ok=True))
        if smt:
            _count(events, AllocationEvent.alignment(AlignScope.CONTAINER, AlignBoundary.PHYSICAL_CPU, ok=True))
        if fresh and cpus is not None and len(cpu_policy.topology.uncores_of(cpus)) <= 1:
            _count(events, AllocationEvent.alignment(AlignScope.CONTAINER, AlignBoundary.UNCORE_CACHE, ok=True))
    return got


def _allocate(
    providers: Providers,
    cpu: CPUState,
    memory: MemoryState,
    pod: PodView,
    container: ContainerView,
    hint: TopologyHint,
    events: list[AllocationEvent] | None = None,
) -> int:
    """Every provider's ``Allocate`` for one container; returns 1 if it got exclusive CPUs."""
    got = 0
    try:
        if providers.cpu is not None and _cpu_allocate(providers.cpu, cpu, pod, container, hint, events):
            got = 1
        if providers.memory is not None:
            with _memory_counted(pod, events):
                providers.memory.allocate(memory, pod, container, hint.affinity, hint.preferred)
    except PlacementError as err:
        raise _wrap(err) from err
    return got


@contextmanager
def _memory_counted(pod: PodView, events: list[AllocationEvent] | None) -> Iterator[None]:
    """Count a Static memory policy allocation as the kubelet does: Guaranteed pods only, an error when it raises."""
    if pod.qos != QOSClass.GUARANTEED:
        yield
        return
    try:
        yield
    except PlacementError:
        _count(events, AllocationEvent.memory_pinning(ok=False))
        raise
    _count(events, AllocationEvent.memory_pinning(ok=True))


def _aligned(policy: TopologyPolicy, events: list[AllocationEvent] | None, scope: AlignScope, *, ok: bool) -> None:
    """The NUMA alignment count of a scope's admission, kept only where the policy guarantees alignment."""
    if policy.alignment_guaranteed:
        _count(events, AllocationEvent.alignment(scope, AlignBoundary.NUMA_NODE, ok=ok))


def _cpu_allocate_pod(
    cpu_policy: StaticCPUPolicy, cpu: CPUState, pod: PodView, best: TopologyHint, events: list[AllocationEvent] | None
) -> PodCPUAllocation | None:
    """``AllocatePod``: one request per exclusive slice carved; a failure is one failed request."""
    try:
        allocation = cpu_policy.allocate_pod(cpu, pod, best.affinity)
    except PlacementError:
        _count(events, AllocationEvent.pinning(ok=False))
        raise
    for _ in allocation.exclusive if allocation is not None else ():
        _count(events, AllocationEvent.pinning(ok=True))
    return allocation


def takes_pod_level_path(pod: PodView, policy: TopologyManagerPolicy, scope: TopologyManagerScope) -> bool:
    """The pod is admitted the KEP-5526 way (``AllocatePod``): pod scope, a policy other than ``none``."""
    return policy != TopologyManagerPolicy.NONE and scope == TopologyManagerScope.POD and uses_pod_level_path(pod)


def admit_pod(
    pod: PodView,
    *,
    policy: TopologyPolicy,
    scope: TopologyManagerScope,
    providers: Providers,
    cpu: CPUState,
    memory: MemoryState,
    devices: PodDevices | None = None,
    steps: list[MergeStep] | None = None,
    events: list[AllocationEvent] | None = None,
) -> Admission:
    """Admit one pod into the given (working-copy) states.

    Args:
        pod: the pod.
        policy: the topology manager policy.
        scope: ``container`` or ``pod`` (ignored with policy ``none``).
        providers: the CPU and memory policies and the device manager.
        cpu: CPU state to allocate from (mutated).
        memory: memory state to allocate from (mutated).
        devices: the devices the pod's containers hold, when known (the device manager's facts).
        steps: when given, each merge is appended to it (``podpin plan --explain``).
        events: when given, each count of the kubelet's pinning and alignment counters is appended to it.

    Raises:
        PlacementError: the kubelet's reason and message; the states are then half-updated and must be dropped.
    """
    for provider in (providers.cpu, providers.memory):
        if provider is not None:
            provider.start_pod(pod.uid)
    pod_level = takes_pod_level_path(pod, policy.name, scope)
    if providers.cpu is not None:
        stale = release_stale(cpu, pod, pod_level=pod_level)
        if stale is not None:
            _count(events, AllocationEvent.released_stale(stale))
    if policy.name == TopologyManagerPolicy.NONE:
        exclusive = 0
        for container in pod.all_containers:
            exclusive += _allocate(providers, cpu, memory, pod, container, TopologyHint(None, False), events)
        return Admission(exclusive_requests=exclusive)
    if scope == TopologyManagerScope.CONTAINER:
        chosen: dict[str, TopologyHint] = {}
        exclusive = 0
        for container in pod.all_containers:
            hints = _container_hints(providers, cpu, memory, pod, container, devices)
            best, admit = _merge(policy, hints, container.name, steps)
            if not admit:
                _aligned(policy, events, AlignScope.CONTAINER, ok=False)
                raise TopologyAffinityError()
            chosen[container.name] = best
            exclusive += _allocate(providers, cpu, memory, pod, container, best, events)
            _aligned(policy, events, AlignScope.CONTAINER, ok=True)
        return Admission(hints=chosen, exclusive_requests=exclusive)
    best, admit = _merge(policy, _pod_hints(providers, cpu, memory, pod, devices), None, steps)
    if not admit:
        _aligned(policy, events, AlignScope.POD, ok=False)
        raise TopologyAffinityError(
            POD_LEVEL_REJECTION if pod_level else "Resources cannot be allocated with Topology locality"
        )
    chosen = {container.name: best for container in pod.all_containers}
    if not pod_level:
        exclusive = 0
        for container in pod.all_containers:
            exclusive += _allocate(providers, cpu, memory, pod, container, best, events)
        _aligned(policy, events, AlignScope.POD, ok=True)
        return Admission(hints=chosen, exclusive_requests=exclusive)
    pod_cpu: PodCPUAllocation | None = None
    pod_numa: tuple[int, ...] | None = None
    try:
        if providers.cpu is not None:
            pod_cpu = _cpu_allocate_pod(providers.cpu, cpu, pod, best, events)
        if providers.memory is not None:
            with _memory_counted(pod, events):
                pod_numa = providers.memory.allocate_pod(memory, pod, best.affinity, best.preferred)
    except PlacementError as err:
        raise _wrap(err) from err
    _aligned(policy, events, AlignScope.POD, ok=True)
    return Admission(
        hints=chosen,
        pod_level=True,
        pod_cpu=pod_cpu,
        pod_numa=pod_numa,
        exclusive_requests=len(pod_cpu.exclusive) if pod_cpu else 0,
    )
