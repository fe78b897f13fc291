"""cgroup v2 reads and ordered, verified writes: the imperative edge of podpin.

Every file operation goes through a :class:`FileOps` (``read``/``write``), so
tests replace it to inject faults or to emulate the kernel. The real one opens
files without ``O_CREAT``: writing a file that does not exist fails with
``ENOENT`` (the cgroup vanished, or its controller is not enabled) instead of
leaving a regular file behind.

:meth:`CgroupFS.apply` writes a set of desired values in the order the kernel
needs (see ``docs/cgroup-v2-notes.md``):

1. top-down, every cgroup that has desired descendants and whose cpuset does not
   already cover its desired set is widened to current ∪ desired, so a child is
   never written outside its parent (the kernel would accept that and silently
   ignore it);
2. bottom-up, every cgroup gets its exact desired value, children narrowed
   before their parents;
3. ``cpuset.cpus.effective`` / ``cpuset.mems.effective`` are read back and must
   equal the desired sets.

A value that is already there is never written again (changing a cgroup's
cpuset resets its tasks' affinity), an empty cpuset is refused (it un-pins),
and a failure on one cgroup stops the writes to that cgroup only.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from agent.cgroups.errors import (
    CgroupError,
    CgroupPathError,
    CgroupReadError,
    CgroupValueError,
    CgroupWriteError,
    EmptyCpusetError,
    MismatchError,
    errno_name,
    os_error,
)
from agent.cgroups.layout import ensure_inside
from agent.cpuset import CPUSet, CPUSetError

__all__ = [
    "FileOps",
    "RealFileOps",
    "CgroupValues",
    "Effective",
    "CpuStat",
    "WriteRecord",
    "ApplyReport",
    "CgroupFS",
    "parse_cpu_max",
    "CPUS",
    "MEMS",
    "CPU_MAX",
    "DEFAULT_CFS_PERIOD_US",
]

CPUS = "cpuset.cpus"
MEMS = "cpuset.mems"
CPU_MAX = "cpu.max"
SUBTREE_CONTROL = "cgroup.subtree_control"
#: The controllers podpin needs in every cgroup it writes, in the order enabled.
CONTROLLERS = ("cpuset", "cpu")
#: The kernel's default CFS period; used when neither the desired value nor the file has one.
DEFAULT_CFS_PERIOD_US = 100_000
_CPU_MAX_RE = re.compile(r"(max|[0-9]+)(?: ([0-9]+))?")


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


def parse_cpu_max(text: str, *, require_period: bool = False) -> tuple[int | None, int | None]:
    """``(quota, period)`` of a ``cpu.max`` value; quota None = ``max``, period None = not given.

    Accepts what the kernel accepts (``"max"``, ``"50000"``, ``"max 100000"``,
    ``"50000 100000"``): a quota of at least 1000 µs and a period of 1000 to
    1000000 µs. Raises :class:`CgroupValueError` quoting ``text`` otherwise.
    """
    match = _CPU_MAX_RE.fullmatch(text.strip())
    if match is None or (require_period and match.group(2) is None):
        raise CgroupValueError(f"invalid cpu.max {text!r}: expected 'max|<quota> [<period>]' (µs)", text=text)
    quota = None if match.group(1) == "max" else int(match.group(1))
    period = None if match.group(2) is None else int(match.group(2))
    if quota is not None and quota < 1000:
        raise CgroupValueError(f"invalid cpu.max {text!r}: quota below 1000 µs", text=text)
    if period is not None and not 1000 <= period <= 1_000_000:
        raise CgroupValueError(f"invalid cpu.max {text!r}: period outside 1000..1000000 µs", text=text)
    return quota, period


def _format_cpu_max(quota: int | None, period: int) -> str:
    return f"{'max' if quota is None else quota} {period}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupValues:
    """Values of one cgroup; ``None`` means "leave this file alone".

    ``cpu_max`` is ``"max"`` or a quota in µs, optionally followed by the period
    (the current period is kept when it is omitted, as the kernel does).
    """

    cpuset_cpus: CPUSet | None = None
    cpuset_mems: CPUSet | None = None
    cpu_max: str | None = None

    def __post_init__(self) -> None:
        if self.cpu_max is not None:
            parse_cpu_max(self.cpu_max)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRecord:
    """One attempted write: ``result`` is ``"ok"`` or the errno name (the metric's label).

    ``phase`` is ``"widen"`` (pass 1), ``"exact"`` (pass 2) or ``"controllers"``.
    """

    path: Path
    file: str
    old: str
    new: str
    result: str
    phase: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyReport:
    """Everything :meth:`CgroupFS.apply` did, in order, for logging and metrics.

    ``unchanged`` lists the (cgroup, file) pairs that already held the desired
    value and were deliberately not rewritten. ``failures`` holds refused values
    and read/write errors (each naming path, file, value and errno);
    ``mismatches`` the read-back differences.
    """

    writes: tuple[WriteRecord, ...] = ()
    unchanged: tuple[tuple[Path, str], ...] = ()
    failures: tuple[CgroupError, ...] = ()
    mismatches: tuple[MismatchError, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every desired value was written (or present) and verified."""
        return not self.failures and not self.mismatches


class _Step(NamedTuple):
    """A write the writer has decided on, not yet done."""

    path: Path
    file: str
    old: str
    new: str
    phase: str


def _cpusets(values: CgroupValues) -> list[tuple[str, CPUSet]]:
    """The cpuset files ``values`` sets, cpus before mems."""
    pairs = ((CPUS, values.cpuset_cpus), (MEMS, values.cpuset_mems))
    return [(file, want) for file, want in pairs if want is not None]


def _top_down(paths: Iterable[Path]) -> list[Path]:
    """Parents before children (by depth, then name, so the order is deterministic)."""
    return sorted(paths, key=lambda p: (len(p.parts), str(p)))


def _plan_writes(
    plans: Mapping[Path, CgroupValues],
    parents: set[Path],
    sets: Mapping[tuple[Path, str], CPUSet],
    limits: Mapping[Path, str],
) -> tuple[list[_Step], list[tuple[Path, str]]]:
    """Decide the writes (pure): widen top-down, then exact values bottom-up.

    ``sets`` holds every cpuset file of every cgroup in ``plans``, plus the
    ``.effective`` set of an unset cpuset that must cover descendants (an unset
    cpuset counts as its effective set when deciding whether it already covers
    its children); ``limits`` the normalised ``cpu.max`` of those that set one.

    Returns:
        the writes in order, and the (cgroup, file) pairs left alone because they
        already hold the desired value.
    """
    now = dict(sets)
    steps: list[_Step] = []
    unchanged: list[tuple[Path, str]] = []
    for path in _top_down(plans):
        for file, want in _cpusets(plans[path]) if path in parents else ():
            own = now[path, file]
            base = own or now[path, file + ".effective"]
            if not want.is_subset_of(base):
                steps.append(_Step(path, file, str(own), str(base | want), "widen"))
                now[path, file] = base | want
    for path in sorted(plans, key=lambda p: (-len(p.parts), str(p))):
        values = plans[path]
        for file, want in _cpusets(values):
            if now[path, file] == want:
                unchanged.append((path, file))
            else:
                steps.append(_Step(path, file, str(now[path, file]), str(want), "exact"))
        if values.cpu_max is not None:
            quota, period = parse_cpu_max(values.cpu_max)
            old = limits[path]
            new = _format_cpu_max(quota, period if period is not None else int(old.split()[1]))
            if new == old:
                unchanged.append((path, CPU_MAX))
            else:
                steps.append(_Step(path, CPU_MAX, old, new, "exact"))
    return steps, unchanged


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

    def read_cpu_max(self, cgroup: Path) -> str:
        """``cpu.max`` normalised to ``"<quota|max> <period>"``."""
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

    def _cpu_max(self, cgroup: Path) -> str:
        text = self._text(cgroup, CPU_MAX)
        try:
            quota, period = parse_cpu_max(text, require_period=True)
        except CgroupValueError as error:
            raise self._bad(cgroup, CPU_MAX, text, error) from error
        return _format_cpu_max(quota, period if period is not None else DEFAULT_CFS_PERIOD_US)

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
            if not value.strip().isdigit():
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
    def enable_controllers(self, cgroup: Path) -> tuple[WriteRecord, ...]:
        """Make ``cgroup`` have ``cpuset.*`` and ``cpu.*`` files.

        Walks from the root down to ``cgroup``'s parent and adds ``+cpuset +cpu``
        (only the missing ones) to each ``cgroup.subtree_control``. ``cgroup``'s own
        ``subtree_control`` is left alone: a leaf with processes cannot enable
        controllers (EBUSY, "no internal processes").

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
        level = self.root
        for part in parts:
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
            level = level / part
        return tuple(records)

    # -- the ordered writer ------------------------------------------------------------
    def apply(self, desired: Mapping[Path, CgroupValues]) -> ApplyReport:
        """Write ``desired`` widen-then-narrow, skip unchanged values, verify the effective sets.

        Never raises for a cgroup: refused values, I/O errors (ENOENT when the
        cgroup vanished, EBUSY, EINVAL...) and read-back mismatches are collected
        in the report, and the other cgroups are still written. After a failed
        read or write nothing more is written to that cgroup: an exclusive
        container whose cpuset failed must not lose its CFS quota either.
        """
        failures: list[CgroupError] = []
        plans: dict[Path, CgroupValues] = {}
        for path, values in desired.items():
            try:
                self._check(path)
            except CgroupPathError as error:
                failures.append(error)
                continue
            empty = [EmptyCpusetError(path=path, file=file) for file, want in _cpusets(values) if not want]
            failures.extend(empty)
            if not empty:
                plans[path] = values
        parents = {parent for path in plans for parent in path.parents}
        sets: dict[tuple[Path, str], CPUSet] = {}
        limits: dict[Path, str] = {}
        failed: set[Path] = set()
        for path in _top_down(plans):
            try:
                self._observe(path, plans[path], path in parents, sets, limits)
            except (CgroupReadError, CgroupValueError) as error:
                failures.append(error)
                failed.add(path)
        steps, unchanged = _plan_writes({p: v for p, v in plans.items() if p not in failed}, parents, sets, limits)
        writes: list[WriteRecord] = []
        for step in steps:
            if step.path not in failed:  # nothing more for a cgroup after its first failure
                writes.append(self._execute(step, failures, failed))
        mismatches = [
            mismatch
            for path in _top_down(plans)
            if path not in failed
            for mismatch in self._verify(path, plans[path], failures)
        ]
        return ApplyReport(
            writes=tuple(writes),
            unchanged=tuple(unchanged),
            failures=tuple(failures),
            mismatches=tuple(mismatches),
        )

    def _observe(
        self,
        path: Path,
        values: CgroupValues,
        covers: bool,
        sets: dict[tuple[Path, str], CPUSet],
        limits: dict[Path, str],
    ) -> None:
        """Read every file ``values`` touches into ``sets``/``limits`` before anything is written.

        A cgroup that must ``cover`` descendants also gets the effective set of an unset cpuset.
        Nothing is stored when a read fails, so a failed cgroup leaves no partial entry.
        """
        found: dict[tuple[Path, str], CPUSet] = {}
        for file, _ in _cpusets(values):
            found[path, file] = own = self._cpuset(path, file)
            if covers and not own:
                found[path, file + ".effective"] = self._cpuset(path, file + ".effective")
        if values.cpu_max is not None:
            limits[path] = self._cpu_max(path)
        sets.update(found)

    def _execute(self, step: _Step, failures: list[CgroupError], failed: set[Path]) -> WriteRecord:
        """Do one decided write; a failure is recorded (and its cgroup marked failed), not raised."""
        result = "ok"
        try:
            self.ops.write(step.path / step.file, step.new)
        except OSError as error:
            result = errno_name(error.errno)
            failures.append(CgroupWriteError.from_os_error(error, path=step.path, file=step.file, value=step.new))
            failed.add(step.path)
        return WriteRecord(path=step.path, file=step.file, old=step.old, new=step.new, result=result, phase=step.phase)

    def _verify(self, path: Path, values: CgroupValues, failures: list[CgroupError]) -> list[MismatchError]:
        """Read back the ``.effective`` sets of ``path``; each difference is a :class:`MismatchError`."""
        mismatches: list[MismatchError] = []
        for file, want in _cpusets(values):
            effective = file + ".effective"
            try:
                actual = self._cpuset(path, effective)
            except (CgroupReadError, CgroupValueError) as error:
                failures.append(error)
                continue
            if actual != want:
                mismatch = MismatchError(path=path, file=effective, desired=str(want), actual=str(actual))
                mismatches.append(mismatch)
        return mismatches
