"""Whether a write the watcher saw in a container cgroup needs a re-apply: what the cgroup holds against the plan.

The watcher reports every write to a container's ``cpuset.cpus``, ``cpuset.mems`` or ``cpu.max``, podpin's own
included (``agent/cgroups/watch.py``). The reconciler reads the three values once and asks :func:`holds`: a
cgroup that already holds what the plan wants (podpin's own write, a rewrite of the same value) needs no pass,
so podpin's writes during a full pass cost a read each instead of a targeted pass, and take no re-apply token
(``repair_throttle.py``). What the plan wants of one container cgroup is what a pass would target
(:func:`container_values`, through ``targets.pod_targets``: its own values when the identity book names it, the
pod's interim set otherwise). Pure: the reconciler reads the files and hands the values in.
"""

from __future__ import annotations

from pathlib import Path

from agent.alloc import PodPlan
from agent.cgroups import ScannedContainer, ScannedPod
from agent.reconcile.targets import Names, pod_targets
from agent.vocabulary import CgroupValues

__all__ = ["container_values", "holds"]


def holds(actual: CgroupValues, want: CgroupValues) -> bool:
    """Whether ``actual`` already holds every value ``want`` sets, compared as the writer compares before writing
    (a ``cpu.max`` that states no period takes the cgroup's)."""
    if want.cpuset_cpus is not None and actual.cpuset_cpus != want.cpuset_cpus:
        return False
    if want.cpuset_mems is not None and actual.cpuset_mems != want.cpuset_mems:
        return False
    if want.cpu_max is None:
        return True
    return actual.cpu_max is not None and want.cpu_max.with_period(actual.cpu_max.period) == actual.cpu_max


def container_values(pod: PodPlan, container_id: str, path: Path, names: Names) -> CgroupValues | None:
    """What a pass would write into the container cgroup ``path`` (runtime id ``container_id``) of ``pod``; None
    when it would write nothing there."""
    live = ScannedPod(
        qos=pod.qos,
        uid=pod.cgroup_key,
        path=path.parent,
        containers=(ScannedContainer(id=container_id, runtime=None, path=path),),
    )
    return next((t.values for t in pod_targets(pod, live, names) if t.path == path), None)
