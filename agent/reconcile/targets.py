"""From a :class:`Plan` to file values per existing cgroup (no writes here).

The plan speaks of pods and containers; the writer needs paths. This module
joins the two over the live tree (one ``scan`` of the kubepods hierarchy):

* the burstable and besteffort QoS levels get the node shared pool;
* a pod's cgroup gets the pod values (found at any QoS level, see
  ``CgroupLayout.find_pod``);
* a container cgroup whose id appears in the pod status gets that container's
  values; any other child of a managed pod (the sandbox, a container whose
  status is not in yet) gets the pod's interim set.

Only cgroups that exist are targeted: a pod or container that has not started
gets its values when its cgroup appears (the watcher tells).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.alloc import DesiredValues, Plan, PodPlan
from agent.cgroups.errors import CgroupPathError
from agent.cgroups.fs import CgroupValues
from agent.cgroups.layout import ContainerID, ScannedPod
from agent.pods import QOSClass

__all__ = ["Target", "plan_targets", "pod_targets", "runtime_id", "values_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One cgroup to hold values, and whom it belongs to (for logs, Events and metrics)."""

    path: Path
    values: CgroupValues
    level: str  # "qos" | "pod" | "container" | "unidentified"
    pod: PodPlan | None = None
    container: str | None = None
    container_id: str | None = None


def values_of(desired: DesiredValues) -> CgroupValues:
    """The writer's value type for a plan's desired values."""
    return CgroupValues(cpuset_cpus=desired.cpuset_cpus, cpuset_mems=desired.cpuset_mems, cpu_max=desired.cpu_max)


def runtime_id(container_id: str | None) -> str | None:
    """The bare runtime id of a status ``containerID`` (what names its cgroup), or None when absent or invalid."""
    if not container_id:
        return None
    try:
        return ContainerID.parse(container_id).id
    except CgroupPathError:
        return None


def pod_targets(pod: PodPlan, live: ScannedPod) -> list[Target]:
    """Targets of one pod whose cgroup exists: the pod, its known containers, its unidentified children."""
    targets: list[Target] = []
    if not pod.desired.is_empty():
        targets.append(Target(path=live.path, values=values_of(pod.desired), level="pod", pod=pod))
    known: dict[str, tuple[str, DesiredValues, str]] = {}
    for container in pod.containers:
        cid = runtime_id(container.container_id)
        if cid is not None:
            known[cid] = (container.name, container.desired, container.container_id or "")
    for child in live.containers:
        entry = known.get(child.id)
        if entry is not None:
            name, desired, full_id = entry
            if not desired.is_empty():
                targets.append(
                    Target(
                        path=child.path,
                        values=values_of(desired),
                        level="container",
                        pod=pod,
                        container=name,
                        container_id=full_id,
                    )
                )
        elif pod.interim is not None:
            targets.append(
                Target(
                    path=child.path,
                    values=CgroupValues(cpuset_cpus=pod.interim),
                    level="unidentified",
                    pod=pod,
                    container_id=child.id,
                )
            )
    return targets


def plan_targets(plan: Plan, live: Iterable[ScannedPod], qos_levels: Mapping[str, Path]) -> list[Target]:
    """Every target of the plan over the live tree.

    Args:
        plan: the planner's plan.
        live: the pods found by ``scan(layout)``.
        qos_levels: existing QoS level directories to confine ({"burstable": path, "besteffort": path}).
    """
    targets = [
        Target(path=path, values=values_of(plan.qos_desired), level="qos")
        for name, path in sorted(qos_levels.items())
        if name in (QOSClass.BURSTABLE.value, QOSClass.BESTEFFORT.value)
    ]
    by_uid = {pod.cgroup_key: pod for pod in plan.pods}
    for scanned in live:
        pod = by_uid.get(scanned.uid)
        if pod is not None:
            targets.extend(pod_targets(pod, scanned))
    return targets
