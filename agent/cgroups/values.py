"""The cgroup file names podpin writes and the records of those writes.

The file names and :class:`WriteRecord` / :class:`ApplyReport` (what a write
did) are shared by the reader (:mod:`agent.cgroups.fs`) and the ordered writer
(:mod:`agent.cgroups.writer`). They live in their own module so that both can
import them while :meth:`agent.cgroups.fs.CgroupFS.apply` delegates to the
writer without an import cycle. What a cgroup should hold, and the ``cpu.max``
grammar, are the vocabulary's (:class:`agent.vocabulary.CgroupValues`,
:class:`agent.vocabulary.CpuMax`). Plain values only: nothing here touches a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.errors import CgroupError, MismatchError

__all__ = ["CPUS", "CPU_MAX", "MEMS", "ApplyReport", "WriteRecord"]

CPUS = "cpuset.cpus"
MEMS = "cpuset.mems"
CPU_MAX = "cpu.max"


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
    """Everything :meth:`agent.cgroups.fs.CgroupFS.apply` did, in order, for logging and metrics.

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
