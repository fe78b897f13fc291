"""The manifests a user writes for each model, derived from one pod template.

The simulation compares two ways to run the same latency-critical pod:

``per-container`` (Kubernetes 1.35 and earlier, and 1.36+ with the
``PodLevelResourceManagers`` gate off): no ``spec.resources``. For the main
container to get exclusive CPUs the pod must be Guaranteed, so *every*
container is Guaranteed with request == limit, and a sidecar must ask for
whole CPUs too (a fractional Guaranteed container would run on the shared pool
and be throttled by its quota). Each sidecar therefore gets
``ceil(cpu request)`` whole exclusive CPUs (at least one), and memory request
== limit == its memory limit (its request when no limit is written). This is
exactly what users wrote before 1.36 (``deploy/examples/pods/trading-engine-before.yaml``).

``pod-level`` (KEP-2837 + KEP-5526, what podpin implements): ``spec.resources``
holds the pod budget with requests == limits, so the pod is Guaranteed; mains
are Guaranteed with whole CPUs and get exclusive slices of the pod bubble;
sidecars keep their real requests and limits (Burstable inside the pod) and
share the rest of the bubble, the pod shared pool. The budget, unless the
template sets one:

* cpu = ceil(sum of main CPUs + sum of sidecar cpu requests), whole CPUs so the
  pod gets a bubble (a fractional pod cpu request gets none);
* memory = sum of main memory + sum of sidecar memory limits (requests where no
  limit is written), so no sidecar can be starved inside the pod.

Batch templates produce the same manifest in both models: each container with
exactly the requests and limits written.

Native sidecars (``native: true``) become restartable init containers
(``restartPolicy: Always``), in template order; everything else is an app
container. Pod names are ``<template>-<ordinal:04d>``; uids are UUIDv5 of
``namespace/name``, so every run builds identical pods.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from agent.pods import PodSpecError, QOSClass, pod_from_dict
from agent.quantity import parse_quantity
from agent.sim.workload import ContainerTemplate, PodTemplate

__all__ = ["MODELS", "Model", "check_template", "format_bytes", "pod_budget", "pod_manifest", "pod_name"]

Model = Literal["per-container", "pod-level"]
"""How the pod asks for CPUs: per container (classic) or with a pod-level budget (KEP-5526)."""

MODELS: tuple[Model, ...] = ("per-container", "pod-level")

_UID_NAMESPACE = uuid.UUID("3b8f0e5c-2d41-5a7e-8c19-6f0a4d2e7b93")
_UNITS = (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_bytes(size: int) -> str:
    """A byte count as the shortest exact binary quantity (``4480Mi``, ``4Gi``, ``1000``)."""
    for suffix, unit in _UNITS:
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _millis(text: str | None) -> int:
    return parse_quantity(text).milli() if text is not None else 0


def _bytes(text: str | None) -> int:
    return parse_quantity(text).ceil() if text is not None else 0


def pod_budget(template: PodTemplate) -> tuple[int, int]:
    """The pod-level budget as (whole CPUs, memory bytes): the template's, else derived (module docstring)."""
    if template.budget is not None:
        return _millis(template.budget.cpu) // 1000, _bytes(template.budget.memory)
    cpu = sum(_millis(c.cpu) for c in template.mains) + sum(_millis(c.cpu) for c in template.sidecars)
    memory = sum(_bytes(c.memory) for c in template.mains)
    memory += sum(_bytes(c.memory_limit or c.memory) for c in template.sidecars)
    return -(-cpu // 1000), memory


def pod_name(template: PodTemplate, ordinal: int) -> str:
    """The name of the ``ordinal``-th pod of a template."""
    return f"{template.name}-{ordinal:04d}"


def _resources(requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if requests:
        block["requests"] = requests
    if limits:
        block["limits"] = limits
    return block


def _given(cpu: str | None, memory: str | None) -> dict[str, str]:
    return {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value is not None}


def _container(template: ContainerTemplate, model: Model) -> dict[str, Any]:
    """One raw container of the manifest for ``model``."""
    c = template
    if c.role is None:
        resources = _resources(_given(c.cpu, c.memory), _given(c.cpu_limit, c.memory_limit))
    elif c.role == "main":
        exact = _given(c.cpu, c.memory)
        resources = _resources(exact, dict(exact))
    elif model == "per-container":
        whole = max(1, -(-_millis(c.cpu) // 1000))
        exact = {"cpu": str(whole), "memory": c.memory_limit or c.memory or "0"}
        resources = _resources(exact, dict(exact))
    else:
        resources = _resources(_given(c.cpu, c.memory), _given(c.cpu_limit, c.memory_limit))
    raw: dict[str, Any] = {"name": c.name}
    if resources:
        raw["resources"] = resources
    if c.native:
        raw["restartPolicy"] = "Always"
    return raw


def pod_manifest(template: PodTemplate, model: Model, ordinal: int) -> dict[str, Any]:
    """The raw pod (as the API server returns it) for one pod of ``template`` under ``model``."""
    name = pod_name(template, ordinal)
    uid = str(uuid.uuid5(_UID_NAMESPACE, f"{template.namespace}/{name}"))
    spec: dict[str, Any] = {
        "containers": [_container(c, model) for c in template.containers if not c.native],
    }
    natives = [_container(c, model) for c in template.containers if c.native]
    if natives:
        spec["initContainers"] = natives
    if model == "pod-level" and template.pod_class == "latency-critical":
        cpus, memory = pod_budget(template)
        budget = {"cpu": str(cpus), "memory": format_bytes(memory)}
        spec["resources"] = {"requests": budget, "limits": dict(budget)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": template.namespace, "uid": uid},
        "spec": spec,
    }


def check_template(template: PodTemplate) -> str | None:
    """Why the template's manifests are not pods the API server would accept as intended, or None.

    Both models' manifests must parse, and a latency-critical pod must come out
    Guaranteed in both (else the comparison would be about something else).
    """
    for model in MODELS:
        try:
            pod = pod_from_dict(pod_manifest(template, model, 0))
        except PodSpecError as err:
            return f"the {model} manifest is not a valid pod: {err}"
        if template.pod_class == "latency-critical" and pod.qos != QOSClass.GUARANTEED:
            return f"the {model} manifest is a {pod.qos} pod, not Guaranteed"
    return None
