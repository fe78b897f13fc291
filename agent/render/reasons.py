"""The words for why a container runs where it runs, and for what a refused pod asked for: said in one place.

The core decides and hands over typed facts — a :class:`~agent.alloc.PoolReason`
per container, :class:`~agent.alloc.RequestFacts` per refused pod
(``agent/alloc/plan.py``). This module is the only one that turns them into
sentences, so ``podpin plan`` (text and JSON), the ``pod.admitted`` and
``pod.rejected`` log lines and the pod's Events say the same thing in the same
words. Quantities are written as a manifest writes them (``2500m``, ``1Gi``).
"""

from __future__ import annotations

from collections.abc import Callable

from agent.alloc import ContainerRequest, Pool, PoolReason, ReasonKind, RequestFacts
from agent.pods import CPUEligibility
from agent.quantity import count_of, format_bytes, format_cpu

__all__ = ["POOL_WORDS", "reason_text", "rejection_text"]

#: Each pool as a sentence names it.
POOL_WORDS: dict[Pool, str] = {
    Pool.EXCLUSIVE: "exclusive CPUs",
    Pool.POD_SHARED: "pod shared pool",
    Pool.NODE_SHARED: "node shared pool",
}

_NOT_ELIGIBLE = "not eligible for exclusive CPUs"


def _cpus(count: int) -> str:
    return count_of(count, "whole CPU")


def _cpu(millis: int | None) -> str:
    return "none" if millis is None else format_cpu(millis)


def _memory(size: int | None) -> str:
    return "none" if size is None else format_bytes(size)


def _request_vs_limit(resource: str, request: str, limit: int | None, words: Callable[[int | None], str]) -> str:
    if limit is None:
        return f"{resource} request {request} without a {resource} limit"
    return f"{resource} request {request} ≠ limit {words(limit)}"


def _exclusive(reason: PoolReason) -> str:
    if not reason.pod_level:
        return f"exclusive: {_cpus(reason.exclusive_cpus)}, request == limit (Guaranteed pod)"
    where = "a slice of the pod's CPUs" if reason.from_pod_cpus else "from the node"
    return f"exclusive: {_cpus(reason.exclusive_cpus)}, cpu and memory request == limit → {where}"


def _why_not(reason: PoolReason) -> str:
    """The container's own reason, as ``<fact>: not eligible`` (the destination is added by the caller)."""
    verdict = reason.eligibility
    if verdict is CPUEligibility.POD_NOT_GUARANTEED:
        return f"{reason.qos} pod"
    if verdict is CPUEligibility.NO_CPU_REQUEST:
        return f"no cpu request: {_NOT_ELIGIBLE}"
    if verdict is CPUEligibility.CPU_REQUEST_NOT_LIMIT:
        return f"{_request_vs_limit('cpu', _cpu(reason.cpu_request), reason.cpu_limit, _cpu)}: {_NOT_ELIGIBLE}"
    if verdict is CPUEligibility.NO_MEMORY_REQUEST:
        return f"no memory request: {_NOT_ELIGIBLE}"
    if verdict is CPUEligibility.MEMORY_REQUEST_NOT_LIMIT:
        request = _memory(reason.memory_request)
        return f"{_request_vs_limit('memory', request, reason.memory_limit, _memory)}: {_NOT_ELIGIBLE}"
    if verdict is CPUEligibility.CPU_NOT_WHOLE:
        return f"cpu {_cpu(reason.cpu_request)} is not whole CPUs"
    return f"eligible: {_cpus((reason.cpu_request or 0) // 1000)}"


def reason_text(reason: PoolReason) -> str:
    """One line: why this container runs in its pool, e.g. ``cpu 2500m is not whole CPUs → pod shared pool``."""
    destination = POOL_WORDS[reason.pool]
    kind = reason.kind
    if kind is ReasonKind.EXCLUSIVE:
        return _exclusive(reason)
    if kind is ReasonKind.NOT_ELIGIBLE:
        return f"{_why_not(reason)} → {destination}"
    if kind is ReasonKind.NO_POD_CPUS:
        return f"pod cpu {_cpu(reason.pod_cpu)} is not whole CPUs: the pod gets no CPUs of its own → {destination}"
    if kind is ReasonKind.POD_REJECTED:
        return f"pod rejected ({reason.rejection}) → {destination}"
    if kind is ReasonKind.NO_CPU_POLICY:
        return f"cpuManagerPolicy none: nothing is pinned → {destination}"
    return f"pod not admitted yet → {destination}"


def _container_request(request: ContainerRequest) -> str:
    asked = [f"cpu {format_cpu(request.cpu)}"] if request.cpu is not None else []
    asked += [f"memory {format_bytes(request.memory)}"] if request.memory is not None else []
    text = f"{request.name} {' '.join(asked) or 'no requests'}"
    if request.exclusive_cpus:
        text += f" ({request.exclusive_cpus} exclusive)"
    return text


def rejection_text(facts: RequestFacts) -> str:
    """The refused pod's whole request and what was free per NUMA node, one line.

    e.g. ``pod requests cpu 40 memory 8Gi: 40 CPUs of its own; containers: db cpu 36 memory 6Gi (36 exclusive),
    proxy cpu 4 memory 2Gi; free for exclusive use: NUMA 0 15 CPUs, NUMA 1 16 CPUs`` (a pod-level pod), or
    ``pod requests 40 exclusive CPUs; ...`` (a classic one).
    """
    if facts.pod_cpu is not None or facts.pod_memory is not None:
        asked = [f"cpu {format_cpu(facts.pod_cpu)}"] if facts.pod_cpu is not None else []
        asked += [f"memory {format_bytes(facts.pod_memory)}"] if facts.pod_memory is not None else []
        own = f"{count_of(facts.exclusive_cpus, 'CPU')} of its own" if facts.exclusive_cpus else "no CPUs of its own"
        pod = f"{' '.join(asked)}: {own}"
    else:
        pod = count_of(facts.exclusive_cpus, "exclusive CPU") if facts.exclusive_cpus else "no exclusive CPUs"
    free = ", ".join(
        f"NUMA {entry.numa} {count_of(entry.cpus, 'CPU')}"
        + (f" and {format_bytes(entry.memory)}" if entry.memory is not None else "")
        for entry in facts.free
    )
    containers = ", ".join(_container_request(c) for c in facts.containers)
    return f"pod requests {pod}; containers: {containers}; free for exclusive use: {free or 'none'}"
