"""The stale rule for restored allocations (``agent/alloc/cpumanager/restore.py``), stated rule by rule.

Each rule is checked over random pods (the shared ``pod_specs``): an allocation is made fresh, then cut or
damaged the way a restart can, and admitted again. Prefixes are kept and completed exactly as the fresh
allocation was; everything else is released, reported and allocated from scratch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent.alloc import Planner
from agent.alloc.cpumanager import CPUState
from agent.alloc.cpumanager.restore import StaleCause, find_stale, release_stale
from agent.alloc.state import Observed
from agent.alloc.tally import AllocationEvent, EventKind
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, PodView, container_exclusive_cpus
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources, sidecar
from tests.support.strategies import pod_specs

TOPOLOGY = machine(sockets=2, numa_per_socket=1, cores_per_numa=6, threads=1)
# Random pods are filtered to the admissible ones with gaps to restore; some draws filter more than Hypothesis's
# health check allows (seen once in CI-like runs), which says nothing about the rule under test.
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _planner(scope: str = "pod", state: Any = None) -> Planner:
    config = config_from_mapping(
        {"reservedSystemCPUs": "0", "topologyManagerPolicy": "best-effort", "topologyManagerScope": scope}, env={}
    ).planner
    return Planner(TOPOLOGY, config, state)


def _fresh(pod: PodView, scope: str) -> Planner:
    planner = _planner(scope)
    assume(planner.admit(pod).admitted and pod.uid in planner.snapshot().cpu.assignments)
    return planner


def _held(planner: Planner, uid: str) -> dict[str, CPUSet]:
    return dict(planner.snapshot().cpu.assignments.get(uid, {}))


def _stale_events(events: tuple[AllocationEvent, ...]) -> list[StaleCause]:
    return [e.stale.cause for e in events if e.kind == EventKind.STALE and e.stale is not None]


def _restored(planner: Planner, pod: PodView, entries: dict[str, CPUSet], scope: str) -> Planner:
    """A planner restarted from ``planner``'s state with ``pod``'s entries replaced by ``entries``."""
    cpu = planner.snapshot().cpu.copy()
    cpu.assignments[pod.uid] = dict(entries)
    if not entries:
        del cpu.assignments[pod.uid]
    cpu.default = TOPOLOGY.online_cpus - cpu.assigned()
    return _planner(scope, replace(planner.snapshot(), cpu=cpu))


def _pods(data: st.DataObject) -> tuple[PodView, str]:
    pod = pod_from_dict(data.draw(pod_specs(0)))
    return pod, data.draw(st.sampled_from(["pod", "container"]))


@SETTINGS
@given(data=st.data())
def test_every_prefix_is_kept_and_completed_as_the_fresh_allocation(data: st.DataObject) -> None:
    """Entries that are a prefix of the entitled containers in spec order, restored from a checkpoint or seen on
    the cgroups, are not stale: the pod is completed to exactly its fresh allocation (regular init containers
    after the prefix aside: they have run), with no stale event.

    Failed before the rule's completion: a restored pod holding a prefix was taken as admitted and never got the
    rest (and a sharing container seen on its cgroups was not kept, which made a gap)."""
    pod, scope = _pods(data)
    planner = _fresh(pod, scope)
    fresh = _held(planner, pod.uid)
    order = [c for c in pod.all_containers if c.name in fresh]
    stored = data.draw(st.booleans(), label="stored")
    bubble = planner.snapshot().cpu.pod_entries.get(pod.uid)
    # A restored pod that holds nothing at all was admitted without CPUs and stays so (a configuration change).
    cut = data.draw(st.integers(0 if bubble is not None or not stored else 1, len(order)))
    kept = {c.name: fresh[c.name] for c in order[:cut]}
    if stored:
        restored = _restored(planner, pod, kept, scope)
        decision = restored.admit(pod)
    else:
        restored = _planner(scope)
        decision = restored.admit(pod, Observed(containers=kept, pod=bubble))
    held = _held(restored, pod.uid)
    running = {c.name for c in pod.all_containers if c.kind != ContainerKind.INIT} | set(kept)
    assert ([], {n: cpus for n, cpus in fresh.items() if n in running}) == (
        _stale_events(decision.allocations),
        {n: cpus for n, cpus in held.items() if n in running},
    )


@SETTINGS
@given(data=st.data())
def test_a_container_holding_cpus_after_one_that_lost_them_makes_the_pod_stale(data: st.DataObject) -> None:
    """A sidecar or app container without its entry in front of a container with one: ``not_prefix``; the
    pod's CPUs are released and it is allocated from scratch, which is its fresh allocation again."""
    pod, scope = _pods(data)
    planner = _fresh(pod, scope)
    fresh = _held(planner, pod.uid)
    order = [c for c in pod.all_containers if c.name in fresh]
    gaps = [i for i, c in enumerate(order[:-1]) if c.kind != ContainerKind.INIT]
    assume(gaps)
    gap = order[data.draw(st.sampled_from(gaps))].name
    restored = _restored(planner, pod, {name: cpus for name, cpus in fresh.items() if name != gap}, scope)
    decision = restored.admit(pod)
    assert ([StaleCause.NOT_PREFIX], fresh) == (_stale_events(decision.allocations), _held(restored, pod.uid))


@SETTINGS
@given(data=st.data())
def test_an_exclusive_container_sharing_a_cpu_with_a_later_one_makes_the_pod_stale(data: st.DataObject) -> None:
    """A checkpoint where a later container holds an exclusive sidecar's or app container's CPUs (what the
    overlap bug wrote): ``shared_cpu``, and the pod gets its fresh allocation back."""
    pod, scope = _pods(data)
    planner = _fresh(pod, scope)
    fresh = _held(planner, pod.uid)
    order = [c for c in pod.all_containers if c.name in fresh]
    pairs = [
        (a.name, b.name)
        for i, a in enumerate(order)
        for b in order[i + 1 :]
        if a.kind != ContainerKind.INIT and container_exclusive_cpus(pod, a) > 0
    ]
    assume(pairs)
    first, second = data.draw(st.sampled_from(pairs))
    damaged = dict(fresh)
    damaged[second] = fresh[first] if len(fresh[first]) == len(fresh[second]) else fresh[first] | fresh[second]
    restored = _restored(planner, pod, damaged, scope)
    decision = restored.admit(pod)
    assert ([StaleCause.SHARED_CPU], fresh) == (_stale_events(decision.allocations), _held(restored, pod.uid))


def _kep_pod(*init: dict[str, Any]) -> PodView:
    return pod_from_dict(
        make_pod(
            "kep",
            init_containers=list(init),
            containers=[
                container("c1", cpu="2", memory="1Gi"),
                container("c2", cpu="2", memory="1Gi"),
                container("c3"),
            ],
            pod_resources=resources(cpu="6", memory="4Gi"),
        )
    )


def test_cpus_also_in_the_shared_pool_make_the_pod_stale_and_go_back_once() -> None:
    """The kubelet's second test: a pod whose CPUs are also in the shared set is stale; releasing it leaves
    every CPU in exactly one place and the other pods' CPUs where they were."""
    pod, other = _kep_pod(), pod_from_dict(make_pod("other", containers=[container("a", cpu="2", memory="1Gi")]))
    state = CPUState(
        default=CPUSet.parse("0,5-11"),
        assignments={
            pod.uid: {"c1": CPUSet.parse("1-2"), "c2": CPUSet.parse("3-4"), "c3": CPUSet.parse("5-6")},
            other.uid: {"a": CPUSet.parse("6-7")},
        },
        pod_entries={pod.uid: CPUSet.parse("1-6")},
    )
    stale = release_stale(state, pod, pod_level=True)
    assert stale is not None
    assert (StaleCause.OVERLAPS_SHARED, CPUSet.parse("1-5"), CPUSet.parse("0-11"), [other.uid]) == (
        stale.cause,
        stale.released,
        state.default | CPUSet.parse("6-7"),
        list(state.assignments),
    )


def test_the_kubelet_issue_example_gap_is_planned_without_two_owners() -> None:
    """Issue 17's example: ``c2`` kept CPU 3-4 from its cgroup, ``c1`` (before it) lost its cgroup. Before the
    rule ``c1`` was carved from a pool still holding 3-4; now the pod is allocated from scratch and says so."""
    pod = _kep_pod()
    planner = _planner()
    decision = planner.admit(pod, Observed(containers={"c2": CPUSet.parse("3-4")}, pod=CPUSet.parse("1-6")))
    held = _held(planner, pod.uid)
    assert ([StaleCause.NOT_PREFIX], (), CPUSet()) == (
        _stale_events(decision.allocations),
        decision.kept_observed,
        held["c1"] & held["c2"],
    )


def test_a_finished_init_container_is_no_gap() -> None:
    """A regular init container runs to completion first and its cgroup is gone: the app containers it preceded
    keep their CPUs (the kubelet would count it; podpin cannot see it and its absence overlaps nothing)."""
    pod = _kep_pod(container("setup", cpu="1", memory="64Mi"))
    planner = _planner()
    seen = Observed(
        containers={"c1": CPUSet.parse("1-2"), "c2": CPUSet.parse("3-4"), "c3": CPUSet.parse("5-6")},
        pod=CPUSet.parse("1-6"),
    )
    decision = planner.admit(pod, seen)
    held = _held(planner, pod.uid)
    assert ([], ("c1", "c2", "c3"), CPUSet.parse("1-2"), CPUSet.parse("3-4")) == (
        _stale_events(decision.allocations),
        decision.kept_observed,
        held["c1"],
        held["c2"],
    )


def test_a_sidecar_that_lost_its_cpus_before_a_kept_container_is_a_gap() -> None:
    """A sidecar is a long-running container: missing in front of a kept app container it is a gap."""
    pod = _kep_pod(sidecar("mesh", cpu="1", memory="64Mi"))
    state = CPUState(
        default=CPUSet.parse("0,7-11"),
        assignments={pod.uid: {"c1": CPUSet.parse("2-3")}},
        pod_entries={pod.uid: CPUSet.parse("1-6")},
    )
    assert (StaleCause.NOT_PREFIX, "container c1 holds CPUs 2-3 but mesh, before it, holds none") == find_stale(
        state, pod, bubble_path=True
    )


def test_pod_cpus_are_judged_against_the_path_the_pod_takes() -> None:
    """A bubble the path does not give, entries outside the bubble, or entries without the bubble the path
    gives are ``outside_pod_cpus``; a pod admitted earlier on another path (``bubble_path=None``) is judged by
    its own shape only, so a scope change alone moves no running pod."""
    pod = _kep_pod()
    bubble = CPUState(
        default=CPUSet.parse("0,7-11"),
        assignments={pod.uid: {"c1": CPUSet.parse("1-2"), "c2": CPUSet.parse("3-4"), "c3": CPUSet.parse("5-6")}},
        pod_entries={pod.uid: CPUSet.parse("1-6")},
    )
    slices = CPUState(
        default=CPUSet.parse("0,5-11"), assignments={pod.uid: {"c1": CPUSet.parse("1-2"), "c2": CPUSet.parse("3-4")}}
    )
    outside = bubble.copy()
    outside.assignments[pod.uid]["c2"] = CPUSet.parse("7-8")
    outside.default = CPUSet.parse("0,9-11")
    assert [StaleCause.OUTSIDE_POD_CPUS, None, StaleCause.OUTSIDE_POD_CPUS, None, StaleCause.OUTSIDE_POD_CPUS] == [
        (found[0] if found else None)
        for found in (
            find_stale(bubble, pod, bubble_path=False),
            find_stale(bubble, pod, bubble_path=None),
            find_stale(slices, pod, bubble_path=True),
            find_stale(slices, pod, bubble_path=None),
            find_stale(outside, pod, bubble_path=None),
        )
    ]


def test_a_stale_pod_that_no_longer_fits_holds_nothing() -> None:
    """Restored with two containers on one CPU, the pod is admitted again; when it no longer fits (the node
    filled up meanwhile) it is rejected and released, so nothing stale stays behind."""
    pod = pod_from_dict(
        make_pod("big", containers=[container("a", cpu="5", memory="1Gi"), container("b", cpu="5", memory="1Gi")])
    )
    filler = pod_from_dict(make_pod("filler", containers=[container("x", cpu="1", memory="1Gi")]))
    planner = _planner("container")
    assert (True, True) == (planner.admit(pod).admitted, planner.admit(filler).admitted)
    cpu = planner.snapshot().cpu.copy()
    cpu.assignments[pod.uid]["b"] = cpu.assignments[pod.uid]["a"]
    cpu.default = TOPOLOGY.online_cpus - cpu.assigned()
    extra = pod_from_dict(make_pod("extra", containers=[container("y", cpu="5", memory="1Gi")]))
    restored = _planner("container", replace(planner.snapshot(), cpu=cpu))
    assert restored.admit(extra).admitted
    decision = restored.admit(pod)
    assert (False, [StaleCause.SHARED_CPU], False, None) == (
        decision.admitted,
        _stale_events(decision.allocations),
        restored.is_admitted(pod.uid),
        restored.snapshot().cpu.assignments.get(pod.uid),
    )


def test_policy_none_seeds_no_bubble_so_nothing_is_stale() -> None:
    """Policy ``none`` admits a pod-level pod container by container, so the cgroups offer slices, not a bubble:
    the running containers keep their CPUs and nothing is reported stale.

    Failed before: the pod cgroup's set was seeded as a bubble the ``none`` path never gives, found stale
    (``outside_pod_cpus``) and the pod allocated again."""
    config = config_from_mapping(
        {"reservedSystemCPUs": "0", "topologyManagerPolicy": "none", "topologyManagerScope": "pod"}, env={}
    ).planner
    planner = Planner(TOPOLOGY, config)
    pod = _kep_pod()
    seen = Observed(containers={"c1": CPUSet.parse("3-4"), "c2": CPUSet.parse("5-6")}, pod=CPUSet.parse("1-6"))
    decision = planner.admit(pod, seen)
    assert ([], ("c1", "c2"), {"c1": CPUSet.parse("3-4"), "c2": CPUSet.parse("5-6")}) == (
        _stale_events(decision.allocations),
        decision.kept_observed,
        _held(planner, pod.uid),
    )
