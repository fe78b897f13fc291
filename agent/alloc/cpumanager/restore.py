"""Whether the CPUs a pod already holds when it is admitted can be kept: the stale rule for restored allocations.

An admission may start from CPUs the pod already holds: entries restored from a checkpoint, or, when podpin
rebuilds a lost checkpoint, the cpusets found on the pod's live cgroups (:mod:`agent.alloc.state.adopt`). The
allocation paths keep what is held and compute only what is missing. That is sound only when everything missing
comes *after* everything held, in spec order: each container is carved from what the containers before it left
(a pod-level slice from the bubble minus earlier slices; a classic container from the shared pool plus the CPUs its
init containers lend), so a container computed in front of one that kept its CPUs would be carved from a pool
that still holds them, and two exclusive containers would share a CPU.

The kubelet's rule (``pkg/kubelet/cm/cpumanager/policy_static.go`` after kubernetes PR 141041, which fixed
issue 140989; neither v1.36.3 nor v1.37.2 has it: their ``AllocatePod`` allocates a restored pod again): a
restored pod allocation whose container entries are not a prefix of the pod's containers in spec order, or whose
CPUs overlap the default (shared) set, is stale; it is released and the pod is allocated from scratch. podpin
applies it to every pod, classic ones included, and adds what a state written by an older podpin (or edited by
hand) could still get wrong; :func:`find_stale` names the first rule broken:

* ``overlaps_shared``: a CPU the pod holds is also in the shared set (the kubelet's second test);
* ``not_prefix``: a container holds CPUs although one before it that should hold some holds none, or a name
  that is not one of the pod's containers (or is not entitled to CPUs of its own) holds some (the kubelet's first
  test). A regular init container that holds nothing is passed over: it runs to completion before the next
  container starts, so its CPUs may overlap anything after it, and once it has finished podpin cannot see its
  cgroup; the kubelet counts it;
* ``shared_cpu``: a sidecar or app container that holds exclusive CPUs shares one with a container after it, or
  one in the pod shared pool shares one with a later sidecar or app container's exclusive CPUs (a regular init
  container may reuse what came before it, and its slice may overlap the pod shared pool, as the kubelet carves
  it);
* ``outside_pod_cpus``: a container holds CPUs outside the pod's CPUs (the bubble), or the pod holds a bubble
  the path it is being admitted on does not give, or lacks the one it gives.

One more cause is podpin's alone, judged once at a restart against the live cgroups rather than by the rule above
(:func:`agent.alloc.state.adopt.contradicted_claims`): ``contradicted_by_cgroups``, a checkpoint older than the
cgroups (a save failed before the restart) gives a pod CPUs that another pod's running container holds on its
cgroup. Honoured, it would move that running container; released, the pod is admitted again like one the
checkpoint missed, keeping what its own cgroups hold where that fits.

Nothing here does I/O; the admission reports what :func:`release_stale` released
(:class:`~agent.alloc.tally.AllocationEvent`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.alloc.cpumanager.state import CPUState
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, ContainerView, PodView, container_exclusive_cpus, pod_level_cpus

__all__ = ["StaleAllocation", "StaleCause", "bubble_path_of", "find_stale", "missing_entries", "release_stale"]


class StaleCause(StrEnum):
    """Which rule a restored allocation broke (the ``cause`` label of ``podpin_stale_allocations_total``)."""

    OVERLAPS_SHARED = "overlaps_shared"
    NOT_PREFIX = "not_prefix"
    SHARED_CPU = "shared_cpu"
    OUTSIDE_POD_CPUS = "outside_pod_cpus"
    CONTRADICTED_BY_CGROUPS = "contradicted_by_cgroups"


@dataclass(frozen=True, slots=True, kw_only=True)
class StaleAllocation:
    """A stale restored allocation: the rule it broke, in words, and the CPUs that went back to the shared set."""

    cause: StaleCause
    detail: str
    released: CPUSet

    def message(self) -> str:
        """The sentence the Event and the log line carry."""
        return (
            f"the CPUs this pod held when podpin admitted it again were stale ({self.detail}): they were released "
            f"({self.released or 'none'}) and the pod was allocated from scratch, so its containers may have moved"
        )


def _entitled(pod: PodView, bubble: bool) -> list[ContainerView]:
    """The containers an admission gives CPU entries, in spec order (init containers first)."""
    if bubble:
        return list(pod.all_containers)
    return [c for c in pod.all_containers if container_exclusive_cpus(pod, c) > 0]


def _not_prefix(pod: PodView, entries: dict[str, CPUSet], entitled: list[ContainerView]) -> str | None:
    names = {c.name for c in entitled}
    strangers = sorted(set(entries) - names)
    if strangers:
        known = {c.name for c in pod.all_containers}
        what = "is not entitled to CPUs of its own" if strangers[0] in known else "is not a container of the pod"
        return f"{strangers[0]} holds CPUs {entries[strangers[0]]} but {what}"
    missing: str | None = None
    for container in entitled:
        cpus = entries.get(container.name)
        if cpus is not None and missing is not None:
            return f"container {container.name} holds CPUs {cpus} but {missing}, before it, holds none"
        if cpus is None and missing is None and container.kind != ContainerKind.INIT:
            missing = container.name
    return None


def _shared_cpu(pod: PodView, entries: dict[str, CPUSet]) -> str | None:
    held = [c for c in pod.all_containers if c.name in entries]
    for i, first in enumerate(held):
        if first.kind == ContainerKind.INIT:
            continue  # runs alone: what comes after it may reuse its CPUs
        first_exclusive = container_exclusive_cpus(pod, first) > 0
        for second in held[i + 1 :]:
            second_exclusive = container_exclusive_cpus(pod, second) > 0
            if not first_exclusive and (second.kind == ContainerKind.INIT or not second_exclusive):
                # Sharing containers share the pod shared pool; a regular init container's slice may overlap it.
                continue
            common = entries[first.name] & entries[second.name]
            if common:
                return f"containers {first.name} and {second.name} both hold CPUs {common}"
    return None


def _outside(entries: dict[str, CPUSet], bubble: CPUSet | None, bubble_path: bool | None) -> str | None:
    if bubble is not None and bubble_path is False:
        return f"it holds pod CPUs {bubble} but is not admitted with a CPU budget of its own"
    for name, cpus in sorted(entries.items()):
        if bubble is None and bubble_path:
            return f"container {name} holds CPUs {cpus} but the pod holds no pod CPUs"
        if bubble is not None and not cpus.is_subset_of(bubble):
            return f"container {name} holds CPUs {cpus - bubble} outside the pod's CPUs {bubble}"
    return None


def find_stale(state: CPUState, pod: PodView, *, bubble_path: bool | None) -> tuple[StaleCause, str] | None:
    """The first rule the CPUs ``pod`` holds in ``state`` break, in words; None when they can be kept.

    Args:
        state: the CPU state the admission starts from.
        pod: the pod.
        bubble_path: whether the admission gives the pod a bubble (KEP-5526, pod scope, a whole-CPU budget);
            None when only the state's own shape counts: a pod admitted earlier keeps the path it was admitted
            on (a bubble means every container holds an entry), even if the configuration changed since.
    """
    entries = dict(state.assignments.get(pod.uid, {}))
    bubble = state.pod_entries.get(pod.uid)
    if not entries and bubble is None:
        return None
    held = CPUSet().union(*entries.values()) | (bubble or CPUSet())
    overlap = held & state.default
    if overlap:
        return StaleCause.OVERLAPS_SHARED, f"CPUs {overlap} are also in the node shared pool"
    for cause, detail in (
        (StaleCause.OUTSIDE_POD_CPUS, _outside(entries, bubble, bubble_path)),
        (StaleCause.NOT_PREFIX, _not_prefix(pod, entries, _entitled(pod, bubble is not None))),
        (StaleCause.SHARED_CPU, _shared_cpu(pod, entries)),
    ):
        if detail is not None:
            return cause, detail
    return None


def missing_entries(state: CPUState, pod: PodView) -> tuple[str, ...]:
    """The sidecars and app containers a pod holding CPUs lacks entries for (by its state's shape), in spec order.

    A pod that holds nothing lacks nothing: it was admitted without CPUs and stays so.
    """
    entries = state.assignments.get(pod.uid, {})
    bubble = state.pod_entries.get(pod.uid)
    if not entries and bubble is None:
        return ()
    return tuple(
        c.name for c in _entitled(pod, bubble is not None) if c.name not in entries and c.kind != ContainerKind.INIT
    )


def bubble_path_of(pod: PodView, *, pod_level: bool) -> bool:
    """Whether an admission on the KEP-5526 path (``pod_level``) gives this pod a bubble: a whole-CPU budget."""
    return pod_level and pod_level_cpus(pod) > 0


def release_stale(state: CPUState, pod: PodView, *, pod_level: bool) -> StaleAllocation | None:
    """Release everything ``pod`` holds in ``state`` (mutated) when it is stale; None when it can be kept.

    ``pod_level``: the pod is admitted on the KEP-5526 path (pod scope).

    The CPUs go back to the shared set, except any another pod holds (a state that contradicts itself across
    pods is refused before it gets here; this keeps even such a one from growing worse).
    """
    found = find_stale(state, pod, bubble_path=bubble_path_of(pod, pod_level=pod_level))
    if found is None:
        return None
    cause, detail = found
    held = state.pod_entries.pop(pod.uid, CPUSet()).union(*state.assignments.pop(pod.uid, {}).values())
    released = held - state.assigned()
    state.default = state.default | released
    return StaleAllocation(cause=cause, detail=detail, released=released)
