"""The NodeResourceTopologyMatch emulation of ``podpin simulate --scheduler numa-aware``: filter, score, figures."""

from __future__ import annotations

from typing import Any

import pytest

from agent.alloc import TopologyManagerPolicy, TopologyManagerScope
from agent.config import config_from_mapping
from agent.pods import PodView, pod_from_dict
from agent.sim.engine import simulate
from agent.sim.machines import example_machine
from agent.sim.numa_aware import nrt_filter, nrt_score, topology_manager, zones_of
from agent.sim.presets import preset
from agent.sim.scheduler import SchedulerName
from tests.support.podfactory import container, make_pod, sidecar


def nrt(policy: str, scope: str, *zones: dict[str, str]) -> dict[str, Any]:
    """An NRT object with one Node zone per mapping of resource -> available."""
    return {
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [{"name": k, "capacity": v, "allocatable": v, "available": v} for k, v in zone.items()],
            }
            for i, zone in enumerate(zones)
        ]
        + [{"name": "socket-0", "type": "Socket", "resources": [{"name": "cpu", "available": "64"}]}],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ],
    }


def gu(cpus: str, memory: str = "1Gi", **extra: str) -> PodView:
    requests = {"cpu": cpus, "memory": memory, **extra}
    return pod_from_dict(
        make_pod("p", containers=[{"name": "c", "resources": {"requests": requests, "limits": requests}}])
    )


def test_zones_and_attributes_are_read_like_the_plugin() -> None:
    """Only Node zones named node-<id> count; attributes give policy and scope, defaulting to none/container."""
    obj = nrt("single-numa-node", "pod", {"cpu": "4", "memory": "1Gi"})
    obj["zones"].append({"name": "node-x", "type": "Node", "resources": [{"name": "cpu", "available": "8"}]})
    assert [0] == [z.numa for z in zones_of(obj)]
    assert {"cpu": 4000, "memory": 2**30} == dict(zones_of(obj)[0].available)
    assert (TopologyManagerPolicy.SINGLE_NUMA_NODE, TopologyManagerScope.POD) == topology_manager(obj)
    assert (TopologyManagerPolicy.NONE, TopologyManagerScope.CONTAINER) == topology_manager({"zones": []})


def test_unknown_attribute_values_read_as_the_plugins_defaults() -> None:
    """A policy or scope name the plugin does not know counts as its default: none, container."""
    assert (TopologyManagerPolicy.NONE, TopologyManagerScope.CONTAINER) == topology_manager(
        nrt("SingleNUMANode", "Pod", {"cpu": "4"})
    )


@pytest.mark.parametrize(
    ("pod", "zones", "expected"),
    [
        (gu("4"), ({"cpu": "3", "memory": "8Gi"}, {"cpu": "4", "memory": "8Gi"}), True),
        (gu("4"), ({"cpu": "3", "memory": "8Gi"}, {"cpu": "3", "memory": "8Gi"}), False),
        (gu("4", "8Gi"), ({"cpu": "4", "memory": "1Gi"}, {"cpu": "1", "memory": "8Gi"}), False),
        (
            gu("2", **{"vendor.com/gpu": "1"}),
            (
                {"cpu": "4", "memory": "8Gi", "vendor.com/gpu": "0"},
                {"cpu": "4", "memory": "8Gi", "vendor.com/gpu": "1"},
            ),
            True,
        ),
        (
            gu("2", **{"vendor.com/gpu": "1"}),
            ({"cpu": "1", "memory": "8Gi", "vendor.com/gpu": "1"}, {"cpu": "4", "memory": "8Gi"}),
            False,
        ),
        (gu("2", **{"hugepages-2Mi": "2Mi"}), ({"cpu": "4", "memory": "8Gi"},), False),
    ],
    ids=["fits-on-node-1", "split-only", "memory-elsewhere", "gpu-follows", "gpu-without-cpu", "hugepages-unknown"],
)
def test_single_numa_node_pod_scope_filter(pod: PodView, zones: tuple[dict[str, str], ...], expected: bool) -> None:
    """Every requested resource must fit one and the same zone."""
    assert expected == nrt_filter(pod, nrt("single-numa-node", "pod", *zones))


def test_other_policies_and_best_effort_pods_pass() -> None:
    """best-effort (and any policy but single-numa-node) filters nothing; BestEffort pods always pass."""
    full = ({"cpu": "0", "memory": "0"},)
    assert nrt_filter(gu("4"), nrt("best-effort", "pod", *full))
    assert nrt_filter(pod_from_dict(make_pod("be")), nrt("single-numa-node", "pod", *full))


def test_burstable_pods_pass_on_cpu_and_memory() -> None:
    """A Burstable pod's CPU and memory fit any zone listing them, as in isResourceSetSuitable."""
    burstable = pod_from_dict(
        make_pod(
            "b",
            containers=[container("c", cpu_request="8", cpu_limit="16", memory_request="1Gi", memory_limit="2Gi")],
        )
    )
    assert nrt_filter(burstable, nrt("single-numa-node", "pod", {"cpu": "1", "memory": "1Mi"}))


def test_container_scope_subtracts_each_container() -> None:
    """Container scope: two 3-CPU containers need 3 + 3 on one zone, or one on each; a sidecar counts too."""
    two = pod_from_dict(
        make_pod("t", containers=[container("a", cpu="3", memory="1Gi"), container("b", cpu="3", memory="1Gi")])
    )
    assert nrt_filter(
        two, nrt("single-numa-node", "container", {"cpu": "3", "memory": "8Gi"}, {"cpu": "3", "memory": "8Gi"})
    )
    assert not nrt_filter(
        two, nrt("single-numa-node", "container", {"cpu": "5", "memory": "8Gi"}, {"cpu": "0", "memory": "8Gi"})
    )
    with_sidecar = pod_from_dict(
        make_pod(
            "s",
            containers=[container("a", cpu="3", memory="1Gi")],
            init_containers=[sidecar("s", cpu="2", memory="1Gi")],
        )
    )
    assert not nrt_filter(with_sidecar, nrt("single-numa-node", "container", {"cpu": "4", "memory": "8Gi"}))
    assert nrt_filter(with_sidecar, nrt("single-numa-node", "container", {"cpu": "5", "memory": "8Gi"}))


def test_least_allocated_score() -> None:
    """Per zone (avail − req) × 100 / avail averaged over cpu and memory; the node takes its smallest non-zero zone."""
    pod = gu("2", "2Gi")
    # zone 0: cpu (4-2)*100/4 = 50, memory (8-2)*100/8 = 75 -> 62; zone 1: cpu 1 < 2 -> 0, memory 75 -> 37
    assert 37 == nrt_score(
        pod, nrt("single-numa-node", "pod", {"cpu": "4", "memory": "8Gi"}, {"cpu": "1", "memory": "8Gi"})
    )
    # a zone that fits nothing (score 0) is skipped
    assert 62 == nrt_score(
        pod, nrt("single-numa-node", "pod", {"cpu": "4", "memory": "8Gi"}, {"cpu": "0", "memory": "0"})
    )
    assert 0 == nrt_score(pod, nrt("best-effort", "pod", {"cpu": "4", "memory": "8Gi"}))
    assert 100 == nrt_score(pod_from_dict(make_pod("be")), nrt("single-numa-node", "pod", {"cpu": "4"}))


def test_seed_mesh_single_numa_node_rejects_nothing() -> None:
    """seed-mesh, single-numa-node, per container: 40 rejections with a NUMA-blind scheduler, 0 NUMA-aware; 160
    admitted either way."""
    config = config_from_mapping(
        {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod", "kubeReserved": {"cpu": "1"}},
        env={},
    )
    figures = {}
    for scheduler in (SchedulerName.LEAST_ALLOCATED, SchedulerName.NUMA_AWARE):
        sim = simulate(
            example_machine(),
            config.planner,
            preset("seed-mesh"),
            allocatable=config.node_allocatable,
            scheduler=scheduler,
        )
        per_container, pod_level = sim.results["per-container"], sim.results["pod-level"]
        figures[scheduler] = (
            per_container.pods_admitted,
            per_container.pods_rejected,
            per_container.pods_unschedulable,
            pod_level.pods_admitted,
            pod_level.pods_rejected,
        )
    assert {"least-allocated": (160, 40, 0, 200, 0), "numa-aware": (160, 0, 40, 200, 0)} == figures
