"""The planner's AllocationEvents: what the kubelet's pinning and alignment counters count for one admission."""

from __future__ import annotations

from typing import Any

from agent.alloc import Planner
from agent.alloc.tally import AlignBoundary, AlignScope, AllocationEvent
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

OK = AllocationEvent.pinning(ok=True)
FAILED = AllocationEvent.pinning(ok=False)


def _planner(**config: Any) -> Planner:
    return Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0", **config}, env={}).planner)


def _pod(name: str, *containers: dict[str, Any], pod_cpu: str | None = None) -> Any:
    pod_resources = resources(cpu=pod_cpu, memory="5Gi") if pod_cpu else None
    return pod_from_dict(make_pod(name, containers=list(containers), pod_resources=pod_resources))


def test_pod_level_pod_counts_one_request_per_slice_and_one_aligned_pod() -> None:
    """KEP-5526 pod, pod scope, single-numa-node: one exclusive slice is one request, the pod one NUMA-aligned pod."""
    pod = _pod(
        "kep",
        container("c1", cpu="3", memory="1Gi"),
        container("c2", cpu_request="500m", cpu_limit="1", memory="1Gi"),
        pod_cpu="5",
    )
    decision = _planner(topologyManagerPolicy="single-numa-node", topologyManagerScope="pod").admit(pod)
    expected = (True, (OK, AllocationEvent.alignment(AlignScope.POD, AlignBoundary.NUMA_NODE, ok=True)))
    assert expected == (decision.admitted, decision.allocations)


def test_pod_level_pod_without_shared_room_is_one_failed_request() -> None:
    """Exclusive slices that leave the pod no shared pool: AllocatePod fails, one failed request, no alignment."""
    pod = _pod(
        "full",
        container("c1", cpu="3", memory="1Gi"),
        container("c2", cpu="2", memory="1Gi"),
        container("c3"),
        pod_cpu="5",
    )
    decision = _planner(topologyManagerPolicy="best-effort", topologyManagerScope="pod").admit(pod)
    assert (False, "EmptyPodSharedPoolError", (FAILED,)) == (decision.admitted, decision.reason, decision.allocations)


UNCORE = AllocationEvent.alignment(AlignScope.CONTAINER, AlignBoundary.UNCORE_CACHE, ok=True)


def test_policy_none_counts_requests_but_no_numa_alignment() -> None:
    """Policy none: each exclusive container is a request, a shared one (500m) none; NUMA alignment is not
    counted, but each new allocation on one uncore cache is (the CPU manager counts it whatever the policy)."""
    pod = _pod(
        "two",
        container("a", cpu="2", memory="1Gi"),
        container("b", cpu="1", memory="1Gi"),
        container("c", cpu="500m", memory="1Gi"),
    )
    decision = _planner(topologyManagerPolicy="none").admit(pod)
    assert (OK, UNCORE, OK, UNCORE) == decision.allocations


def test_an_allocation_across_uncore_caches_is_not_counted_aligned() -> None:
    """10 CPUs cannot sit on one uncore cache (8 CPUs each here): a request, and no uncore_cache count either way."""
    decision = _planner(topologyManagerPolicy="none").admit(_pod("wide", container("a", cpu="10", memory="1Gi")))
    assert (True, (OK,)) == (decision.admitted, decision.allocations)


def test_an_admitted_pod_seen_again_counts_nothing() -> None:
    """A pod already in the state is not admitted again: no allocation, nothing counted."""
    planner = _planner(topologyManagerPolicy="none")
    pod = _pod("one", container("a", cpu="2", memory="1Gi"))
    first = planner.admit(pod)
    assert ((OK, UNCORE), ()) == (first.allocations, planner.admit(pod).allocations)


MEMORY_OK = AllocationEvent.memory_pinning(ok=True)
MEMORY_FAILED = AllocationEvent.memory_pinning(ok=False)
STATIC_MEMORY = {
    "memoryManagerPolicy": "Static",
    "systemReserved": {"memory": "924Mi"},
    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
}


def _memory_events(decision: Any) -> tuple[AllocationEvent, ...]:
    return tuple(e for e in decision.allocations if e.kind == MEMORY_OK.kind)


def test_static_memory_counts_one_request_per_container_of_a_guaranteed_pod() -> None:
    """The memory manager's Allocate counts every container of a Guaranteed pod, whatever it requests (as the
    kubelet's memory_manager_pinning_requests_total); a Burstable pod counts nothing."""
    planner = _planner(topologyManagerPolicy="single-numa-node", **STATIC_MEMORY)
    guaranteed = _pod("g", container("a", cpu="2", memory="1Gi"), container("b", cpu="500m", memory="1Gi"))
    burstable = _pod("b", container("a", cpu_request="100m", memory="1Gi"))
    assert ((MEMORY_OK, MEMORY_OK), ()) == (
        _memory_events(planner.admit(guaranteed)),
        _memory_events(planner.admit(burstable)),
    )


def test_static_memory_counts_one_request_per_pod_level_pod_and_an_error_when_it_fails() -> None:
    """AllocatePod is one memory request; memory beyond any NUMA node under restricted is one request, one error."""
    planner = _planner(topologyManagerPolicy="restricted", topologyManagerScope="pod", **STATIC_MEMORY)
    fits = _pod("fits", container("c1", cpu="2", memory="1Gi"), container("c2"), pod_cpu="3")
    huge = pod_from_dict(
        make_pod(
            "huge",
            containers=[container("c1", cpu="1", memory="100Gi")],
            pod_resources=resources(cpu="2", memory="100Gi"),
        )
    )
    admitted, refused = planner.admit(fits), planner.admit(huge)
    assert ((MEMORY_OK,), (False, (MEMORY_FAILED,))) == (
        _memory_events(admitted),
        (refused.admitted, _memory_events(refused)),
    )


def test_without_the_static_memory_policy_nothing_is_counted_for_memory() -> None:
    """memoryManagerPolicy None: no memory manager, no memory counts."""
    decision = _planner(topologyManagerPolicy="single-numa-node").admit(
        _pod("g", container("a", cpu="2", memory="1Gi"))
    )
    assert () == _memory_events(decision)
