"""What ``podpin reset`` puts back: from the cgroups as found and the node's pods to the values to write.

Pure: the shell (``agent/commands/reset.py``) reads the kubepods tree and the
pods, this module decides, the ordered cgroup writer writes. podpin changes
three things on a node (``docs/design.md``, "cgroup values"), and a reset
undoes each the way the kubelet with ``cpuManagerPolicy: none`` would have left
it:

* ``cpuset.cpus`` of the QoS levels, pods and containers: narrowed by podpin,
  widened back to every online CPU. A cpuset that is unset (it inherits its
  parent's) or already holds every online CPU is left alone, so a second reset
  writes nothing.
* ``cpuset.mems`` (the ``Static`` memory policy): widened back to every NUMA
  node with memory, on the same terms.
* ``cpu.max`` of exclusive containers and their pods: podpin lifts the quota
  (``max``); a reset writes back the quota the container's or the pod's CPU
  limit gives (``agent/pods/cpu_limits.py``) with the configured
  ``cpuCFSQuotaPeriod``. Only a lifted quota is restored: a quota that is there
  is the kubelet's or the runtime's and stays. This needs the pod: a cgroup
  whose pod is not in the pod list, or a container cgroup no container status
  names (a sandbox, a container that is gone), keeps its ``cpu.max``, and pods
  podpin cannot match are reported (:class:`UnknownPod`).

Nothing here knows about files: cgroups are named by their path relative to
the cgroup root, as the shell found them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.cpuset import CPUSet
from agent.pods import PodView, cfs_quota, container_cpu_limit, pod_cpu_limit
from agent.vocabulary import CgroupLevel, CgroupValues, CpuMax

__all__ = ["CgroupFacts", "Restore", "RestorePlan", "UnknownPod", "plan_restore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupFacts:
    """One cgroup as found: where, whose, and its cpuset and ``cpu.max`` files (None where a file is missing).

    ``level`` is a QoS level, a pod or a container (a reset names no sandbox).
    ``pod_uid`` is the uid in a pod or container cgroup's name (a static pod's
    config hash), ``container_id`` the runtime id in a container cgroup's name.
    An empty ``cpus``/``mems`` is an unset cpuset.
    """

    path: str
    level: CgroupLevel
    pod_uid: str | None = None
    container_id: str | None = None
    cpus: CPUSet | None = None
    mems: CPUSet | None = None
    cpu_max: CpuMax | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Restore:
    """The values to write into one cgroup (None = leave that file alone) and whose cgroup it is."""

    path: str
    level: CgroupLevel
    values: CgroupValues
    pod: str | None = None
    container: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownPod:
    """A pod cgroup whose pod is not in the pod list: widened, but its quotas (and its containers') left as found."""

    path: str
    uid: str
    containers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RestorePlan:
    """Everything a reset writes, parents before children as found, and the pods it could not match."""

    restores: tuple[Restore, ...]
    unknown: tuple[UnknownPod, ...]


def _runtime_id(container_id: str | None) -> str | None:
    """The id after ``<runtime>://`` in a status ``containerID`` (what names the container's cgroup)."""
    if not container_id:
        return None
    _, sep, ident = container_id.partition("://")
    return ident if sep and ident else None


def _wider(found: CPUSet | None, everything: CPUSet) -> CPUSet | None:
    """``everything`` when a set cpuset holds less (or other) than it; None when unset or already everything."""
    if not found or found == everything:
        return None
    return everything


def _quota(found: CpuMax | None, limit: int | None, period_us: int) -> CpuMax | None:
    """The kubelet's quota for ``limit``, when podpin's ``max`` stands where the kubelet put one."""
    quota = cfs_quota(limit, period_us)
    if found is None or found.quota is not None or quota is None:
        return None
    return CpuMax(quota=quota, period=period_us)


def plan_restore(
    cgroups: Iterable[CgroupFacts], pods: Iterable[PodView], *, online: CPUSet, mems: CPUSet, period_us: int
) -> RestorePlan:
    """The values that undo podpin's changes on these cgroups (see the module docstring).

    Args:
        cgroups: the QoS levels, pods and containers of the kubepods tree, as found.
        pods: the node's pods (from the API server or manifests).
        online: every online CPU of the node.
        mems: every NUMA node with memory.
        period_us: ``cpuCFSQuotaPeriod`` in µs.
    """
    by_uid = {pod.cgroup_uid: pod for pod in pods}
    found = list(cgroups)
    containers_of: dict[str, int] = {}
    for facts in found:
        if facts.level is CgroupLevel.CONTAINER and facts.pod_uid is not None:
            containers_of[facts.pod_uid] = containers_of.get(facts.pod_uid, 0) + 1
    restores: list[Restore] = []
    unknown: list[UnknownPod] = []
    for facts in found:
        pod = by_uid.get(facts.pod_uid) if facts.pod_uid is not None else None
        name: str | None = None
        cpu_max: CpuMax | None = None
        if facts.level is CgroupLevel.POD:
            if pod is None and facts.pod_uid is not None:
                unknown.append(
                    UnknownPod(path=facts.path, uid=facts.pod_uid, containers=containers_of.get(facts.pod_uid, 0))
                )
            elif pod is not None:
                cpu_max = _quota(facts.cpu_max, pod_cpu_limit(pod), period_us)
        elif facts.level is CgroupLevel.CONTAINER and pod is not None:
            view = next((c for c in pod.all_containers if _runtime_id(c.container_id) == facts.container_id), None)
            if view is not None:
                name = view.name
                cpu_max = _quota(facts.cpu_max, container_cpu_limit(pod, view), period_us)
        values = CgroupValues(
            cpuset_cpus=_wider(facts.cpus, online), cpuset_mems=_wider(facts.mems, mems), cpu_max=cpu_max
        )
        if not values.is_empty():
            restores.append(
                Restore(
                    path=facts.path,
                    level=facts.level,
                    values=values,
                    pod=pod.full_name if pod is not None else None,
                    container=name,
                )
            )
    return RestorePlan(restores=tuple(restores), unknown=tuple(unknown))
