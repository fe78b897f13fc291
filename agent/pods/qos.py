"""The pod's QoS class, as the kubelet computes it (``ComputePodQOS`` / ``GetPodQOS``).

QoS decides everything downstream: only Guaranteed pods get exclusive CPUs or
memory. It is computed on exact, defaulted quantities (the kubelet compares
``resource.Quantity`` values exactly), considering ``cpu`` and ``memory`` only
and only amounts above zero.

* Pod with pod-level resources (``spec.resources``): pod-level values alone;
  containers are ignored. Guaranteed iff cpu and memory both have
  request == limit > 0; BestEffort iff no cpu/memory request or limit above
  zero; else Burstable. The KEP's "implicitly resourced" fallback to
  per-container values is not what the kubelet's code does, and is not done
  here (``docs/kubelet-semantics.md``, "QoS class").
* Other pods: over app and init containers, Guaranteed iff every container has
  both a cpu and a memory limit and, per resource, the summed requests equal the
  summed limits; BestEffort iff nothing is requested or limited; else Burstable.
* ``status.qosClass``, when set, wins over the computation (``GetPodQOS``); the
  API server fixes it at creation and never changes it, even on resize.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from agent.pods.resources import Amount, ExactResources
from agent.vocabulary import QOSClass

__all__ = ["QOSClass", "compute_qos", "pod_qos"]


_COMPUTE = ("cpu", "memory")


def _positive(resources: Mapping[str, Amount]) -> dict[str, Fraction]:
    """The cpu and memory entries above zero (``isSupportedQoSComputeResource`` and ``> 0``)."""
    return {name: resources[name].value for name in _COMPUTE if name in resources and resources[name].value > 0}


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def compute_qos(*, pod_level: ExactResources | None, containers: Iterable[ExactResources]) -> QOSClass:
    """``ComputePodQOS`` over defaulted resources.

    Args:
        pod_level: ``spec.resources`` after defaulting, or ``None`` for a pod without it.
        containers: every app and init container's defaulted resources (ignored
            when ``pod_level`` is given).
    """
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    sources = [pod_level] if pod_level is not None else list(containers)
    for resources in sources:
        _add(requests, _positive(resources.requests))
        found = _positive(resources.limits)
        _add(limits, found)
        if set(found) != set(_COMPUTE) and (pod_level is None or resources.limits):
            guaranteed = False
    if not requests and not limits:
        return QOSClass.BESTEFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[n] == v for n, v in requests.items()):
        return QOSClass.GUARANTEED
    return QOSClass.BURSTABLE


def pod_qos(
    *, status_qos: QOSClass | None, pod_level: ExactResources | None, containers: Iterable[ExactResources]
) -> QOSClass:
    """``GetPodQOS``: ``status.qosClass`` when set, else :func:`compute_qos`."""
    if status_qos is not None:
        return status_qos
    return compute_qos(pod_level=pod_level, containers=containers)
