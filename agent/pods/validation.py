"""The API server's validation rules that decide what podpin may allocate.

A pod that breaks one of these was never accepted by an API server (it comes
from a hand-written manifest, or from a future API that relaxed a rule), and
podpin refuses it rather than guess. Rules run on *defaulted* values, as on the
API server, and messages are the API server's own (see ``agent.pods.errors``).
Where the API server would report several errors, the first one found is
raised; the order is app containers, init containers, pod level, overhead.

Per container (``validateResourceRequirements``):

* a resource name without a domain is ``cpu``, ``memory``,
  ``ephemeral-storage`` or ``hugepages-<size>``;
* quantities are >= 0, extended resources (``example.com/gpu``) are integers;
* request <= limit; for resources that cannot be overcommitted (hugepages,
  extended resources) request == limit, and a request needs a limit;
* hugepages need a cpu or memory request or limit.

Pod level (``spec.resources``):

* forbidden on Windows pods (``spec.os.name: windows``);
* only ``cpu``, ``memory`` and ``hugepages-*``; the per-container rules above;
* each pod request >= the aggregate container request (KEP-753 formula). With
  hugepages request == limit in every container and at pod level, this also
  gives "pod hugepages limit >= aggregate container hugepages limits";
* no single container limit above the pod limit. Whether the API server checks
  init containers here is not certain (a port checks app containers only);
  podpin checks init containers and sidecars too (``docs/kubelet-semantics.md``,
  "What a pod can say"): they run inside the same pod
  cgroup, whose ``cpu.max``/``memory.max`` is the pod limit, so a larger init
  limit can never be honoured, and an exclusive init container sized above the
  pod budget would only fail later, less clearly, in pod-scope admission.

Not checked (irrelevant to allocation): qualified-name syntax of domain-prefixed
resource names, ``claims``, and everything outside ``resources``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.pods.errors import PodSpecError
from agent.pods.resources import (
    Amount,
    ContainerResources,
    ExactResources,
    aggregate_requests,
    is_extended,
    is_hugepages,
    is_overcommittable,
    is_supported_pod_level,
)

__all__ = ["validate_pod", "POD_LEVEL_SUPPORTED"]

POD_LEVEL_SUPPORTED = ("cpu", "hugepages-", "memory")
"""The values the API server lists when refusing a pod-level resource name."""

_STANDARD_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})


def _check_name(name: str, path: str) -> None:
    """``validateContainerResourceName`` for names without a domain."""
    if "/" not in name and name not in _STANDARD_CONTAINER and not is_hugepages(name):
        raise PodSpecError.invalid(path, name, "must be a standard resource for containers")


def _check_quantity(name: str, amount: Amount, path: str) -> None:
    """``ValidateResourceQuantityValue``: non-negative, integral for extended resources."""
    if amount.value < 0:
        raise PodSpecError.invalid(path, str(amount), "must be greater than or equal to 0")
    if is_extended(name) and amount.milli() % 1000:
        raise PodSpecError.invalid(path, str(amount), "must be an integer")


def _check_requirements(resources: ExactResources, path: str, *, container: bool) -> None:
    """Requests against limits of one ``ResourceRequirements`` found at ``path``."""
    limits_path, requests_path = f"{path}.limits", f"{path}.requests"
    has_hugepages = has_cpu_or_memory = False
    for section, section_path in ((resources.limits, limits_path), (resources.requests, requests_path)):
        for name, amount in section.items():
            if container:
                _check_name(name, f"{section_path}[{name}]")
            _check_quantity(name, amount, f"{section_path}[{name}]")
            has_hugepages = has_hugepages or is_hugepages(name)
            has_cpu_or_memory = has_cpu_or_memory or name in ("cpu", "memory")
    for name, request in resources.requests.items():
        limit = resources.limits.get(name)
        if limit is None:
            if not is_overcommittable(name):
                raise PodSpecError.required(limits_path, "Limit must be set for non overcommitable resources")
        elif request.value != limit.value and not is_overcommittable(name):
            raise PodSpecError.invalid(requests_path, str(request), f"must be equal to {name} limit of {limit}")
        elif request > limit:
            raise PodSpecError.invalid(
                requests_path, str(request), f"must be less than or equal to {name} limit of {limit}"
            )
    if has_hugepages and not has_cpu_or_memory:
        raise PodSpecError.forbidden(path, None, "HugePages require cpu or memory")


def _check_pod_level(pod: ExactResources, containers: Sequence[ContainerResources], os_name: str | None) -> None:
    if os_name == "windows":
        raise PodSpecError.forbidden("spec.resources", None, "may not be set for a windows pod")
    for section, section_path in ((pod.limits, "spec.resources.limits"), (pod.requests, "spec.resources.requests")):
        for name in section:
            if not is_supported_pod_level(name):
                raise PodSpecError.unsupported(section_path, name, POD_LEVEL_SUPPORTED)
    _check_requirements(pod, "spec.resources", container=False)
    for name, total in aggregate_requests(containers).items():
        request = pod.requests.get(name)
        if request is not None and request < total:
            raise PodSpecError.invalid(
                f"spec.resources.requests[{name}]",
                str(request),
                f"must be greater than or equal to aggregate container requests of {total}",
            )
    for container in containers:
        for name, limit in container.resources.limits.items():
            pod_limit = pod.limits.get(name)
            if pod_limit is not None and limit > pod_limit:
                raise PodSpecError.invalid(
                    f"{container.path}.resources.limits[{name}]",
                    str(limit),
                    f"must be less than or equal to pod limits of {pod_limit}",
                )


def validate_pod(
    *,
    containers: Sequence[ContainerResources],
    pod_level: ExactResources | None,
    overhead: Mapping[str, Amount],
    os_name: str | None,
) -> None:
    """Apply the rules of the module docstring to a defaulted pod.

    Args:
        containers: app containers, then init containers, each defaulted.
        pod_level: ``spec.resources`` after pod-level defaulting, or ``None``.
        overhead: ``spec.overhead``.
        os_name: ``spec.os.name``.

    Raises:
        PodSpecError: the first rule broken, worded as the API server words it.
    """
    for container in containers:
        _check_requirements(container.resources, f"{container.path}.resources", container=True)
    if pod_level is not None:
        _check_pod_level(pod_level, containers, os_name)
    for name, amount in overhead.items():
        _check_quantity(name, amount, f"spec.overhead[{name}]")
