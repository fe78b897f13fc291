"""Translation between NRI's protobuf messages and podpin's values (``agent.nri.model``).

Incoming messages are read strictly where podpin relies on a field: a cpuset
string that is not a Linux cpulist raises :class:`ConvertError` naming the
message and field, and the plugin answers that request empty (``invalid``)
rather than hand the handler a guess. Outgoing values are built only from
validated model values, so what podpin sends is always well-formed: a set
cpuset is never empty, a set quota is positive or -1.

The NRI wrapper messages carry presence: an unset ``OptionalInt64`` means "leave
the value alone", which is what ``None`` means in the model. Cpusets are plain
strings in NRI, where the empty string means unset.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.cpuset import CPUSet, CPUSetError
from agent.nri.model import (
    Container,
    ContainerAdjustment,
    ContainerState,
    ContainerUpdate,
    CPUResources,
    PodSandbox,
)
from agent.nri.proto import nri_pb2 as pb

__all__ = [
    "ConvertError",
    "adjustment_to_pb",
    "container_from_pb",
    "pod_from_pb",
    "resources_from_pb",
    "update_from_pb",
    "updates_to_pb",
]


class ConvertError(ValueError):
    """A runtime message podpin cannot read; the text names the message and field."""


def _cpuset(where: str, text: str) -> CPUSet | None:
    if not text:
        return None
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        raise ConvertError(f"{where}: {err}") from err


def resources_from_pb(where: str, resources: pb.LinuxResources) -> CPUResources:
    """The CPU part of NRI ``LinuxResources``.

    Raises:
        ConvertError: ``cpu.cpus`` or ``cpu.mems`` is not a cpulist.
    """
    cpu = resources.cpu
    return CPUResources(
        shares=cpu.shares.value if cpu.HasField("shares") else None,
        quota=cpu.quota.value if cpu.HasField("quota") else None,
        period=cpu.period.value if cpu.HasField("period") else None,
        cpus=_cpuset(f"{where}.cpu.cpus", cpu.cpus),
        mems=_cpuset(f"{where}.cpu.mems", cpu.mems),
    )


def pod_from_pb(pod: pb.PodSandbox) -> PodSandbox:
    """A pod sandbox as podpin sees it."""
    return PodSandbox(
        id=pod.id,
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        cgroup_parent=pod.linux.cgroup_parent,
        cgroups_path=pod.linux.cgroups_path,
    )


def container_from_pb(container: pb.Container) -> Container:
    """A container as podpin sees it.

    Raises:
        ConvertError: its cpuset strings are not cpulists.
    """
    linux = container.linux
    resources = None
    if container.HasField("linux") and linux.HasField("resources"):
        resources = resources_from_pb(f"Container {container.id} linux.resources", linux.resources)
    try:
        state = ContainerState(container.state)
    except ValueError:
        state = ContainerState.UNKNOWN
    return Container(
        id=container.id,
        pod_sandbox_id=container.pod_sandbox_id,
        name=container.name,
        state=state,
        labels=dict(container.labels),
        annotations=dict(container.annotations),
        cgroups_path=linux.cgroups_path,
        resources=resources,
    )


def _fill_cpu(
    cpu: pb.LinuxCPU, cpus: CPUSet | None, mems: CPUSet | None, quota: int | None, period: int | None
) -> None:
    if cpus is not None:
        cpu.cpus = str(cpus)
    if mems is not None:
        cpu.mems = str(mems)
    if quota is not None:
        cpu.quota.value = quota
    if period is not None:
        cpu.period.value = period


def adjustment_to_pb(adjustment: ContainerAdjustment) -> pb.ContainerAdjustment | None:
    """NRI ``ContainerAdjustment`` of the values set; ``None`` when nothing is adjusted.

    Raises:
        TypeError: ``adjustment`` is not a :class:`ContainerAdjustment`.
    """
    if not isinstance(adjustment, ContainerAdjustment):
        raise TypeError(f"expected a ContainerAdjustment, got {type(adjustment).__name__}")
    if adjustment.is_empty():
        return None
    message = pb.ContainerAdjustment()
    _fill_cpu(
        message.linux.resources.cpu,
        adjustment.cpuset_cpus,
        adjustment.cpuset_mems,
        adjustment.cpu_quota,
        adjustment.cpu_period,
    )
    return message


def updates_to_pb(updates: Iterable[ContainerUpdate]) -> list[pb.ContainerUpdate]:
    """NRI ``ContainerUpdate`` messages, in order.

    Raises:
        TypeError: an item is not a :class:`ContainerUpdate` (or ``updates`` is not iterable).
    """
    out = []
    for update in updates:
        if not isinstance(update, ContainerUpdate):
            raise TypeError(f"expected ContainerUpdate items, got {type(update).__name__}")
        message = pb.ContainerUpdate(container_id=update.container_id, ignore_failure=update.ignore_failure)
        _fill_cpu(
            message.linux.resources.cpu, update.cpuset_cpus, update.cpuset_mems, update.cpu_quota, update.cpu_period
        )
        out.append(message)
    return out


def update_from_pb(update: pb.ContainerUpdate) -> ContainerUpdate:
    """A ``ContainerUpdate`` as podpin sees it (the runtime's list of failed updates).

    Raises:
        ConvertError: a cpuset string is not a cpulist, or the values break the model's rules.
    """
    cpu = update.linux.resources.cpu
    where = f"ContainerUpdate {update.container_id}"
    try:
        return ContainerUpdate(
            container_id=update.container_id,
            cpuset_cpus=_cpuset(f"{where} cpu.cpus", cpu.cpus),
            cpuset_mems=_cpuset(f"{where} cpu.mems", cpu.mems),
            cpu_quota=cpu.quota.value if cpu.HasField("quota") else None,
            cpu_period=cpu.period.value if cpu.HasField("period") else None,
            ignore_failure=update.ignore_failure,
        )
    except ConvertError:
        raise
    except ValueError as err:
        raise ConvertError(str(err)) from err
