"""QoS class: the kubelet's ComputePodQOS for classic and pod-level pods, and status.qosClass."""

from __future__ import annotations

from typing import Any

import pytest

from agent.pods import pod_from_dict
from tests.support.podfactory import container, make_pod, resources, sidecar

_GPU = {"example.com/gpu": "1"}

_CLASSIC: list[Any] = [
    ("no-resources", make_pod(containers=[container("a"), container("b")]), "BestEffort"),
    ("request-equals-limit", make_pod(containers=[container("a", cpu="1", memory="1Gi")]), "Guaranteed"),
    (
        "limits-only-default-requests",
        make_pod(containers=[container("a", cpu_limit="2", memory_limit="1Gi")]),
        "Guaranteed",
    ),
    ("fractional-cpu-still-guaranteed", make_pod(containers=[container("a", cpu="977m", memory="1G")]), "Guaranteed"),
    (
        "request-below-limit",
        make_pod(containers=[container("a", cpu_request="1000m", cpu_limit="2000m", memory="1G")]),
        "Burstable",
    ),
    ("cpu-only", make_pod(containers=[container("a", cpu="1")]), "Burstable"),
    ("memory-only", make_pod(containers=[container("a", memory="1Gi")]), "Burstable"),
    ("requests-only", make_pod(containers=[container("a", cpu_request="1", memory_request="1Gi")]), "Burstable"),
    (
        "one-besteffort-container",
        make_pod(containers=[container("a", cpu="1", memory="1Gi"), container("b")]),
        "Burstable",
    ),
    (
        "besteffort-init-container",
        make_pod(containers=[container("a", cpu="1", memory="1Gi")], init_containers=[container("i")]),
        "Burstable",
    ),
    (
        "guaranteed-init-and-sidecar",
        make_pod(
            containers=[container("a", cpu="2", memory="1Gi")],
            init_containers=[container("i", cpu="4", memory="2Gi"), sidecar("s", cpu="100m", memory="64Mi")],
        ),
        "Guaranteed",
    ),
    (
        "burstable-sidecar",
        make_pod(
            containers=[container("a", cpu="2", memory="1Gi")],
            init_containers=[sidecar("s", cpu_request="100m", cpu_limit="200m")],
        ),
        "Burstable",
    ),
    ("zero-cpu-and-memory", make_pod(containers=[container("a", cpu="0", memory="0")]), "BestEffort"),
    ("zero-cpu-positive-memory", make_pod(containers=[container("a", cpu="0", memory="1Gi")]), "Burstable"),
    (
        "only-non-compute-resources",
        make_pod(containers=[container("a", limits={"ephemeral-storage": "1Gi", **_GPU})]),
        "BestEffort",
    ),
    (
        "extended-resource-ignored",
        make_pod(containers=[container("a", cpu="1", memory="1Gi", requests=_GPU, limits=_GPU)]),
        "Guaranteed",
    ),
]

_POD_LEVEL: list[Any] = [
    (
        "pod-level-equal",
        make_pod(containers=[container("a")], pod_resources=resources(cpu="2", memory="1Gi")),
        "Guaranteed",
    ),
    (
        "pod-level-ignores-burstable-containers",
        make_pod(
            containers=[container("a", cpu_request="500m", cpu_limit="1"), container("b")],
            pod_resources=resources(cpu="2", memory="1Gi"),
        ),
        "Guaranteed",
    ),
    (
        "pod-level-limits-only",
        make_pod(containers=[container("a")], pod_resources=resources(cpu_limit="4", memory_limit="4Gi")),
        "Guaranteed",
    ),
    (
        "pod-level-pitfall",
        make_pod(
            containers=[container("a", cpu_request="2", memory_request="2Gi")],
            pod_resources=resources(cpu_limit="4", memory_limit="4Gi"),
        ),
        "Burstable",
    ),
    ("pod-level-cpu-only", make_pod(containers=[container("a")], pod_resources=resources(cpu="2")), "Burstable"),
    (
        "pod-level-requests-only",
        make_pod(containers=[container("a")], pod_resources=resources(cpu_request="2", memory_request="1Gi")),
        "Burstable",
    ),
    (
        "pod-level-request-below-limit",
        make_pod(containers=[container("a")], pod_resources=resources(cpu_request="1", cpu_limit="2", memory="1Gi")),
        "Burstable",
    ),
    (
        "pod-level-ignores-guaranteed-containers",
        make_pod(
            containers=[container("a", cpu="1", memory="1Gi")],
            pod_resources=resources(cpu_request="1", memory_request="1Gi"),
        ),
        "Burstable",
    ),
    (
        "pod-level-zero",
        make_pod(containers=[container("a")], pod_resources=resources(cpu="0", memory="0")),
        "BestEffort",
    ),
]

_STATUS: list[Any] = [
    (
        "status-wins-over-computed",
        make_pod(containers=[container("a", cpu="1", memory="1Gi")], qos_class="Burstable"),
        "Burstable",
    ),
    (
        "status-besteffort-kept",
        make_pod(containers=[container("a", cpu="1", memory="1Gi")], qos_class="BestEffort"),
        "BestEffort",
    ),
    (
        "empty-status-is-computed",
        make_pod(containers=[container("a", cpu="1", memory="1Gi")], qos_class=""),
        "Guaranteed",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [pytest.param(r, e, id=i) for i, r, e in _CLASSIC])
def test_classic_qos(raw: dict[str, Any], expected: str) -> None:
    """Without spec.resources, QoS sums cpu and memory over app and init containers."""
    assert expected == pod_from_dict(raw).qos


@pytest.mark.parametrize(("raw", "expected"), [pytest.param(r, e, id=i) for i, r, e in _POD_LEVEL])
def test_pod_level_qos(raw: dict[str, Any], expected: str) -> None:
    """With spec.resources, QoS comes from pod-level cpu and memory alone, after defaulting."""
    assert expected == pod_from_dict(raw).qos


@pytest.mark.parametrize(("raw", "expected"), [pytest.param(r, e, id=i) for i, r, e in _STATUS])
def test_status_qos_class(raw: dict[str, Any], expected: str) -> None:
    """A non-empty status.qosClass is used as is (GetPodQOS); an empty one is computed."""
    assert expected == pod_from_dict(raw).qos
