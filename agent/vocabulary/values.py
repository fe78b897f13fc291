"""What one cgroup should hold: :class:`CgroupValues`, with ``cpu.max`` as a typed :class:`CpuMax`.

One definition for every layer: the planner's plan, the cgroup writer, ``podpin
reset`` and the NRI adjustments all speak it. ``cpu.max`` is parsed and
rendered here only (the kernel's grammar: ``max|<quota> [<period>]`` in µs, a
quota of at least 1000 µs, a period of 1000 to 1000000 µs). A new knob (say
``cpu.idle``) is one more field here, one rule in the writer and one decision
in the planner (``docs/design.md``, "Adding a cgroup knob").

Pure values: nothing here touches a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.cpuset import CPUSet

__all__ = ["DEFAULT_CFS_PERIOD_US", "CgroupValues", "CpuMax", "CpuMaxError"]

#: The kernel's default CFS period; used when neither the desired value nor the file has one.
DEFAULT_CFS_PERIOD_US = 100_000
_CPU_MAX_RE = re.compile(r"(max|[0-9]{1,19})(?: ([0-9]{1,19}))?")  # the kernel's values are 64-bit


class CpuMaxError(ValueError):
    """A ``cpu.max`` value the kernel would refuse; the message quotes it, ``text`` holds it."""

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.message = message
        self.text = text


def _check_range(quota: int | None, period: int | None, text: str) -> None:
    """Raise :class:`CpuMaxError` quoting ``text`` when the kernel would refuse this quota or period."""
    if quota is not None and quota < 1000:
        raise CpuMaxError(f"invalid cpu.max {text!r}: quota below 1000 µs", text=text)
    if period is not None and not 1000 <= period <= 1_000_000:
        raise CpuMaxError(f"invalid cpu.max {text!r}: period outside 1000..1000000 µs", text=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuMax:
    """A ``cpu.max`` value: the CFS quota and period in µs.

    Attributes:
        quota: µs of CPU time per period; None is ``max`` (no limit).
        period: the period; None leaves the cgroup's current period (as the kernel does for ``"<quota>"``).

    Raises:
        CpuMaxError: a quota below 1000 µs or a period outside 1000..1000000 µs.
    """

    quota: int | None
    period: int | None = None

    def __post_init__(self) -> None:
        _check_range(self.quota, self.period, str(self))

    @classmethod
    def parse(cls, text: str, *, require_period: bool = False) -> CpuMax:
        """The value of a ``cpu.max`` text (``"max"``, ``"50000"``, ``"max 100000"``, ``"50000 100000"``).

        Raises:
            CpuMaxError: not ``max|<quota> [<period>]`` (or no period with ``require_period``), or out of range.
        """
        match = _CPU_MAX_RE.fullmatch(text.strip())
        if match is None or (require_period and match.group(2) is None):
            raise CpuMaxError(f"invalid cpu.max {text!r}: expected 'max|<quota> [<period>]' (µs)", text=text)
        quota = None if match.group(1) == "max" else int(match.group(1))
        period = None if match.group(2) is None else int(match.group(2))
        _check_range(quota, period, text)
        return cls(quota=quota, period=period)

    def with_period(self, period: int | None) -> CpuMax:
        """This value with ``period`` where it states none (the cgroup's current one); itself when it states one."""
        return self if self.period is not None else CpuMax(quota=self.quota, period=period)

    def __str__(self) -> str:
        """The file's text: ``<quota|max>`` and, when stated, `` <period>``."""
        quota = "max" if self.quota is None else str(self.quota)
        return quota if self.period is None else f"{quota} {self.period}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupValues:
    """What to write into one cgroup; ``None`` means "leave this file alone"."""

    cpuset_cpus: CPUSet | None = None
    cpuset_mems: CPUSet | None = None
    cpu_max: CpuMax | None = None

    def is_empty(self) -> bool:
        """True when the cgroup is left as it is."""
        return self.cpuset_cpus is None and self.cpuset_mems is None and self.cpu_max is None
