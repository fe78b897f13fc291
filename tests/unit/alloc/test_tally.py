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
