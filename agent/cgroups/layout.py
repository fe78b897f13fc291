"""Where the kubelet's and the runtimes' cgroups are, and which names are valid.

Paths are computed the way koordlet's path formatter does (driver x QoS x
runtime), then verified, because hard-coded naming alone breaks (katalyst#714):

systemd driver::

    Guaranteed   kubepods.slice/kubepods-pod<uid_>.slice
    Burstable    kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice
    BestEffort   kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice
    container    <pod>/cri-containerd-<id>.scope | crio-<id>.scope | docker-<id>.scope

cgroupfs driver::

    Guaranteed   kubepods/pod<uid>
    Burstable    kubepods/burstable/pod<uid>
    BestEffort   kubepods/besteffort/pod<uid>
    container    <pod>/<id> (containerd, docker) | crio-<id>

(``<uid_>`` is the uid with ``-`` replaced by ``_``.) Every input is validated
before it becomes a path component: the pod uid must be an RFC 4122 UUID in
lower-case hex and the container ID the ``status.containerStatuses[].containerID``
form ``<runtime>://<64 hex>``, so no ``..`` or ``/`` can reach a path. Every path
handed out is also checked to stay inside the cgroup root after resolving
symlinks: nothing outside ``--cgroup-root`` is ever touched.

Apart from that check, only :func:`detect_layout`, :meth:`CgroupLayout.find_pod`,
:meth:`CgroupLayout.find_container` and :func:`scan` look at the filesystem, and
they only list directories (bounded: the three QoS locations, never a recursive
search).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal

from agent.cgroups.errors import CgroupDriverError, CgroupPathError, CgroupV1Error
from agent.cgroups.path_guard import ensure_inside
from agent.vocabulary import POD_UID_FORMS, PodUID, QOSClass, Runtime, is_pod_uid

__all__ = [
    "CgroupPath",
    "Driver",
    "ContainerID",
    "CgroupLayout",
    "PodLocation",
    "ScannedContainer",
    "ScannedPod",
    "validate_uid",
    "validate_qos",
    "ensure_inside",
    "detect_layout",
    "scan",
    "list_containers",
]

CgroupPath = Path
"""An absolute path of a cgroup directory, inside the cgroup root."""


class Driver(StrEnum):
    """The kubelet's ``cgroupDriver``."""

    SYSTEMD = "systemd"
    CGROUPFS = "cgroupfs"


_HEX64 = re.compile(r"[0-9a-f]{64}")

#: systemd scope prefix of each runtime's container cgroups.
_SYSTEMD_SCOPE = {Runtime.CONTAINERD: "cri-containerd-", Runtime.CRIO: "crio-", Runtime.DOCKER: "docker-"}
#: Name fragment of each non-Guaranteed QoS level (the kubelet's lower-case QoS names).
_QOS_NAME = {QOSClass.BURSTABLE: "burstable", QOSClass.BESTEFFORT: "besteffort"}
#: CRI-O's monitor process gets a sibling cgroup named like a container; it is never one.
_CONMON = "crio-conmon-"


def validate_uid(uid: str) -> PodUID:
    """Return ``uid`` if it names a pod cgroup, else raise :class:`CgroupPathError`.

    A pod uid is a lower-case RFC 4122 UUID; a static pod's is the 32-hex config
    hash the kubelet gives it.
    """
    if not is_pod_uid(uid):
        raise CgroupPathError(f"invalid pod uid {uid!r}: expected {POD_UID_FORMS}")
    return uid


def validate_qos(qos: str) -> QOSClass:
    """The :class:`QOSClass` named by ``qos`` (``"Burstable"``...), else :class:`CgroupPathError`."""
    try:
        return QOSClass(qos)
    except ValueError:
        raise CgroupPathError(f"invalid QoS class {qos!r}: expected Guaranteed, Burstable or BestEffort") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerID:
    """A validated ``status.containerStatuses[].containerID``: runtime plus 64-hex id."""

    runtime: Runtime
    id: str

    @classmethod
    def parse(cls, text: str) -> ContainerID:
        """Parse ``containerd://<64 hex>``, ``cri-o://<64 hex>`` or ``docker://<64 hex>``.

        Raises:
            CgroupPathError: unknown scheme, wrong length, upper case, ``/`` or ``..``;
                the message quotes ``text``.
        """
        scheme, sep, ident = text.partition("://") if isinstance(text, str) else ("", "", "")
        if not sep:
            raise CgroupPathError(f"invalid container ID {text!r}: expected <runtime>://<64 lower-case hex digits>")
        try:
            runtime = Runtime(scheme)
        except ValueError:
            known = "expected containerd, cri-o or docker"
            raise CgroupPathError(
                f"invalid container ID {text!r}: unknown runtime prefix {scheme!r} ({known})"
            ) from None
        if not _HEX64.fullmatch(ident):
            raise CgroupPathError(
                f"invalid container ID {text!r}: the id after {scheme}:// must be 64 lower-case hex digits"
            )
        return cls(runtime=runtime, id=ident)

    def __str__(self) -> str:
        return f"{self.runtime.value}://{self.id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodLocation:
    """Where a pod's cgroup was found, and under which QoS level (maybe not the one expected)."""

    qos: QOSClass
    path: CgroupPath


@dataclass(frozen=True, slots=True, kw_only=True)
class ScannedContainer:
    """A container cgroup found under a pod cgroup.

    ``runtime`` is ``None`` when the name does not tell: with the cgroupfs driver,
    containerd and docker both name the cgroup by the bare id.
    """

    id: str
    runtime: Runtime | None
    path: CgroupPath


@dataclass(frozen=True, slots=True, kw_only=True)
class ScannedPod:
    """A live pod cgroup and its container cgroups (sandbox included), for start-up adoption."""

    qos: QOSClass
    uid: PodUID
    path: CgroupPath
    containers: tuple[ScannedContainer, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupLayout:
    """The kubepods hierarchy of one node: a cgroup v2 root and the kubelet's driver."""

    root: Path
    driver: Driver
    real_root: str = field(init=False, repr=False, compare=False)
    """``root`` with symlinks resolved, once: every path method checks its result against it (``ensure_inside``),
    and resolving the root again each time doubled the cost of a targeted pass's paths."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "real_root", os.path.realpath(self.root))

    # -- QoS level ---------------------------------------------------------------------
    def kubepods(self) -> CgroupPath:
        """The top of every pod's cgroups (``kubepods.slice`` or ``kubepods``)."""
        name = "kubepods.slice" if self.driver is Driver.SYSTEMD else "kubepods"
        return ensure_inside(self.root, self.root / name, resolved_root=self.real_root)

    def qos_dir(self, qos: str) -> CgroupPath:
        """The directory holding the pod cgroups of one QoS class (Guaranteed: kubepods itself)."""
        level = validate_qos(qos)
        if level is QOSClass.GUARANTEED:
            return self.kubepods()
        name = _QOS_NAME[level]
        child = f"kubepods-{name}.slice" if self.driver is Driver.SYSTEMD else name
        return ensure_inside(self.root, self.kubepods() / child, resolved_root=self.real_root)

    def qos_dirs(self) -> tuple[CgroupPath, CgroupPath, CgroupPath]:
        """kubepods, the burstable and the besteffort level: the subtrees the reconciler confines."""
        return (self.kubepods(), self.qos_dir(QOSClass.BURSTABLE), self.qos_dir(QOSClass.BESTEFFORT))

    # -- pods --------------------------------------------------------------------------
    def pod_dir_name(self, uid: str, qos: str) -> str:
        """The directory name of a pod's cgroup (no filesystem access)."""
        validate_uid(uid)
        level = validate_qos(qos)
        if self.driver is Driver.CGROUPFS:
            return f"pod{uid}"
        middle = "" if level is QOSClass.GUARANTEED else f"{_QOS_NAME[level]}-"
        return f"kubepods-{middle}pod{uid.replace('-', '_')}.slice"

    def pod_path(self, uid: str, qos: str) -> CgroupPath:
        """Where the kubelet puts the cgroup of a pod of this QoS class."""
        return ensure_inside(self.root, self.qos_dir(qos) / self.pod_dir_name(uid, qos), resolved_root=self.real_root)

    def parse_pod_dir(self, qos: str, name: str) -> PodUID | None:
        """The uid of a pod cgroup named ``name`` inside ``qos_dir(qos)``, or None if it is not one."""
        level = validate_qos(qos)
        if self.driver is Driver.CGROUPFS:
            prefix, suffix = "pod", ""
        else:
            middle = "" if level is QOSClass.GUARANTEED else f"{_QOS_NAME[level]}-"
            prefix, suffix = f"kubepods-{middle}pod", ".slice"
        if not name.startswith(prefix) or not name.endswith(suffix):
            return None
        body = name[len(prefix) : len(name) - len(suffix)]
        uid = body.replace("_", "-") if self.driver is Driver.SYSTEMD else body
        if self.driver is Driver.SYSTEMD and "-" in body:
            return None
        return uid if is_pod_uid(uid) else None

    def find_pod(self, uid: str, qos: str) -> PodLocation | None:
        """Find a pod's cgroup: at the expected QoS level first, then at the other two.

        The QoS class podpin computed can differ from the kubelet's (a newer
        field it does not weigh, a pod-level resources nuance); the cgroup is
        where the kubelet put it, so the two other levels are tried too.
        """
        expected = validate_qos(qos)
        validate_uid(uid)
        for level in (expected, *(q for q in QOSClass if q is not expected)):
            path = self.pod_path(uid, level)
            if path.is_dir() and not path.is_symlink():
                return PodLocation(qos=level, path=path)
        return None

    # -- containers --------------------------------------------------------------------
    def container_dir_name(self, container_id: str | ContainerID) -> str:
        """The directory name of a container's cgroup, from its status containerID."""
        cid = container_id if isinstance(container_id, ContainerID) else ContainerID.parse(container_id)
        if self.driver is Driver.SYSTEMD:
            return f"{_SYSTEMD_SCOPE[cid.runtime]}{cid.id}.scope"
        return f"crio-{cid.id}" if cid.runtime is Runtime.CRIO else cid.id

    def container_path(self, uid: str, qos: str, container_id: str | ContainerID) -> CgroupPath:
        """Where a container's cgroup is when its pod sits at the expected QoS level."""
        return ensure_inside(
            self.root, self.pod_path(uid, qos) / self.container_dir_name(container_id), resolved_root=self.real_root
        )

    def find_container(self, uid: str, qos: str, container_id: str | ContainerID) -> CgroupPath | None:
        """The existing cgroup of a container (its pod found as :meth:`find_pod` does), or None."""
        name = self.container_dir_name(container_id)
        pod = self.find_pod(uid, qos)
        if pod is None:
            return None
        path = ensure_inside(self.root, pod.path / name, resolved_root=self.real_root)
        return path if path.is_dir() and not path.is_symlink() else None

    def parse_container_dir(self, name: str) -> tuple[Runtime | None, str] | None:
        """``(runtime, id)`` of a container cgroup named ``name``, or None (conmon, other names).

        The runtime is None for a bare 64-hex name (cgroupfs driver, containerd or docker).
        """
        if name.startswith(_CONMON):
            return None
        if self.driver is Driver.SYSTEMD:
            if not name.endswith(".scope"):
                return None
            stem = name[: -len(".scope")]
            for runtime, prefix in _SYSTEMD_SCOPE.items():
                ident = stem[len(prefix) :]
                if stem.startswith(prefix) and _HEX64.fullmatch(ident):
                    return (runtime, ident)
            return None
        if name.startswith("crio-") and _HEX64.fullmatch(name[len("crio-") :]):
            return (Runtime.CRIO, name[len("crio-") :])
        return (None, name) if _HEX64.fullmatch(name) else None


def detect_layout(root: Path, driver: Literal["auto", "systemd", "cgroupfs"] | str = "auto") -> CgroupLayout:
    """The layout of the cgroup v2 hierarchy at ``root``.

    Args:
        root: the cgroup v2 mount (``/sys/fs/cgroup``, or a fixture tree).
        driver: ``auto`` picks systemd when ``kubepods.slice`` exists, else
            cgroupfs when ``kubepods`` exists; a named driver must find its directory.

    Raises:
        CgroupV1Error: ``<root>/cgroup.controllers`` is missing (v1 or hybrid).
        CgroupDriverError: no kubepods directory for the driver, or an unknown driver name.
    """
    if not (root / "cgroup.controllers").is_file():
        raise CgroupV1Error(
            f"cgroup v1 is not supported: {root}/cgroup.controllers not found; "
            "podpin needs the unified cgroup v2 hierarchy"
        )
    systemd_dir, cgroupfs_dir = root / "kubepods.slice", root / "kubepods"
    if driver == "auto":
        if systemd_dir.is_dir():
            return CgroupLayout(root=root, driver=Driver.SYSTEMD)
        if cgroupfs_dir.is_dir():
            return CgroupLayout(root=root, driver=Driver.CGROUPFS)
        raise CgroupDriverError(
            f"cannot detect the kubelet's cgroup driver: neither {systemd_dir} (systemd) "
            f"nor {cgroupfs_dir} (cgroupfs) exists"
        )
    try:
        chosen = Driver(driver)
    except ValueError:
        raise CgroupDriverError(f"invalid cgroup driver {driver!r}: expected auto, systemd or cgroupfs") from None
    expected = systemd_dir if chosen is Driver.SYSTEMD else cgroupfs_dir
    if not expected.is_dir():
        raise CgroupDriverError(
            f"cgroup driver {chosen.value}: {expected} not found (is the kubelet's cgroupDriver another?)"
        )
    return CgroupLayout(root=root, driver=chosen)


def _subdirs(path: Path) -> list[str]:
    """Names of the real (non-symlink) subdirectories of ``path``, sorted; [] if it is gone."""
    try:
        with os.scandir(path) as entries:
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def scan(layout: CgroupLayout) -> list[ScannedPod]:
    """Every live pod cgroup with its container cgroups, for rebuilding state at start-up.

    Lists the three QoS levels and each pod directory found there (nothing
    deeper). Pods come in QoS order (Guaranteed, Burstable, BestEffort), then by
    directory name; names that are not pod or container cgroups are ignored.
    """
    found: list[ScannedPod] = []
    real_root = layout.real_root
    for qos in QOSClass:
        qos_path = layout.qos_dir(qos)
        for name in _subdirs(qos_path):
            uid = layout.parse_pod_dir(qos, name)
            if uid is None:
                continue
            pod_path = ensure_inside(layout.root, qos_path / name, resolved_root=real_root)
            containers = list_containers(layout, pod_path) or ()
            found.append(ScannedPod(qos=qos, uid=uid, path=pod_path, containers=containers))
    return found


def list_containers(layout: CgroupLayout, pod_path: Path) -> tuple[ScannedContainer, ...] | None:
    """The container cgroups in the pod cgroup at ``pod_path``, by name; None when it is gone.

    One ``scandir``: the entries' types come with the listing, so the pod's dozens of control files cost no
    ``stat`` each (under a TCG guest, listing a pod with ``is_dir()`` per entry was a large part of a pass).

    Raises:
        OSError: the pod cgroup could not be listed for another reason than being gone.
    """
    try:
        with os.scandir(pod_path) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return None
    containers: list[ScannedContainer] = []
    for name in names:
        parsed = layout.parse_container_dir(name)
        if parsed is not None:
            path = ensure_inside(layout.root, pod_path / name, resolved_root=layout.real_root)
            containers.append(ScannedContainer(id=parsed[1], runtime=parsed[0], path=path))
    return tuple(containers)
