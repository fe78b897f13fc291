"""The example pods scaled to the test node (example_pods.py): shape kept, quantities divided, refusals named."""

from __future__ import annotations

import pytest

from tests.cluster.example_pods import ScaleError, scale_cpu, scale_memory, scaled_example
from tests.vm.ociimage import PROBE_IMAGE


@pytest.mark.parametrize(
    ("value", "pod_level", "expected"),
    [
        ("4", False, "1"),
        ("6", False, "1"),
        ("1", False, "1"),
        ("6", True, "2"),
        ("8", True, "2"),
        ("100m", False, "25m"),
    ],
)
def test_scale_cpu_keeps_whole_cpus_whole(value: str, pod_level: bool, expected: str) -> None:
    """A container's whole CPUs stay whole (at least one, so it stays exclusive); a pod budget rounds up (it keeps a
    shared pool); millicores are divided."""
    assert expected == scale_cpu(value, 4, pod_level=pod_level)


def test_scale_memory_keeps_a_floor() -> None:
    """Memory is divided, never below what a container needs to start."""
    assert ("576Mi", "32Mi") == (scale_memory("9Gi", 16), scale_memory("64Mi", 16))


def test_the_trading_engine_keeps_its_shape() -> None:
    """The trading engine at a quarter: a 2-CPU bubble, the database one exclusive CPU, the sidecars millicores, every
    container the probe image, never pulled, no uid (the API server gives one)."""
    pod = scaled_example("trading-engine-after.yaml", cpu_divisor=4, memory_divisor=16)
    containers = {c["name"]: c["resources"]["limits"]["cpu"] for c in pod["spec"]["containers"]}
    assert (
        "2",
        {"database": "1", "envoy": "375m", "log-collector": "125m"},
        {(PROBE_IMAGE.ref, "Never")},
        None,
    ) == (
        pod["spec"]["resources"]["limits"]["cpu"],
        containers,
        {(c["image"], c["imagePullPolicy"]) for c in pod["spec"]["containers"]},
        pod["metadata"].get("uid"),
    )


def test_a_scaled_pod_the_api_server_would_refuse_is_refused_here() -> None:
    """Divided too far, the containers' floors ask more memory than the pod: refused, naming the pod."""
    with pytest.raises(ScaleError) as err:
        scaled_example("trading-engine-after.yaml", cpu_divisor=4, memory_divisor=1024)
    assert str(err.value).startswith("trading-engine: its containers request")
