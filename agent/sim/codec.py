"""The YAML form of a workload: reading with validation, and writing back.

The file (every key but ``name``, ``pods``, ``pods[].name``, ``pods[].count``,
``pods[].containers`` and ``containers[].name`` optional)::

    name: mesh                        # printed in reports
    description: mesh services        # one line
    seed: 7                           # seeds the arrival interleaving (default 0)
    order: shuffle                    # shuffle (seeded, default) | sequential
    nodes: 40                         # default --nodes (default 1)
    pods:
      - name: web                     # pods are named web-0000, web-0001, ...
        count: 200
        class: latency-critical       # latency-critical (default) | batch
        namespace: default
        budget: {cpu: "5", memory: 4480Mi}   # pod-level spec.resources; derived when left out
        containers:
          - {name: app, role: main, cpu: "4", memory: 4Gi}
          - {name: envoy, role: sidecar, cpu: 300m, cpuLimit: "1", memory: 128Mi, memoryLimit: 256Mi}
          - {name: logs, role: sidecar, native: true, cpu: 100m, memory: 64Mi}

Rules; the first one broken is reported as one line, ``<file>: <field>: <problem>``:

* unknown keys are errors (a typo never silently changes a result);
* latency-critical: at least one ``main``; every container has a ``role``, a
  ``cpu`` and a ``memory``; a main asks for whole CPUs, with limits (if
  written) equal to the requests; a sidecar asks for more than zero CPU, its
  limits (if written) at least its requests; only sidecars can be ``native``;
* batch: no ``role``, ``native`` or ``budget``; any requests and limits (none
  at all makes a BestEffort pod);
* a ``budget`` is whole CPUs, at least the mains plus the sidecar cpu requests,
  and memory at least the mains plus the sidecar memory limits;
* both derived manifests (:mod:`agent.sim.derive`) must be pods the API server
  accepts, and latency-critical ones Guaranteed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from agent.quantity import QuantityError, parse_quantity
from agent.sim.derive import check_template
from agent.sim.workload import (
    ORDERS,
    POD_CLASSES,
    ROLES,
    Budget,
    ContainerTemplate,
    Order,
    PodClass,
    PodTemplate,
    Workload,
)

__all__ = ["WorkloadError", "load_workload", "workload_from_dict", "workload_to_dict"]

_WORKLOAD_KEYS = ("name", "description", "seed", "order", "nodes", "pods")
_POD_KEYS = ("name", "count", "class", "namespace", "budget", "containers")
_CONTAINER_KEYS = ("name", "role", "native", "cpu", "cpuLimit", "memory", "memoryLimit")
_BUDGET_KEYS = ("cpu", "memory")


class WorkloadError(ValueError):
    """A workload that cannot be simulated; the one-line message names the source and the field."""


class _Reader:
    """Typed field access; every error names ``source: path``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> WorkloadError:
        return WorkloadError(f"{self.source}: {path}: {problem}" if path else f"{self.source}: {problem}")

    def mapping(self, value: object, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a mapping, got {_show(value)}")
        for key in value:
            if key not in keys:
                raise self.fail(f"{path}.{key}" if path else str(key), f"unknown key (known keys: {', '.join(keys)})")
        return value

    def string(self, parent: Mapping[str, Any], key: str, path: str) -> str | None:
        value = parent.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"expected a non-empty string, got {_show(value)}")
        return value

    def required_string(self, parent: Mapping[str, Any], key: str, path: str) -> str:
        value = self.string(parent, key, path)
        if value is None:
            raise self.fail(f"{path}.{key}" if path else key, "is required")
        return value

    def integer(self, parent: Mapping[str, Any], key: str, path: str, *, minimum: int, default: int | None) -> int:
        value = parent.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            if default is None:
                raise self.fail(where, "is required")
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(where, f"expected an integer >= {minimum}, got {_show(value)}")
        return value

    def choice(
        self, parent: Mapping[str, Any], key: str, path: str, choices: tuple[str, ...], default: str | None
    ) -> str | None:
        value = parent.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            return default
        if value not in choices:
            raise self.fail(where, f"{_show(value)} is not one of {', '.join(choices)}")
        return str(value)

    def quantity(self, parent: Mapping[str, Any], key: str, path: str) -> str | None:
        value = parent.get(key)
        if value is None:
            return None
        where = f"{path}.{key}"
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(where, f'expected a quantity such as "500m" or "4Gi", got {_show(value)}')
        text = str(value)
        try:
            quantity = parse_quantity(text)
        except QuantityError as err:
            raise self.fail(where, str(err)) from err
        if quantity.value < 0:
            raise self.fail(where, f"{text!r} is negative")
        return text


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _millis(text: str) -> int:
    return parse_quantity(text).milli()


def _bytes(text: str) -> int:
    return parse_quantity(text).ceil()


def _read_container(r: _Reader, raw: object, path: str, pod_class: PodClass) -> ContainerTemplate:
    item = r.mapping(raw, path, _CONTAINER_KEYS)
    name = r.required_string(item, "name", path)
    role = r.choice(item, "role", path, ROLES, None)
    native = item.get("native", False)
    if not isinstance(native, bool):
        raise r.fail(f"{path}.native", f"expected true or false, got {_show(native)}")
    container = ContainerTemplate(
        name=name,
        role="main" if role == "main" else "sidecar" if role == "sidecar" else None,
        native=native,
        cpu=r.quantity(item, "cpu", path),
        cpu_limit=r.quantity(item, "cpuLimit", path),
        memory=r.quantity(item, "memory", path),
        memory_limit=r.quantity(item, "memoryLimit", path),
    )
    if pod_class == "batch":
        for key in ("role", "native"):
            if key in item:
                raise r.fail(f"{path}.{key}", "only latency-critical pods have mains and sidecars")
        return container
    _check_latency_critical(r, container, path)
    return container


def _check_latency_critical(r: _Reader, c: ContainerTemplate, path: str) -> None:
    if c.role is None:
        raise r.fail(f"{path}.role", "is required in a latency-critical pod (main or sidecar)")
    if c.cpu is None:
        raise r.fail(f"{path}.cpu", "is required in a latency-critical pod")
    if c.memory is None:
        raise r.fail(f"{path}.memory", "is required in a latency-critical pod")
    cpu, memory = _millis(c.cpu), _bytes(c.memory)
    if memory == 0:
        raise r.fail(f"{path}.memory", f"{c.memory!r} must be above zero")
    if c.role == "main":
        if cpu == 0 or cpu % 1000:
            raise r.fail(f"{path}.cpu", f"{c.cpu!r} is not a whole number of CPUs (a main gets exclusive CPUs)")
        if c.cpu_limit is not None and _millis(c.cpu_limit) != cpu:
            raise r.fail(f"{path}.cpuLimit", f"{c.cpu_limit!r} must equal cpu {c.cpu!r} (a main is Guaranteed)")
        if c.memory_limit is not None and _bytes(c.memory_limit) != memory:
            raise r.fail(
                f"{path}.memoryLimit", f"{c.memory_limit!r} must equal memory {c.memory!r} (a main is Guaranteed)"
            )
        if c.native:
            raise r.fail(f"{path}.native", "only a sidecar can be a native (restartable init) container")
        return
    if cpu == 0:
        raise r.fail(f"{path}.cpu", f"{c.cpu!r} must be above zero (a sidecar's request is part of the pod budget)")
    if c.cpu_limit is not None and _millis(c.cpu_limit) < cpu:
        raise r.fail(f"{path}.cpuLimit", f"{c.cpu_limit!r} is below the request {c.cpu!r}")
    if c.memory_limit is not None and _bytes(c.memory_limit) < memory:
        raise r.fail(f"{path}.memoryLimit", f"{c.memory_limit!r} is below the request {c.memory!r}")


def _read_budget(r: _Reader, raw: object, path: str, containers: tuple[ContainerTemplate, ...]) -> Budget:
    item = r.mapping(raw, path, _BUDGET_KEYS)
    cpu = r.quantity(item, "cpu", path)
    memory = r.quantity(item, "memory", path)
    if cpu is None:
        raise r.fail(f"{path}.cpu", "is required in a budget")
    if memory is None:
        raise r.fail(f"{path}.memory", "is required in a budget")
    needed_cpu = sum(_millis(c.cpu or "0") for c in containers)
    if _millis(cpu) % 1000 or _millis(cpu) == 0:
        raise r.fail(f"{path}.cpu", f"{cpu!r} is not a whole number of CPUs (a pod bubble is whole CPUs)")
    if _millis(cpu) < needed_cpu:
        raise r.fail(f"{path}.cpu", f"{cpu!r} is below the {needed_cpu}m the mains and sidecar requests need")
    needed_memory = sum(_bytes(c.memory_limit or c.memory or "0") for c in containers)
    if _bytes(memory) < needed_memory:
        raise r.fail(
            f"{path}.memory", f"{memory!r} is below the {needed_memory} bytes the mains and sidecar limits need"
        )
    return Budget(cpu=cpu, memory=memory)


def _read_pod(r: _Reader, raw: object, path: str) -> PodTemplate:
    item = r.mapping(raw, path, _POD_KEYS)
    name = r.required_string(item, "name", path)
    count = r.integer(item, "count", path, minimum=1, default=None)
    pod_class: PodClass = (
        "batch" if r.choice(item, "class", path, POD_CLASSES, "latency-critical") == "batch" else "latency-critical"
    )
    namespace = r.string(item, "namespace", path) or "default"
    raw_containers = item.get("containers")
    if not isinstance(raw_containers, list) or not raw_containers:
        raise r.fail(f"{path}.containers", f"expected a non-empty list of containers, got {_show(raw_containers)}")
    containers = tuple(
        _read_container(r, c, f"{path}.containers[{i}]", pod_class) for i, c in enumerate(raw_containers)
    )
    names = [c.name for c in containers]
    for i, container in enumerate(containers):
        if names.index(container.name) != i:
            raise r.fail(f"{path}.containers[{i}].name", f"duplicate container name {container.name!r}")
    if pod_class == "latency-critical" and not any(c.role == "main" for c in containers):
        raise r.fail(f"{path}.containers", "a latency-critical pod needs at least one container with role: main")
    budget = None
    if item.get("budget") is not None:
        if pod_class == "batch":
            raise r.fail(f"{path}.budget", "only latency-critical pods get a pod-level budget")
        budget = _read_budget(r, item["budget"], f"{path}.budget", containers)
    return PodTemplate(
        name=name, count=count, pod_class=pod_class, namespace=namespace, containers=containers, budget=budget
    )


def workload_from_dict(data: object, source: str = "workload") -> Workload:
    """Validate a parsed workload and build a :class:`Workload`.

    Args:
        data: the parsed YAML.
        source: names the input in error messages (a file path, ``preset NAME``).

    Raises:
        WorkloadError: ``<source>: <field>: <problem>`` for the first problem found.
    """
    r = _Reader(source)
    top = r.mapping(data, "", _WORKLOAD_KEYS)
    name = r.required_string(top, "name", "")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise r.fail("description", f"expected a string, got {_show(description)}")
    seed = r.integer(top, "seed", "", minimum=0, default=0)
    order: Order = "sequential" if r.choice(top, "order", "", ORDERS, "shuffle") == "sequential" else "shuffle"
    nodes = r.integer(top, "nodes", "", minimum=1, default=1)
    raw_pods = top.get("pods")
    if not isinstance(raw_pods, list) or not raw_pods:
        raise r.fail("pods", f"expected a non-empty list of pod templates, got {_show(raw_pods)}")
    pods = tuple(_read_pod(r, p, f"pods[{i}]") for i, p in enumerate(raw_pods))
    names = [p.name for p in pods]
    for i, pod in enumerate(pods):
        if names.index(pod.name) != i:
            raise r.fail(f"pods[{i}].name", f"duplicate pod template name {pod.name!r}")
        problem = check_template(pod)
        if problem is not None:
            raise r.fail(f"pods[{i}]", problem)
    return Workload(name=name, description=description, seed=seed, order=order, nodes=nodes, pods=pods)


def load_workload(path: Path) -> Workload:
    """Read a workload YAML file.

    Raises:
        WorkloadError: the file cannot be read, is not YAML, or holds a bad field (named with the path).
    """
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise WorkloadError(f"{path}: cannot read the workload file: {err.strerror or err}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise WorkloadError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from err
    return workload_from_dict(data, str(path))


# -- writing -----------------------------------------------------------------------------------
def _container_to_dict(c: ContainerTemplate) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name}
    if c.role is not None:
        out["role"] = c.role
    if c.native:
        out["native"] = True
    amounts = (("cpu", c.cpu), ("cpuLimit", c.cpu_limit), ("memory", c.memory), ("memoryLimit", c.memory_limit))
    out.update({key: value for key, value in amounts if value is not None})
    return out


def workload_to_dict(workload: Workload) -> dict[str, Any]:
    """The YAML-ready form of a workload; :func:`workload_from_dict` reads it back equal."""
    pods: list[dict[str, Any]] = []
    for t in workload.pods:
        pod: dict[str, Any] = {"name": t.name, "count": t.count, "class": t.pod_class, "namespace": t.namespace}
        if t.budget is not None:
            pod["budget"] = {"cpu": t.budget.cpu, "memory": t.budget.memory}
        pod["containers"] = [_container_to_dict(c) for c in t.containers]
        pods.append(pod)
    return {
        "name": workload.name,
        "description": workload.description,
        "seed": workload.seed,
        "order": workload.order,
        "nodes": workload.nodes,
        "pods": pods,
    }
