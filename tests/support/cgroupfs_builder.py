"""Fixture cgroup v2 trees in a temp dir, plus FileOps that emulate the kernel, record or fail.

Shared by every test that needs a cgroupfs: the trees look like the real ones
(``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/
cri-containerd-<id>.scope`` and the cgroupfs-driver equivalents), with the files
the kernel shows in a cgroup that has the cpuset and cpu controllers enabled.

Names are written out here independently of ``agent.cgroups.layout`` so a test
that builds with this module and looks up with the layout checks one against
the other.

Ordinary directories do not behave like cgroupfs: ``cpuset.cpus.effective``
does not follow a write by itself. :class:`KernelEmulation` is a ``FileOps``
that does what the kernel does on write (``docs/design.md``, "cgroup v2 facts"):
effective = own ∩ parent's effective, or the parent's effective when that is
empty or own is unset, recomputed for the whole subtree; a CPU id above the
machine's highest fails with ERANGE and one inside the range it lacks with
EINVAL (as measured on Debian's 6.1 kernel); ``cpu.max`` keeps its period when
only a quota is written; ``cgroup.subtree_control`` creates the controller files
in the children.
A value is replaced whole, as the kernel replaces it: a write here is an open with ``O_TRUNC`` and a write, so
another thread could read the empty file in between (a read of a cgroup file never shows that); every read and
write of the emulation and :meth:`FixtureTree.preset` hold one lock (:data:`_VALUE_LOCK`).
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.cgroups.fs import FileOps, RealFileOps
from agent.cpuset import CPUSet, CPUSetError

#: Files of a cgroup with the cpuset controller enabled by its parent.
CPUSET_FILES = ("cpuset.cpus", "cpuset.cpus.effective", "cpuset.mems", "cpuset.mems.effective")
#: Files of a cgroup with the cpu controller enabled by its parent.
CPU_FILES = ("cpu.max", "cpu.stat", "cpu.weight")
#: The controllers of a typical node, in the kernel's order.
ROOT_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"
#: What the kubelet enables on kubepods and below.
KUBE_SUBTREE = "cpuset cpu io memory hugetlb pids"
_KERNEL_ORDER = ROOT_CONTROLLERS.split()
_VALUE_LOCK = threading.RLock()
"""Held by every emulated read and write: a reader sees a file's old value or its new one, never the empty file
between a write's truncation and its data (the agent reads on another thread while a test writes)."""

CPU_STAT = "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"

#: systemd scope prefix and cgroupfs name prefix of each runtime's container cgroups.
SYSTEMD_SCOPE = {"containerd": "cri-containerd-", "cri-o": "crio-", "docker": "docker-"}
CGROUPFS_PREFIX = {"containerd": "", "cri-o": "crio-", "docker": ""}


def pod_uid(n: int) -> str:
    """A valid, distinct pod uid for test number ``n``."""
    return f"{n:08x}-1111-4222-8333-{n:012x}"


def container_hex(n: int) -> str:
    """A valid, distinct 64-hex container id for test number ``n``."""
    return f"{n:016x}" * 4


def _read(path: Path) -> str:
    return path.read_text().strip()


@dataclass
class FixtureTree:
    """A cgroup v2 tree with kubepods and both QoS levels, for one cgroup driver."""

    root: Path
    driver: str
    subtree: str = KUBE_SUBTREE

    # -- building ----------------------------------------------------------------------
    def mkcgroup(self, path: Path, *, procs: str = "") -> Path:
        """Create a cgroup directory with the files its parent's ``subtree_control`` enables."""
        path.mkdir()
        enabled = _read(path.parent / "cgroup.subtree_control").split()
        files = {"cgroup.controllers": " ".join(enabled), "cgroup.subtree_control": "", "cgroup.procs": procs}
        if "cpuset" in enabled:
            files.update({"cpuset.cpus": "", "cpuset.mems": ""})
            files["cpuset.cpus.effective"] = _read(path.parent / "cpuset.cpus.effective")
            files["cpuset.mems.effective"] = _read(path.parent / "cpuset.mems.effective")
        if "cpu" in enabled:
            files.update({"cpu.max": "max 100000", "cpu.stat": CPU_STAT, "cpu.weight": "100"})
        for name, text in files.items():
            (path / name).write_text(text)
        return path

    def kubepods(self) -> Path:
        return self.root / ("kubepods.slice" if self.driver == "systemd" else "kubepods")

    def qos_dir(self, qos: str) -> Path:
        """The parent directory of the pod cgroups of ``qos`` (Guaranteed: kubepods)."""
        if qos == "Guaranteed":
            return self.kubepods()
        name = qos.lower()
        return self.kubepods() / (f"kubepods-{name}.slice" if self.driver == "systemd" else name)

    def pod_name(self, uid: str, qos: str) -> str:
        if self.driver == "cgroupfs":
            return f"pod{uid}"
        middle = "" if qos == "Guaranteed" else f"{qos.lower()}-"
        return f"kubepods-{middle}pod{uid.replace('-', '_')}.slice"

    def add_pod(self, uid: str, qos: str = "Guaranteed") -> Path:
        """Create a pod cgroup as the kubelet does (controllers enabled for its containers)."""
        path = self.mkcgroup(self.qos_dir(qos) / self.pod_name(uid, qos))
        (path / "cgroup.subtree_control").write_text(self.subtree)
        return path

    def container_name(self, container_id: str, runtime: str = "containerd") -> str:
        if self.driver == "systemd":
            return f"{SYSTEMD_SCOPE[runtime]}{container_id}.scope"
        return f"{CGROUPFS_PREFIX[runtime]}{container_id}"

    def add_container(self, pod: Path, container_id: str, runtime: str = "containerd") -> Path:
        """Create a container cgroup (a leaf with one process) under ``pod``."""
        return self.mkcgroup(pod / self.container_name(container_id, runtime), procs="4242\n")

    def add_conmon(self, pod: Path, container_id: str) -> Path:
        """Create CRI-O's conmon cgroup next to the container's (never a container)."""
        name = f"crio-conmon-{container_id}" + (".scope" if self.driver == "systemd" else "")
        return self.mkcgroup(pod / name, procs="4241\n")

    # -- inspecting and presetting -----------------------------------------------------
    def read(self, cgroup: Path, file: str) -> str:
        return _read(cgroup / file)

    def preset(self, cgroup: Path, file: str, text: str) -> None:
        """Put ``text`` in a file as the starting state (or a drift behind the agent's back), then recompute
        effective sets like the kernel."""
        with _VALUE_LOCK:
            (cgroup / file).write_text(text)
            _recompute_effective(self.root, cgroup)

    def ops(self) -> KernelEmulation:
        """A FileOps that behaves like the kernel on this tree."""
        return KernelEmulation(self.root)


def build_tree(
    base: Path,
    *,
    driver: str = "systemd",
    cpus: str = "0-7",
    mems: str = "0-1",
    root_subtree: str = "cpuset cpu io memory pids",
    subtree: str = KUBE_SUBTREE,
) -> FixtureTree:
    """A cgroup v2 root at ``base/cgroup`` with kubepods and the burstable/besteffort levels.

    ``root_subtree`` and ``subtree`` are the ``cgroup.subtree_control`` of the root and of
    the kubepods levels; leave ``cpuset``/``cpu`` out to get cgroups without those files.
    """
    root = base / "cgroup"
    root.mkdir()
    for name, text in {
        "cgroup.controllers": ROOT_CONTROLLERS,
        "cgroup.subtree_control": root_subtree,
        "cgroup.procs": "1\n",
        "cpuset.cpus.effective": cpus,
        "cpuset.mems.effective": mems,
        "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
    }.items():
        (root / name).write_text(text)
    tree = FixtureTree(root=root, driver=driver, subtree=subtree)
    for level in (tree.kubepods(), tree.qos_dir("Burstable"), tree.qos_dir("BestEffort")):
        tree.mkcgroup(level)
        (level / "cgroup.subtree_control").write_text(subtree)
    return tree


def build_v1_tree(base: Path, *, hybrid: bool = False) -> Path:
    """A cgroup v1 mount point (one directory per controller, no root ``cgroup.controllers``).

    With ``hybrid`` the v2 hierarchy is mounted at ``unified/`` (systemd's hybrid
    mode), which still has no controllers at the root.
    """
    root = base / "cgroup-v1"
    for controller in ("cpu,cpuacct", "cpuset", "memory", "pids"):
        kubepods = root / controller / "kubepods"
        kubepods.mkdir(parents=True)
        (kubepods / "tasks").write_text("")
    (root / "cpuset" / "kubepods" / "cpuset.cpus").write_text("0-7")
    if hybrid:
        (root / "unified").mkdir()
        (root / "unified" / "cgroup.controllers").write_text("")
    return root


def _cgroups_below(cgroup: Path) -> Iterator[Path]:
    """``cgroup`` and every cgroup below it, parents before children."""
    yield cgroup
    for dirpath, dirnames, _ in os.walk(cgroup):
        dirnames.sort()
        for name in dirnames:
            yield Path(dirpath) / name


def _recompute_effective(root: Path, cgroup: Path) -> None:
    """Recompute ``cpuset.*.effective`` of ``cgroup``'s subtree from the parent chain, like the kernel.

    A test may remove a pod's cgroups while the agent writes to them. The kernel never
    recreates a file of a removed cgroup, so neither does this: an effective file is only
    overwritten, never created, and a cgroup that vanishes half-way is skipped.
    """
    for path in _cgroups_below(cgroup):
        if path == root or not (path / "cpuset.cpus").exists():
            continue
        try:
            for file in ("cpuset.cpus", "cpuset.mems"):
                own = CPUSet.parse(_read(path / file))
                parent = CPUSet.parse(_read(path.parent / f"{file}.effective"))
                effective = own & parent if own and own & parent else parent
                RealFileOps().write(path / f"{file}.effective", str(effective))
        except FileNotFoundError:
            continue


@dataclass
class KernelEmulation:
    """A FileOps over a fixture tree that reacts to writes the way cgroup v2 does."""

    root: Path
    inner: FileOps = field(default_factory=RealFileOps)

    def read(self, path: Path) -> str:
        with _VALUE_LOCK:
            return self.inner.read(path)

    def write(self, path: Path, text: str) -> None:
        with _VALUE_LOCK:
            self._write(path, text)

    def _write(self, path: Path, text: str) -> None:
        name, cgroup = path.name, path.parent
        if name in ("cpuset.cpus", "cpuset.mems"):
            try:
                value = CPUSet.parse(text)
            except CPUSetError:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL)) from None
            machine = CPUSet.parse(_read(self.root / f"{name}.effective"))
            if value and max(value) > max(machine):  # beyond nr_cpu_ids: measured ERANGE on 6.1
                raise OSError(errno.ERANGE, os.strerror(errno.ERANGE))
            if not value.is_subset_of(machine):
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            self.inner.write(path, str(value))
            _recompute_effective(self.root, cgroup)
        elif name == "cpu.max":
            self.inner.write(path, self._cpu_max(path, text))
        elif name == "cgroup.subtree_control":
            self._subtree_control(cgroup, text)
        else:
            self.inner.write(path, text)

    def _cpu_max(self, path: Path, text: str) -> str:
        fields = text.split()
        period = fields[1] if len(fields) == 2 else _read(path).split()[1]
        quota = fields[0] if fields else ""
        if len(fields) not in (1, 2) or not (quota == "max" or (quota.isdigit() and int(quota) >= 1000)):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        if not period.isdigit() or not 1000 <= int(period) <= 1_000_000:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return f"{quota} {period}"

    def _subtree_control(self, cgroup: Path, text: str) -> None:
        available = set(_read(cgroup / "cgroup.controllers").split())
        enabled = set(_read(cgroup / "cgroup.subtree_control").split())
        for token in text.split():
            sign, controller = token[:1], token[1:]
            if sign not in ("+", "-"):
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            if controller not in available:
                raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
            enabled = enabled | {controller} if sign == "+" else enabled - {controller}
        if cgroup != self.root and _read(cgroup / "cgroup.procs"):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        ordered = " ".join(c for c in _KERNEL_ORDER if c in enabled)
        self.inner.write(cgroup / "cgroup.subtree_control", ordered)
        for child in sorted(p for p in cgroup.iterdir() if p.is_dir()):
            (child / "cgroup.controllers").write_text(ordered)
            wanted = set(CPUSET_FILES if "cpuset" in enabled else ()) | set(CPU_FILES if "cpu" in enabled else ())
            for file in (*CPUSET_FILES, *CPU_FILES):
                if file not in wanted:
                    (child / file).unlink(missing_ok=True)
                elif not (child / file).exists():
                    default = {"cpu.max": "max 100000", "cpu.stat": CPU_STAT, "cpu.weight": "100"}.get(file, "")
                    (child / file).write_text(default)
            if "cpuset" in enabled:
                _recompute_effective(self.root, child)


@dataclass
class RecordingOps:
    """A FileOps that records every write that succeeded as ``(cgroup relative to root, file, text)``."""

    inner: FileOps
    root: Path
    writes: list[tuple[str, str, str]] = field(default_factory=list)

    def read(self, path: Path) -> str:
        return self.inner.read(path)

    def write(self, path: Path, text: str) -> None:
        self.inner.write(path, text)
        self.writes.append((str(path.parent.relative_to(self.root)), path.name, text))


@dataclass
class FaultyOps:
    """A FileOps that fails chosen files with chosen errnos, truncates reads, or runs a hook first.

    Keys are full file paths. ``write_errors`` / ``read_errors`` map a path to the
    errno raised (every time); ``short_reads`` to the number of characters a read
    returns; ``before_write`` to a callable run just before the write (e.g. one
    that removes the cgroup, so the write really meets ENOENT); ``before_read``
    likewise before each read (e.g. one that makes a cgroup appear while the
    agent is in the middle of a pass).
    """

    inner: FileOps
    write_errors: Mapping[Path, int] = field(default_factory=dict)
    read_errors: Mapping[Path, int] = field(default_factory=dict)
    short_reads: Mapping[Path, int] = field(default_factory=dict)
    before_write: Mapping[Path, Callable[[], None]] = field(default_factory=dict)
    before_read: Mapping[Path, Callable[[], None]] = field(default_factory=dict)

    def read(self, path: Path) -> str:
        if path in self.before_read:
            self.before_read[path]()
        if path in self.read_errors:
            code = self.read_errors[path]
            raise OSError(code, os.strerror(code))
        text = self.inner.read(path)
        return text[: self.short_reads[path]] if path in self.short_reads else text

    def write(self, path: Path, text: str) -> None:
        if path in self.before_write:
            self.before_write[path]()
        if path in self.write_errors:
            code = self.write_errors[path]
            raise OSError(code, os.strerror(code))
        self.inner.write(path, text)


def remove_cgroup(path: Path) -> Callable[[], None]:
    """A hook that removes a cgroup directory (as the runtime does when a container exits)."""
    return lambda: shutil.rmtree(path)
