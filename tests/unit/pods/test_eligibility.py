"""Who gets exclusive CPUs and memory: per container, per pod, classic and pod-level."""

from __future__ import annotations

from typing import Any

import pytest

from agent.pods import (
    container_exclusive_cpus,
    container_memory_eligible,
    container_memory_requests,
    pod_from_dict,
    pod_level_cpus,
    pod_level_memory,
    uses_pod_level_path,
)
from tests.support import vectors
from tests.support.podfactory import container, from_vector, make_pod, resources, sidecar

GI = 2**30
MI = 2**20
_HP = {"hugepages-2Mi": "256Mi"}

# (id, raw pod, container name, expected exclusive CPUs, expected memory eligibility)
_CONTAINERS: list[Any] = [
    ("977m-is-not-integral", make_pod(containers=[container("c", cpu="977m", memory="1G")]), "c", 0, True),
    (
        "burstable-1000m-2000m",
        make_pod(containers=[container("c", cpu_request="1000m", cpu_limit="2000m", memory="1G")]),
        "c",
        0,
        False,
    ),
    ("integral-2", make_pod(containers=[container("c", cpu="2", memory="1G")]), "c", 2, True),
    ("integral-in-millis", make_pod(containers=[container("c", cpu="4000m", memory="1G")]), "c", 4, True),
    (
        "guaranteed-init-container",
        make_pod(
            containers=[container("a", cpu="1", memory="1G")], init_containers=[container("i", cpu="3", memory="1G")]
        ),
        "i",
        3,
        True,
    ),
    (
        "guaranteed-sidecar",
        make_pod(
            containers=[container("a", cpu="1", memory="1G")], init_containers=[sidecar("s", cpu="1", memory="1G")]
        ),
        "s",
        1,
        True,
    ),
    ("besteffort-pod", make_pod(containers=[container("c")]), "c", 0, False),
    (
        "status-qos-burstable",
        make_pod(containers=[container("c", cpu="2", memory="1G")], qos_class="Burstable"),
        "c",
        0,
        False,
    ),
    (
        "pod-level-cpu-only-container",
        make_pod(containers=[container("c", cpu="1"), container("d")], pod_resources=resources(cpu="4", memory="1Gi")),
        "c",
        0,
        False,
    ),
    (
        "pod-level-equivalent-guaranteed",
        make_pod(
            containers=[container("c", cpu="2", memory="512Mi"), container("d")],
            pod_resources=resources(cpu="4", memory="1Gi"),
        ),
        "c",
        2,
        True,
    ),
    (
        "pod-level-memory-only-eligible",
        make_pod(
            containers=[container("c", cpu="500m", memory="512Mi"), container("d")],
            pod_resources=resources(cpu="4", memory="1Gi"),
        ),
        "c",
        0,
        True,
    ),
    (
        "pod-level-request-below-limit",
        make_pod(
            containers=[container("c", cpu_request="1", cpu_limit="2", memory="512Mi")],
            pod_resources=resources(cpu="4", memory="1Gi"),
        ),
        "c",
        0,
        False,
    ),
    (
        "pod-level-no-resources",
        make_pod(containers=[container("c")], pod_resources=resources(cpu="4", memory="1Gi")),
        "c",
        0,
        False,
    ),
    (
        "pod-level-zero-cpu",
        make_pod(containers=[container("c", cpu="0", memory="512Mi")], pod_resources=resources(cpu="4", memory="1Gi")),
        "c",
        0,
        False,
    ),
    (
        "pod-level-burstable-pod",
        make_pod(
            containers=[container("c", cpu="2", memory="2Gi")],
            pod_resources=resources(cpu_limit="4", memory_limit="4Gi"),
        ),
        "c",
        0,
        False,
    ),
    (
        "pod-level-sidecar",
        make_pod(
            containers=[container("a")],
            init_containers=[sidecar("s", cpu="1", memory="64Mi")],
            pod_resources=resources(cpu="3", memory="1Gi"),
        ),
        "s",
        1,
        True,
    ),
]


@pytest.mark.parametrize(
    ("raw", "name", "cpus", "memory"), [pytest.param(r, n, c, m, id=i) for i, r, n, c, m in _CONTAINERS]
)
def test_container_eligibility(raw: dict[str, Any], name: str, cpus: int, memory: bool) -> None:
    """Exclusive CPUs need a Guaranteed pod and integral CPUs, plus an equivalent-Guaranteed container at pod level."""
    pod = pod_from_dict(raw)
    target = pod.container(name)
    assert (cpus, memory) == (container_exclusive_cpus(pod, target), container_memory_eligible(pod, target))


def test_container_memory_requests_are_memory_and_hugepages_above_zero() -> None:
    """The memory slice holds memory and every hugepages size requested, not cpu, devices or zero entries."""
    extra = {**_HP, "hugepages-1Gi": "0", "example.com/gpu": "1"}
    pod = pod_from_dict(make_pod(containers=[container("c", cpu="1", memory="1Gi", requests=extra, limits=extra)]))
    assert {"memory": GI, "hugepages-2Mi": 256 * MI} == dict(container_memory_requests(pod.container("c")))


# (id, raw pod, expected pod_level_cpus, expected pod_level_memory, expected uses_pod_level_path)
_PODS: list[Any] = [
    (
        "guaranteed-pod-level",
        make_pod(
            containers=[container("c", limits={"cpu": "1", "memory": "1Gi", **_HP})],
            pod_resources={
                "requests": {"cpu": "4", "memory": "2Gi", **_HP},
                "limits": {"cpu": "4", "memory": "2Gi", **_HP},
            },
        ),
        4,
        {"memory": 2 * GI, "hugepages-2Mi": 256 * MI},
        True,
    ),
    (
        "non-integral-pod-cpu",
        make_pod(containers=[container("c")], pod_resources=resources(cpu="4500m", memory="1Gi")),
        0,
        {"memory": GI},
        True,
    ),
    (
        "burstable-pod-level",
        make_pod(
            containers=[container("c", cpu_request="2", memory_request="2Gi")],
            pod_resources=resources(cpu_limit="4", memory_limit="4Gi"),
        ),
        0,
        {},
        False,
    ),
    ("classic-guaranteed", make_pod(containers=[container("c", cpu="4", memory="1Gi")]), 0, {}, False),
]


@pytest.mark.parametrize(("raw", "cpus", "memory", "path"), [pytest.param(r, c, m, p, id=i) for i, r, c, m, p in _PODS])
def test_pod_level_totals(raw: dict[str, Any], cpus: int, memory: dict[str, int], path: bool) -> None:
    """The pod bubble is the integral pod cpu request and pod memory/hugepages of a Guaranteed pod-level pod."""
    pod = pod_from_dict(raw)
    assert (cpus, memory, path) == (pod_level_cpus(pod), dict(pod_level_memory(pod)), uses_pod_level_path(pod))


def _vector_pods(*, pod_level: bool) -> list[Any]:
    found = []
    for case in vectors.load("static_policy.json"):
        pod = case.get("pod")
        if pod and (pod.get("pod_resources") is not None) == pod_level:
            found.append(pytest.param(case, id=case["id"]))
    return found


@pytest.mark.parametrize("case", _vector_pods(pod_level=False))
def test_classic_vector_pods(case: dict[str, Any]) -> None:
    """The kubelet vectors' derived QoS and exclusive CPU counts match, container by container."""
    pod = pod_from_dict(from_vector(case["pod"]))
    vector = case["pod"]["init_containers"] + case["pod"]["containers"]
    expected = (case["pod"]["derived_qos"], [c["derived_exclusive_cpus"] for c in vector])
    assert expected == (pod.qos, [container_exclusive_cpus(pod, c) for c in pod.all_containers])


@pytest.mark.parametrize("case", [c for c in _vector_pods(pod_level=True) if c.values[0]["expect_error"] is None])
def test_pod_level_vector_pods(case: dict[str, Any]) -> None:
    """AllocatePod vectors: exclusive vs pod shared counts and the bubble size agree with eligibility."""
    pod = pod_from_dict(from_vector(case["pod"]))
    exclusive = sum(1 for c in pod.all_containers if container_exclusive_cpus(pod, c) > 0)
    assigned = set().union(*(vectors.cpuset(s) for s in case["expect_assignments"][case["pod"]["uid"]].values()))
    metrics = case["expect_metrics"]
    expected = (metrics["exclusive_assignments"], metrics["pod_shared_pool_assignments"], len(assigned))
    assert expected == (exclusive, len(pod.all_containers) - exclusive, pod_level_cpus(pod))
