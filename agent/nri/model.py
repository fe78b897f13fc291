"""What the NRI plugin hands to podpin and takes back: typed, frozen values, no protobuf (pure).

The runtime describes pods and containers with NRI's protobuf messages
(containerd/nri ``pkg/api/api.proto``: ``PodSandbox``, ``Container``,
``LinuxResources``, ``ContainerAdjustment``, ``ContainerUpdate``).
``agent.nri.convert`` translates them to and from these values, so the code
that decides (the reconciler, through :class:`agent.nri.handler.NRIHandler`)
never sees a protobuf object and can be tested without one.

Only what podpin uses is kept: identity (sandbox id, pod uid, namespace, name),
labels and annotations, the cgroup paths, and the CPU side of the resources.
podpin sets four container values, the same ones it writes into cgroup v2 files
without NRI: ``cpuset.cpus``, ``cpuset.mems`` and the CFS quota and period
(``cpu.max``). A quota of -1 lifts the limit: runc writes ``max <period>`` for any
quota <= 0 (opencontainers/runc ``libcontainer/cgroups/fs2/cpu.go``), which is
what podpin gives exclusive containers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from agent.cpuset import CPUSet
from agent.vocabulary import CgroupValues

__all__ = [
    "CPUResources",
    "Container",
    "ContainerAdjustment",
    "ContainerState",
    "ContainerUpdate",
    "CreateResult",
    "PodSandbox",
    "UNLIMITED_QUOTA",
]

UNLIMITED_QUOTA = -1
"""The CFS quota that means "no limit" (runc writes ``max``)."""


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


class ContainerState(Enum):
    """A container's state as the runtime reports it (NRI ``ContainerState``)."""

    UNKNOWN = 0
    CREATED = 1
    PAUSED = 2
    RUNNING = 3
    STOPPED = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUResources:
    """The CPU part of a container's resources as the runtime holds them (NRI ``LinuxCPU``).

    ``None`` means the runtime did not set the value. ``shares`` is the cgroup v1
    weight the kubelet derives from the CPU request (runc converts it to
    ``cpu.weight``), ``quota``/``period`` make ``cpu.max``.
    """

    shares: int | None = None
    quota: int | None = None
    period: int | None = None
    cpus: CPUSet | None = None
    mems: CPUSet | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSandbox:
    """A pod as the runtime knows it.

    ``uid`` is the Kubernetes pod UID (the key of podpin's plan), ``id`` the
    runtime's sandbox id (what containers name in ``pod_sandbox_id``).
    ``cgroup_parent`` is the pod cgroup the kubelet asked for (cgroupfs:
    ``/kubepods/burstable/pod<uid>``; systemd: ``kubepods-burstable-pod<uid>.slice``),
    ``cgroups_path`` the sandbox container's own, when the runtime reports it.
    """

    id: str
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cgroup_parent: str = ""
    cgroups_path: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _frozen_map(self.labels))
        object.__setattr__(self, "annotations", _frozen_map(self.annotations))


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    """A container as the runtime knows it.

    ``cgroups_path`` is the OCI ``linux.cgroupsPath`` (cgroupfs:
    ``/kubepods/pod<uid>/<id>``; systemd: ``kubepods-pod<uid>.slice:cri-containerd:<id>``).
    ``resources`` is ``None`` when the runtime sent no Linux resources.
    """

    id: str
    pod_sandbox_id: str
    name: str
    state: ContainerState = ContainerState.UNKNOWN
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cgroups_path: str = ""
    resources: CPUResources | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _frozen_map(self.labels))
        object.__setattr__(self, "annotations", _frozen_map(self.annotations))


def _check_values(where: str, cpus: CPUSet | None, mems: CPUSet | None, quota: int | None, period: int | None) -> None:
    """The invariants shared by adjustments and updates; raise ValueError naming the field."""
    for name, value in (("cpuset_cpus", cpus), ("cpuset_mems", mems)):
        if value is not None and not isinstance(value, CPUSet):
            raise ValueError(f"{where}.{name}: {value!r} is not a CPUSet")
        if value is not None and value.is_empty():
            raise ValueError(f"{where}.{name}: an empty set would un-pin the container; use None to leave it alone")
    if quota is not None and (isinstance(quota, bool) or not isinstance(quota, int) or quota == 0 or quota < -1):
        raise ValueError(f"{where}.cpu_quota: {quota!r} is not a positive number of microseconds or -1 (no limit)")
    if period is not None and (isinstance(period, bool) or not isinstance(period, int) or period <= 0):
        raise ValueError(f"{where}.cpu_period: {period!r} is not a positive number of microseconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerAdjustment:
    """The values podpin gives a container the runtime is creating; ``None`` leaves a value to the runtime.

    Raises:
        ValueError: an empty cpuset, or a quota or period that is not a positive
            number of microseconds (quota -1 lifts the limit).
    """

    cpuset_cpus: CPUSet | None = None
    cpuset_mems: CPUSet | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None

    def __post_init__(self) -> None:
        _check_values("ContainerAdjustment", self.cpuset_cpus, self.cpuset_mems, self.cpu_quota, self.cpu_period)

    @classmethod
    def of(cls, values: CgroupValues) -> ContainerAdjustment:
        """The adjustment that gives a container these planned cgroup values.

        An empty cpuset is left to the runtime (it would un-pin); ``cpu.max``
        becomes the quota (:data:`UNLIMITED_QUOTA` for ``max``) and its period
        (None, the runtime's, when the value states none).
        """
        cpu_max = values.cpu_max
        return cls(
            cpuset_cpus=values.cpuset_cpus or None,
            cpuset_mems=values.cpuset_mems or None,
            cpu_quota=None if cpu_max is None else UNLIMITED_QUOTA if cpu_max.quota is None else cpu_max.quota,
            cpu_period=None if cpu_max is None else cpu_max.period,
        )

    def is_empty(self) -> bool:
        """True when nothing is adjusted."""
        return (
            self.cpuset_cpus is None and self.cpuset_mems is None and self.cpu_quota is None and self.cpu_period is None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerUpdate:
    """New values for an existing container (another container of the node, or the one being updated).

    ``ignore_failure`` asks the runtime not to fail the triggering request when
    this update cannot be applied (the container may be exiting).

    Raises:
        ValueError: an empty container id or cpuset, or a bad quota or period.
    """

    container_id: str
    cpuset_cpus: CPUSet | None = None
    cpuset_mems: CPUSet | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    ignore_failure: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.container_id, str) or not self.container_id:
            raise ValueError(f"ContainerUpdate.container_id: {self.container_id!r} is not a container id")
        _check_values(
            f"ContainerUpdate({self.container_id})", self.cpuset_cpus, self.cpuset_mems, self.cpu_quota, self.cpu_period
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateResult:
    """The answer to CreateContainer: the new container's values and updates of other containers.

    ``updates`` is how pools shrink or grow for running containers when the new
    one takes CPUs (see ``agent.nri.plugin`` on NRI updates versus direct cgroup
    writes).
    """

    adjustment: ContainerAdjustment = field(default_factory=ContainerAdjustment)
    updates: tuple[ContainerUpdate, ...] = ()
