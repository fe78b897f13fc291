"""A simulation workload: pod templates with counts, in arrival order.

A workload describes pods the way a platform team thinks of them *after*
pod-level resources: which containers are the latency-critical mains (whole
CPUs, exclusive) and which are sidecars (a fraction of a CPU, sharing), plus
optionally the pod budget. :mod:`agent.sim.derive` turns each template into
the manifest a user had to write for each model; batch templates are plain
pods, the same in both models. :mod:`agent.sim.codec` reads and writes the
YAML form and holds the validation rules.

Quantities are kept as the text written (``"300m"``, ``"4Gi"``), so a workload
written back reads the same.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "ORDERS",
    "POD_CLASSES",
    "ROLES",
    "Arrival",
    "Budget",
    "ContainerTemplate",
    "PodTemplate",
    "Workload",
    "arrivals",
    "scaled",
]

PodClass = Literal["latency-critical", "batch"]
Role = Literal["main", "sidecar"]
Order = Literal["shuffle", "sequential"]

POD_CLASSES: tuple[PodClass, ...] = ("latency-critical", "batch")
ROLES: tuple[Role, ...] = ("main", "sidecar")
ORDERS: tuple[Order, ...] = ("shuffle", "sequential")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerTemplate:
    """One container of a pod template; quantities are the text written (None = not set)."""

    name: str
    role: Role | None = None
    native: bool = False
    cpu: str | None = None
    cpu_limit: str | None = None
    memory: str | None = None
    memory_limit: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """An explicit pod budget (pod-level ``spec.resources``, requests == limits)."""

    cpu: str
    memory: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PodTemplate:
    """``count`` identical pods; ``budget`` None means derived (see :mod:`agent.sim.derive`)."""

    name: str
    count: int
    pod_class: PodClass = "latency-critical"
    namespace: str = "default"
    containers: tuple[ContainerTemplate, ...]
    budget: Budget | None = None

    @property
    def mains(self) -> tuple[ContainerTemplate, ...]:
        return tuple(c for c in self.containers if c.role == "main")

    @property
    def sidecars(self) -> tuple[ContainerTemplate, ...]:
        return tuple(c for c in self.containers if c.role == "sidecar")


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Pod templates in arrival order, how to interleave them, and the default node count."""

    name: str
    description: str = ""
    seed: int = 0
    order: Order = "shuffle"
    nodes: int = 1
    pods: tuple[PodTemplate, ...]

    @property
    def pod_count(self) -> int:
        """How many pods arrive in all."""
        return sum(t.count for t in self.pods)


@dataclass(frozen=True, slots=True)
class Arrival:
    """One pod arriving: the index of its template and its number within the template."""

    template: int
    ordinal: int


def arrivals(workload: Workload, seed: int | None = None) -> tuple[Arrival, ...]:
    """The pods in arrival order.

    ``sequential`` sends every pod of the first template, then the second ...;
    ``shuffle`` shuffles that list with ``random.Random(seed)``, so the same
    seed always gives the same interleaving. Within a template, ordinals stay
    ascending either way (pod ``web-0003`` never arrives before ``web-0002``).

    Args:
        workload: the workload.
        seed: overrides ``workload.seed``.
    """
    templates = [i for i, t in enumerate(workload.pods) for _ in range(t.count)]
    if workload.order == "shuffle":
        random.Random(workload.seed if seed is None else seed).shuffle(templates)
    seen = [0] * len(workload.pods)
    result: list[Arrival] = []
    for index in templates:
        result.append(Arrival(index, seen[index]))
        seen[index] += 1
    return tuple(result)


def scaled(workload: Workload, factor: int) -> Workload:
    """``podpin simulate --scale N``: this workload times ``factor``, every template's count and the node count.

    The same shape at fleet size, without editing the file: 200 seed-mesh pods on 40 nodes times 500 is 100,000
    pods on 20,000 nodes.

    Raises:
        ValueError: ``factor`` below one.
    """
    if factor < 1:
        raise ValueError(f"--scale: {factor} must be at least 1")
    pods = tuple(replace(t, count=t.count * factor) for t in workload.pods)
    return replace(workload, pods=pods, nodes=workload.nodes * factor)
