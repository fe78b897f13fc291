"""cgroup v2 file reads, controller enabling, and the entry point of the ordered writer.

Every file operation goes through a :class:`FileOps` (``read``/``write``), so
tests replace it to inject faults or to emulate the kernel. The real one opens
files without ``O_CREAT``: writing a file that does not exist fails with
``ENOENT`` (the cgroup vanished, or its controller is not enabled) instead of
leaving a regular file behind.

:meth:`CgroupFS.apply` writes a set of desired values widen-then-narrow with a
read-back check; the ordering lives in :mod:`agent.cgroups.writer`, the file
names and write records it shares with the readers in :mod:`agent.cgroups.values`
(re-exported here), the values themselves in :mod:`agent.vocabulary`
(:class:`~agent.vocabulary.CgroupValues`, :class:`~agent.vocabulary.CpuMax`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.cgroups.errors import (
    CgroupPathError,
    CgroupReadError,
    CgroupValueError,
    CgroupWriteError,
    os_error,
)
from agent.cgroups.layout import ensure_inside
from agent.cgroups.values import CPU_MAX, CPUS, MEMS, ApplyReport, WriteRecord
from agent.cgroups.writer import OrderedWriter
from agent.cpuset import CPUSet, CPUSetError
from agent.vocabulary import DEFAULT_CFS_PERIOD_US, CgroupValues, CpuMax, CpuMaxError

__all__ = [
    "FileOps",
    "RealFileOps",
    "Effective",
    "CpuStat",
    "WriteRecord",
    "ApplyReport",
    "CgroupFS",
    "CPUS",
    "MEMS",
    "CPU_MAX",
]

SUBTREE_CONTROL = "cgroup.subtree_control"
#: The controllers podpin needs in every cgroup it writes, in the order enabled.
CONTROLLERS = ("cpuset", "cpu")


class FileOps(Protocol):
    """The two file operations the cgroup layer needs; tests substitute faulty or emulating ones."""

    def read(self, path: Path) -> str:
        """The whole content of ``path``; raises ``OSError``."""
        ...

    def write(self, path: Path, text: str) -> None:
        """Write ``text`` to the existing file ``path`` in one ``write(2)``; raises ``OSError``."""
        ...


class RealFileOps:
    """Plain file I/O for cgroupfs: no ``O_CREAT``, no symlinks followed, one write per value."""

    def read(self, path: Path) -> str:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            chunks: list[bytes] = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8", "replace")

    def write(self, path: Path, text: str) -> None:
        data = text.encode()
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        if written != len(data):
            raise os_error(errno.EIO, f"short write: {written} of {len(data)} bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class Effective:
    """What the kernel actually applies: ``cpuset.cpus.effective`` and ``cpuset.mems.effective``."""

    cpus: CPUSet
    mems: CPUSet


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuStat:
    """The ``cpu.stat`` counters podpin reports (usage per pool, throttling)."""

    usage_usec: int
    nr_periods: int
    nr_throttled: int
    throttled_usec: int


class CgroupFS:
    """Reads and writes cgroup files below one cgroup v2 root, through a :class:`FileOps`.

    Every path is checked to stay inside ``root`` (symlinks resolved) before it is touched.
    """

    def __init__(self, root: Path, ops: FileOps | None = None) -> None:
        self.root = root
        self.ops: FileOps = ops if ops is not None else RealFileOps()
        self._real_root = os.path.realpath(root)

    def _check(self, cgroup: Path) -> None:
        ensure_inside(self.root, cgroup, resolved_root=self._real_root)

    # -- reading -----------------------------------------------------------------------
    def read_text(self, cgroup: Path, file: str) -> str:
        """The stripped content of ``cgroup/file``; raises :class:`CgroupReadError`."""
        self._check(cgroup)
        return self._text(cgroup, file)

    def read_cpuset(self, cgroup: Path, file: str) -> CPUSet:
        """A cpulist file (``cpuset.cpus``, ``cpuset.mems.effective``...); empty = unset."""
        self._check(cgroup)
        return self._cpuset(cgroup, file)

    def read_cpu_max(self, cgroup: Path) -> CpuMax:
        """``cpu.max``, its period always stated."""
        self._check(cgroup)
        return self._cpu_max(cgroup)

    # The unchecked readers below serve apply(), which checks each cgroup once.
    def _text(self, cgroup: Path, file: str) -> str:
        try:
            return self.ops.read(cgroup / file).strip()
        except OSError as error:
            raise CgroupReadError.from_os_error(error, path=cgroup, file=file) from error

    def _bad(self, cgroup: Path, file: str, text: str, problem: object) -> CgroupValueError:
        return CgroupValueError(f"{cgroup}/{file}: {problem}", path=cgroup, file=file, text=text)

    def _cpuset(self, cgroup: Path, file: str) -> CPUSet:
        text = self._text(cgroup, file)
        try:
            return CPUSet.parse(text)
        except CPUSetError as error:
            raise self._bad(cgroup, file, text, error) from error

    def _cpu_max(self, cgroup: Path) -> CpuMax:
        text = self._text(cgroup, CPU_MAX)
        try:
            value = CpuMax.parse(text, require_period=True)
        except CpuMaxError as error:
            raise self._bad(cgroup, CPU_MAX, text, error) from error
        return value.with_period(DEFAULT_CFS_PERIOD_US)

    def read_values(self, cgroup: Path) -> CgroupValues:
        """The configured (not effective) ``cpuset.cpus``, ``cpuset.mems`` and ``cpu.max``."""
        return CgroupValues(
            cpuset_cpus=self.read_cpuset(cgroup, CPUS),
            cpuset_mems=self.read_cpuset(cgroup, MEMS),
            cpu_max=self.read_cpu_max(cgroup),
        )

    def read_effective(self, cgroup: Path) -> Effective:
        """The CPUs and memory nodes the kernel really grants the cgroup."""
        cpus = self.read_cpuset(cgroup, CPUS + ".effective")
        return Effective(cpus=cpus, mems=self.read_cpuset(cgroup, MEMS + ".effective"))

    def read_cpu_stat(self, cgroup: Path) -> CpuStat:
        """``usage_usec``, ``nr_periods``, ``nr_throttled``, ``throttled_usec`` from ``cpu.stat``.

        The throttling keys exist only where the cpu controller is enabled (the
        root has just the usage keys); missing ones read as 0.
        """
        text = self.read_text(cgroup, "cpu.stat")
        values: dict[str, int] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            value = value.strip()
            if not (value.isascii() and value.isdigit() and len(value) <= 20):  # a u64, in ASCII digits
                raise self._bad(cgroup, "cpu.stat", text, f"bad line {line!r}")
            values[key] = int(value)
        if "usage_usec" not in values:
            raise self._bad(cgroup, "cpu.stat", text, f"no usage_usec in {text!r}")
        return CpuStat(
            usage_usec=values["usage_usec"],
            nr_periods=values.get("nr_periods", 0),
            nr_throttled=values.get("nr_throttled", 0),
            throttled_usec=values.get("throttled_usec", 0),
        )

    def read_subtree_control(self, cgroup: Path) -> frozenset[str]:
        """The controllers enabled for ``cgroup``'s children."""
        return frozenset(self.read_text(cgroup, SUBTREE_CONTROL).split())

    # -- controllers -------------------------------------------------------------------
    def enable_controllers(self, cgroup: Path, enabled: Set[Path] = frozenset()) -> tuple[WriteRecord, ...]:
        """Make ``cgroup`` have ``cpuset.*`` and ``cpu.*`` files.

        Walks from the root down to ``cgroup``'s parent and adds ``+cpuset +cpu``
        (only the missing ones) to each ``cgroup.subtree_control``. ``cgroup``'s own
        ``subtree_control`` is left alone: a leaf with processes cannot enable
        controllers (EBUSY, "no internal processes").

        ``enabled``: cgroups known to enable both for their children already (a walk down to one of them
        succeeded): the walk starts below the deepest of them, so a new container in a known pod costs one read
        of the pod's ``subtree_control``, not one per level from the root.

        Returns:
            the writes made, top-down.

        Raises:
            CgroupReadError, CgroupWriteError: naming the cgroup that failed.
            CgroupPathError: ``cgroup`` is not inside the root.
        """
        self._check(cgroup)
        try:
            parts = cgroup.relative_to(self.root).parts
        except ValueError:
            raise CgroupPathError(f"cgroup path {cgroup} is not below the cgroup root {self.root}") from None
        records: list[WriteRecord] = []
        levels = [self.root]
        for part in parts[:-1]:
            levels.append(levels[-1] / part)
        known = max((i for i, level in enumerate(levels) if level in enabled), default=-1)
        for level in levels[known + 1 :]:
            have = self.read_subtree_control(level)
            missing = [name for name in CONTROLLERS if name not in have]
            if missing:
                text = " ".join(f"+{name}" for name in missing)
                try:
                    self.ops.write(level / SUBTREE_CONTROL, text)
                except OSError as error:
                    failure = CgroupWriteError.from_os_error(error, path=level, file=SUBTREE_CONTROL, value=text)
                    raise failure from error
                old = " ".join(sorted(have))
                records.append(
                    WriteRecord(path=level, file=SUBTREE_CONTROL, old=old, new=text, result="ok", phase="controllers")
                )
        return tuple(records)

    # -- the ordered writer ------------------------------------------------------------
    def apply(self, desired: Mapping[Path, CgroupValues]) -> ApplyReport:
        """Write ``desired`` in a safe order and verify it (:meth:`agent.cgroups.writer.OrderedWriter.apply`)."""
        writer = OrderedWriter(
            check=self._check, read_cpuset=self._cpuset, read_cpu_max=self._cpu_max, write=self.ops.write
        )
        return writer.apply(desired)
