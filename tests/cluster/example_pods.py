"""The example pods of deploy/examples/pods, scaled to the test node and run as probes.

The examples ask for a two-socket machine (a 6-CPU bubble, 24Gi); the guest node has 4 CPUs on 2 NUMA nodes and
4 GiB. :func:`scaled_example` keeps each example's shape — which containers are exclusive, which share the pod's
pool, which are sidecars or init containers — and divides its quantities: a whole-CPU value of a container stays
whole (``max(1, floor(v / k))``: an exclusive container stays exclusive), a pod-level whole-CPU budget is rounded
up (``ceil(v / k)``, so the pod keeps a shared pool beside its exclusive containers), millicores are divided (at
least 10m), memory is divided by ``memory_divisor`` (at least 32Mi, what a container needs to start). Every
container runs the probe image (its first log line is the ``Cpus_allowed_list`` it started with), never pulled.
A scaled pod whose containers would ask more than the pod is refused here, naming it, rather than by the API
server.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from agent.quantity import QuantityError, parse_quantity
from tests.vm.ociimage import PROBE_IMAGE

__all__ = ["EXAMPLES", "ScaleError", "scale_cpu", "scale_memory", "scaled_example"]

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "pods"
MIN_MILLICPU = 10
MIN_MEMORY = 32 * 2**20


class ScaleError(ValueError):
    """A quantity that cannot be scaled, or a scaled pod the API server would refuse; the message names it."""


def _cpu(value: Any) -> Fraction:
    try:
        return parse_quantity(str(value)).value
    except (QuantityError, ValueError) as err:
        raise ScaleError(f"cpu {value!r}: {err}") from err


def scale_cpu(value: Any, divisor: int, *, pod_level: bool) -> str:
    """One cpu quantity divided by ``divisor`` (module docstring): whole stays whole, millicores stay millicores."""
    cpus = _cpu(value)
    if cpus.denominator == 1:
        whole = math.ceil(cpus / divisor) if pod_level else max(1, math.floor(cpus / divisor))
        return str(whole)
    return f"{max(MIN_MILLICPU, round(cpus * 1000 / divisor))}m"


def scale_memory(value: Any, divisor: int) -> str:
    """One memory quantity divided by ``divisor``, in Mi (at least 32Mi)."""
    try:
        size = parse_quantity(str(value)).value
    except (QuantityError, ValueError) as err:
        raise ScaleError(f"memory {value!r}: {err}") from err
    return f"{max(MIN_MEMORY, math.ceil(size / divisor / 2**20) * 2**20) // 2**20}Mi"


def _scale_resources(resources: dict[str, Any], cpu: int, memory: int, *, pod_level: bool) -> dict[str, Any]:
    scaled: dict[str, Any] = {}
    for kind in ("requests", "limits"):
        values = resources.get(kind) or {}
        unknown = set(values) - {"cpu", "memory"}
        if unknown:
            raise ScaleError(f"{kind} of {sorted(unknown)}: only cpu and memory are scaled")
        if values:
            scaled[kind] = {}
            if "cpu" in values:
                scaled[kind]["cpu"] = scale_cpu(values["cpu"], cpu, pod_level=pod_level)
            if "memory" in values:
                scaled[kind]["memory"] = scale_memory(values["memory"], memory)
    return scaled


def _check_fits(pod: dict[str, Any]) -> None:
    """The API server refuses a pod whose containers request more than its pod-level requests: said here first."""
    budget = (pod["spec"].get("resources") or {}).get("requests") or {}
    containers = pod["spec"].get("containers", [])
    sidecars = [c for c in pod["spec"].get("initContainers", []) if c.get("restartPolicy") == "Always"]
    for resource in budget:
        asked = sum(
            (
                parse_quantity(str(c["resources"].get("requests", {}).get(resource, 0))).value
                for c in [*containers, *sidecars]
            ),
            Fraction(0),
        )
        if asked > parse_quantity(str(budget[resource])).value:
            raise ScaleError(
                f"{pod['metadata']['name']}: its containers request {float(asked):g} {resource}, more than the pod's "
                f"{budget[resource]} once scaled: choose other divisors"
            )


def scaled_example(name: str, *, cpu_divisor: int, memory_divisor: int) -> dict[str, Any]:
    """deploy/examples/pods/``name``, scaled (module docstring), without its uid, its containers running the probe.

    Raises:
        ScaleError: a quantity that cannot be scaled, or a scaled pod the API server would refuse.
    """
    pod: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    scaled = copy.deepcopy(pod)
    scaled["metadata"].pop("uid", None)
    spec = scaled["spec"]
    if "resources" in spec:
        spec["resources"] = _scale_resources(spec["resources"], cpu_divisor, memory_divisor, pod_level=True)
    for key in ("initContainers", "containers"):
        for container in spec.get(key, []):
            container["image"] = PROBE_IMAGE.ref
            container["imagePullPolicy"] = "Never"
            if container.get("restartPolicy") != "Always" and key == "initContainers":
                container["command"] = ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"]
            container["resources"] = _scale_resources(
                container.get("resources") or {}, cpu_divisor, memory_divisor, pod_level=False
            )
    spec["terminationGracePeriodSeconds"] = 1
    _check_fits(scaled)
    return scaled
