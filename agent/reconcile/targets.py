"""From a :class:`Plan` to file values per existing cgroup (no writes here).

The plan speaks of pods and containers; the writer needs paths. This module
joins the two over the live tree, one QoS level set or one pod at a time (a
full pass takes them as steps, ``sweep.py``):

* the burstable and besteffort QoS levels get the node shared pool;
* a pod's cgroup gets the pod values (found at any QoS level, see
  ``CgroupLayout.find_pod``);
* a container cgroup gets that container's values when the identity book
  (``identity.py``: NRI, the runtime's bundle, else the pod status) names it
  as a container of this very pod; the sandbox, and any child not named yet
  (or named by its runtime as part of another pod), gets the pod's interim set
  (``docs/design.md``, "Container identity").

Only cgroups that exist are targeted: a pod or container that has not started
gets its values when its cgroup appears (the watcher tells).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.alloc import Plan, PodPlan
from agent.cgroups import ScannedPod
from agent.reconcile.identity import Identity
from agent.runtime import ContainerType, IdentitySource
from agent.vocabulary import CgroupLevel, CgroupValues, QOSClass

__all__ = ["Names", "Target", "pod_targets", "qos_targets"]


class Names(Protocol):
    """Who a child cgroup of a pod is (the identity book)."""

    def in_pod(self, pod_uid: str, runtime_id: str) -> Identity | None:
        """The identity of ``runtime_id`` when its most trusted source places it in pod ``pod_uid``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One cgroup to hold values, and whom it belongs to (for logs, Events and metrics)."""

    path: Path
    values: CgroupValues
    level: CgroupLevel
    pod: PodPlan | None = None
    container: str | None = None
    container_id: str | None = None
    source: IdentitySource | None = None
    """How a container or sandbox was named; None when it was not."""


def pod_targets(pod: PodPlan, live: ScannedPod, names: Names) -> list[Target]:
    """Targets of one pod whose cgroup exists: the pod, its named containers, its sandbox and unnamed children."""
    targets: list[Target] = []
    if not pod.desired.is_empty():
        targets.append(Target(path=live.path, values=pod.desired, level=CgroupLevel.POD, pod=pod))
    planned = {container.name: container for container in pod.containers}
    for child in live.containers:
        identity = names.in_pod(live.uid, child.id)
        container = planned.get(identity.name) if identity is not None and identity.name is not None else None
        if identity is not None and container is not None and identity.kind is ContainerType.CONTAINER:
            if not container.desired.is_empty():
                targets.append(
                    Target(
                        path=child.path,
                        values=container.desired,
                        level=CgroupLevel.CONTAINER,
                        pod=pod,
                        container=container.name,
                        container_id=identity.container_id,
                        source=identity.source,
                    )
                )
        elif pod.interim is not None:
            sandbox = identity is not None and identity.kind is ContainerType.SANDBOX
            targets.append(
                Target(
                    path=child.path,
                    values=CgroupValues(cpuset_cpus=pod.interim),
                    level=CgroupLevel.SANDBOX if sandbox else CgroupLevel.UNIDENTIFIED,
                    pod=pod,
                    container_id=identity.container_id if identity is not None else child.id,
                    source=identity.source if identity is not None else None,
                )
            )
    return targets


def qos_targets(plan: Plan, qos_levels: Mapping[str, Path]) -> list[Target]:
    """The burstable and besteffort levels among ``qos_levels`` ({"burstable": path, ...}): the node shared pool."""
    return [
        Target(path=path, values=plan.qos_desired, level=CgroupLevel.QOS)
        for name, path in sorted(qos_levels.items())
        if name in (QOSClass.BURSTABLE.value, QOSClass.BESTEFFORT.value)
    ]
