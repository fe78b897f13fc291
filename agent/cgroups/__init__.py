"""The cgroup v2 layer: where pod and container cgroups are, reading and writing them, watching them.

``layout`` computes and validates paths (systemd or cgroupfs driver; containerd,
CRI-O or docker), ``fs`` reads values and enables controllers, ``writer`` writes
values in a safe order with a read-back check (through ``CgroupFS.apply``),
``values`` holds the file names and write records both share (what a cgroup should hold is
:class:`agent.vocabulary.CgroupValues`), ``watch`` reports cgroups
appearing and disappearing, and writes to the files podpin manages in a
container cgroup. Only cgroup v2 is supported; a v1 or hybrid host is
refused with :class:`CgroupV1Error`.
"""

from agent.cgroups.errors import (
    CgroupDriverError,
    CgroupError,
    CgroupFileError,
    CgroupPathError,
    CgroupReadError,
    CgroupV1Error,
    CgroupValueError,
    CgroupWriteError,
    EmptyCpusetError,
    MismatchError,
)
from agent.cgroups.fs import CgroupFS, CpuStat, Effective, FileOps, RealFileOps
from agent.cgroups.layout import (
    CgroupLayout,
    CgroupPath,
    ContainerID,
    Driver,
    PodLocation,
    ScannedContainer,
    ScannedPod,
    detect_layout,
    ensure_inside,
    list_containers,
    scan,
    validate_qos,
    validate_uid,
)
from agent.cgroups.path_guard import checked_once
from agent.cgroups.values import ApplyReport, WriteRecord
from agent.cgroups.watch import (
    MANAGED_FILES,
    CgroupFileChanged,
    CgroupRemoved,
    CgroupWatcher,
    ContainerCgroupAppeared,
    PodCgroupAppeared,
    Sink,
    WatchEvent,
    WatchMode,
)

__all__ = [
    # errors
    "CgroupError",
    "CgroupPathError",
    "CgroupV1Error",
    "CgroupDriverError",
    "CgroupValueError",
    "CgroupFileError",
    "CgroupReadError",
    "CgroupWriteError",
    "EmptyCpusetError",
    "MismatchError",
    # layout
    "CgroupPath",
    "Driver",
    "ContainerID",
    "CgroupLayout",
    "PodLocation",
    "ScannedContainer",
    "ScannedPod",
    "detect_layout",
    "scan",
    "list_containers",
    "ensure_inside",
    "checked_once",
    "validate_uid",
    "validate_qos",
    # fs
    "FileOps",
    "RealFileOps",
    "CgroupFS",
    "Effective",
    "CpuStat",
    # values
    "WriteRecord",
    "ApplyReport",
    # watch
    "CgroupWatcher",
    "PodCgroupAppeared",
    "ContainerCgroupAppeared",
    "CgroupRemoved",
    "CgroupFileChanged",
    "MANAGED_FILES",
    "WatchEvent",
    "Sink",
    "WatchMode",
]
