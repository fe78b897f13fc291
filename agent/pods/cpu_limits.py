"""The CFS quota the kubelet gives a pod's and a container's cgroup, from their CPU limits.

``podpin reset`` puts back the ``cpu.max`` podpin lifted on exclusive containers
and their pods, so it needs the value the kubelet (with ``cpuManagerPolicy:
none``) would have written. The kubelet's rules, read from
``pkg/kubelet/cm/helpers_linux.go`` (``MilliCPUToQuota``, ``ResourceConfigForPod``),
``pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`` (``getCPULimit``) and
``k8s.io/component-helpers/resource`` (``PodLimits``):

* quota = limit in millicores × period / 1000, at least 1000 µs; no limit (or
  0) means no quota (``max``);
* a container's limit is its own, or, when it sets none and the pod sets a
  pod-level cpu limit, the pod's;
* a pod's limit is its pod-level cpu limit when it has pod-level resources,
  else the KEP-753 aggregate of its containers' limits, plus the pod overhead's
  cpu when that limit is not zero. A Guaranteed pod always gets the quota; a
  Burstable pod only when every container declares a cpu limit (each init
  container counted with the sidecars started before it) or the pod sets a
  pod-level cpu limit; a BestEffort pod never.
"""

from __future__ import annotations

from agent.pods.model import ContainerView, PodView
from agent.pods.qos import QOSClass
from agent.pods.resources import ContainerKind, aggregate

__all__ = ["MIN_QUOTA_US", "cfs_quota", "container_cpu_limit", "pod_cpu_limit"]

#: The kernel's (and the kubelet's) smallest CFS quota, 1 ms.
MIN_QUOTA_US = 1000


def cfs_quota(millis: int | None, period_us: int) -> int | None:
    """``MilliCPUToQuota``: the quota in µs for a limit in millicores, or None (``max``) without one."""
    if not millis:
        return None
    return max(MIN_QUOTA_US, millis * period_us // 1000)


def _pod_level_cpu_limit(pod: PodView) -> int | None:
    if pod.pod_resources is None:
        return None
    return pod.pod_resources.limits.get("cpu") or None


def container_cpu_limit(pod: PodView, container: ContainerView) -> int | None:
    """``getCPULimit``: the container's cpu limit in millicores, else the pod-level one, else None."""
    return container.resources.limits.get("cpu") or _pod_level_cpu_limit(pod)


def _limits_declared(pod: PodView) -> bool:
    """Every container declares a cpu limit, as ``ResourceConfigForPod``'s ``ContainerFn`` counts them."""
    if any(not c.resources.limits.get("cpu") for c in pod.containers):
        return False
    sidecars = 0
    for container in pod.init_containers:
        own = container.resources.limits.get("cpu", 0)
        if container.kind == ContainerKind.SIDECAR:
            sidecars += own
            if sidecars == 0:
                return False
        elif own + sidecars == 0:
            return False
    return True


def pod_cpu_limit(pod: PodView) -> int | None:
    """The cpu limit in millicores the kubelet turns into the pod cgroup's quota, or None for no quota."""
    if pod.qos == QOSClass.BESTEFFORT:
        return None
    pod_level = _pod_level_cpu_limit(pod)
    limit = pod_level
    if limit is None:
        limit = aggregate(
            (c.resources.limits for c in pod.containers),
            ((c.kind == ContainerKind.SIDECAR, c.resources.limits) for c in pod.init_containers),
        ).get("cpu")
    if limit:
        limit += pod.overhead.get("cpu", 0)
    if pod.qos == QOSClass.BURSTABLE and pod_level is None and not _limits_declared(pod):
        return None
    return limit or None
