"""The values podpin writes to cgroup files and the records of those writes.

:class:`CgroupValues` (what a cgroup should hold), the ``cpu.max`` grammar
(:func:`parse_cpu_max`), the file names, and :class:`WriteRecord` /
:class:`ApplyReport` (what a write did) are shared by the reader
(:mod:`agent.cgroups.fs`) and the ordered writer (:mod:`agent.cgroups.writer`).
They live in their own module so that both can import them while
:meth:`agent.cgroups.fs.CgroupFS.apply` delegates to the writer without an
import cycle. Plain values only: nothing here touches a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.errors import CgroupError, CgroupValueError, MismatchError
from agent.cpuset import CPUSet

__all__ = [
    "CgroupValues",
    "WriteRecord",
    "ApplyReport",
    "parse_cpu_max",
    "format_cpu_max",
    "CPUS",
    "MEMS",
    "CPU_MAX",
    "DEFAULT_CFS_PERIOD_US",
]

CPUS = "cpuset.cpus"
MEMS = "cpuset.mems"
CPU_MAX = "cpu.max"
#: The kernel's default CFS period; used when neither the desired value nor the file has one.
DEFAULT_CFS_PERIOD_US = 100_000
_CPU_MAX_RE = re.compile(r"(max|[0-9]+)(?: ([0-9]+))?")


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


def format_cpu_max(quota: int | None, period: int) -> str:
    """The ``cpu.max`` text: ``<quota> <period>``, or ``max <period>`` without a quota."""
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
