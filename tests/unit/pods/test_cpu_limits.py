"""The CFS quota the kubelet gives pods and containers (``MilliCPUToQuota``, ``getCPULimit``, ``ResourceConfigForPod``).

``podpin reset`` writes these back where podpin lifted a quota, so they must be
the kubelet's numbers for classic and pod-level pods, sidecars, overhead and
every QoS class.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.pods import cfs_quota, container_cpu_limit, pod_cpu_limit, pod_from_dict
from tests.support.podfactory import container, make_pod, resources, sidecar


@pytest.mark.parametrize(
    ("millis", "period", "quota"),
    [(2500, 100_000, 250_000), (4000, 50_000, 200_000), (5, 100_000, 1000), (None, 100_000, None), (0, 100_000, None)],
)
def test_quota_is_limit_times_period_at_least_one_millisecond(
    millis: int | None, period: int, quota: int | None
) -> None:
    """quota = millicores × period / 1000, at least 1000 µs; no limit (or 0) is no quota."""
    assert quota == cfs_quota(millis, period)


@pytest.mark.parametrize(
    ("raw", "name", "limit"),
    [
        (make_pod(containers=[container("c", cpu="2", memory="1Gi")]), "c", 2000),
        (
            make_pod(containers=[container("c", memory="1Gi")], pod_resources=resources(cpu="3", memory="2Gi")),
            "c",
            3000,
        ),
        (
            make_pod(
                containers=[container("c", cpu="1", memory="1Gi")], pod_resources=resources(cpu="3", memory="2Gi")
            ),
            "c",
            1000,
        ),
        (make_pod(containers=[container("c", cpu_request="1")]), "c", None),
    ],
    ids=["own-limit", "pod-level-fallback", "own-wins-over-pod", "no-limit"],
)
def test_container_limit_is_its_own_else_the_pods(raw: dict[str, Any], name: str, limit: int | None) -> None:
    """A container's quota comes from its own cpu limit, else from the pod-level cpu limit."""
    pod = pod_from_dict(raw)
    assert limit == container_cpu_limit(pod, pod.container(name))


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        (make_pod(containers=[container("a", cpu="2", memory="1Gi"), container("b", cpu="1", memory="1Gi")]), 3000),
        (
            make_pod(
                containers=[container("a", cpu="2", memory="1Gi")],
                init_containers=[sidecar("s", cpu="500m", memory="1Gi"), container("i", cpu="4", memory="1Gi")],
            ),
            4500,
        ),
        (
            make_pod(containers=[container("a", cpu="2", memory="1Gi")], overhead={"cpu": "250m", "memory": "64Mi"}),
            2250,
        ),
        (
            make_pod(
                containers=[container("a", cpu="2", memory="1Gi")], pod_resources=resources(cpu="5", memory="2Gi")
            ),
            5000,
        ),
        (make_pod(containers=[container("a", cpu_request="1", cpu_limit="2", memory="1Gi")]), 2000),
        (make_pod(containers=[container("a", cpu="1", memory="1Gi"), container("b", memory_request="1Gi")]), None),
        (
            make_pod(
                containers=[container("a", cpu_request="1", memory="1Gi"), container("b")],
                pod_resources=resources(cpu_limit="4"),
            ),
            4000,
        ),
        (make_pod(containers=[container("a")]), None),
    ],
    ids=[
        "guaranteed-sum",
        "sidecar-and-larger-init",
        "overhead",
        "pod-level",
        "burstable-all-declared",
        "burstable-one-undeclared",
        "burstable-pod-level-limit",
        "besteffort",
    ],
)
def test_pod_limit_as_resource_config_for_pod(raw: dict[str, Any], limit: int | None) -> None:
    """The pod cgroup's limit: pod-level, else the KEP-753 aggregate, plus overhead; Burstable only when declared."""
    assert limit == pod_cpu_limit(pod_from_dict(raw))
