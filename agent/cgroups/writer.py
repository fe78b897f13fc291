"""The ordered, verified cgroup writer: desired values in, an :class:`ApplyReport` out.

:meth:`agent.cgroups.fs.CgroupFS.apply` hands its work to :class:`OrderedWriter`,
which writes a set of desired values in the order the kernel needs (see
``docs/design.md``, "cgroup v2 facts"):

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

It is separate from :mod:`agent.cgroups.fs` because ordering writes is a job of
its own (observe, decide in the pure :func:`_plan_writes`, execute, verify),
while ``fs`` reads files and enables controllers. The writer reaches the files
only through the four callables it is built with, so it imports nothing from
``fs`` and ``fs`` can delegate to it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from agent.cgroups.errors import (
    CgroupError,
    CgroupPathError,
    CgroupReadError,
    CgroupValueError,
    CgroupWriteError,
    EmptyCpusetError,
    MismatchError,
    errno_name,
)
from agent.cgroups.values import CPU_MAX, CPUS, MEMS, ApplyReport, WriteRecord
from agent.cpuset import CPUSet
from agent.vocabulary import CgroupValues, CpuMax

__all__ = ["OrderedWriter"]


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
    limits: Mapping[Path, CpuMax],
) -> tuple[list[_Step], list[tuple[Path, str]]]:
    """Decide the writes (pure): widen top-down, then exact values bottom-up.

    ``sets`` holds every cpuset file of every cgroup in ``plans``, plus the
    ``.effective`` set of an unset cpuset that must cover descendants (an unset
    cpuset counts as its effective set when deciding whether it already covers
    its children); ``limits`` the ``cpu.max`` (period stated) of those that set one.

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
            old = limits[path]
            new = values.cpu_max.with_period(old.period)
            if new == old:
                unchanged.append((path, CPU_MAX))
            else:
                steps.append(_Step(path, CPU_MAX, str(old), str(new), "exact"))
    return steps, unchanged


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderedWriter:
    """Writes desired cgroup values widen-then-narrow, skipping unchanged ones, and verifies them.

    Attributes:
        check: raises :class:`CgroupPathError` when a cgroup is outside the root;
            called once per cgroup, so the readers below need not check again.
        read_cpuset: reads a cpulist file of a cgroup without checking its path
            (empty = unset); raises :class:`CgroupReadError` or :class:`CgroupValueError`.
        read_cpu_max: reads ``cpu.max`` with its period stated, without checking
            the path; raises as ``read_cpuset``.
        write: writes text to a file path in one ``write(2)``; raises ``OSError``.
    """

    check: Callable[[Path], None]
    read_cpuset: Callable[[Path, str], CPUSet]
    read_cpu_max: Callable[[Path], CpuMax]
    write: Callable[[Path, str], None]

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
                self.check(path)
            except CgroupPathError as error:
                failures.append(error)
                continue
            empty = [EmptyCpusetError(path=path, file=file) for file, want in _cpusets(values) if not want]
            failures.extend(empty)
            if not empty:
                plans[path] = values
        parents = {parent for path in plans for parent in path.parents}
        sets: dict[tuple[Path, str], CPUSet] = {}
        limits: dict[Path, CpuMax] = {}
        failed: set[Path] = set()
        for path in _top_down(plans):
            try:
                self._observe(path, plans[path], path in parents, sets, limits)
            except (CgroupReadError, CgroupValueError) as error:
                failures.append(error)
                failed.add(path)
        steps, unchanged = _plan_writes({p: v for p, v in plans.items() if p not in failed}, parents, sets, limits)
        # Nothing more for a cgroup after its first failure (_execute adds to ``failed`` as it goes).
        writes = [self._execute(step, failures, failed) for step in steps if step.path not in failed]
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
        limits: dict[Path, CpuMax],
    ) -> None:
        """Read every file ``values`` touches into ``sets``/``limits`` before anything is written.

        A cgroup that must ``cover`` descendants also gets the effective set of an unset cpuset.
        Nothing is stored when a read fails, so a failed cgroup leaves no partial entry.
        """
        found: dict[tuple[Path, str], CPUSet] = {}
        for file, _ in _cpusets(values):
            found[path, file] = own = self.read_cpuset(path, file)
            if covers and not own:
                found[path, file + ".effective"] = self.read_cpuset(path, file + ".effective")
        if values.cpu_max is not None:
            limits[path] = self.read_cpu_max(path)
        sets.update(found)

    def _execute(self, step: _Step, failures: list[CgroupError], failed: set[Path]) -> WriteRecord:
        """Do one decided write; a failure is recorded (and its cgroup marked failed), not raised."""
        result = "ok"
        try:
            self.write(step.path / step.file, step.new)
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
                actual = self.read_cpuset(path, effective)
            except (CgroupReadError, CgroupValueError) as error:
                failures.append(error)
                continue
            if actual != want:
                mismatch = MismatchError(path=path, file=effective, desired=str(want), actual=str(actual))
                mismatches.append(mismatch)
        return mismatches
