"""Fixture procfs trees: a ``stat`` file with chosen per-CPU times, for ``--proc-root``.

Times are given in seconds and written in clock ticks (``SC_CLK_TCK``), the
unit the kernel uses in ``/proc/stat`` and psutil divides by; choose multiples
of 1/100 s so they survive the round trip exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["TICKS", "write_proc_stat"]

#: Clock ticks per second, as psutil reads them.
TICKS = os.sysconf("SC_CLK_TCK")


def write_proc_stat(root: Path, times: Mapping[int, tuple[float, float, float]]) -> Path:
    """Write ``root/stat`` with one ``cpuN`` line per CPU: ``(irq, softirq, steal)`` seconds, other fields fixed.

    The CPUs appear in ascending id order, as the kernel lists the online ones.
    """
    root.mkdir(parents=True, exist_ok=True)

    def ticks(seconds: float) -> int:
        return round(seconds * TICKS)

    lines = ["cpu  100 0 100 10000 0 0 0 0 0 0"]
    for cpu, (irq, softirq, steal) in sorted(times.items()):
        lines.append(f"cpu{cpu} 10 0 10 1000 0 {ticks(irq)} {ticks(softirq)} {ticks(steal)} 0 0")
    lines += ["intr 0", "ctxt 0", "btime 1700000000", "processes 1", "procs_running 1", "procs_blocked 0"]
    path = root / "stat"
    path.write_text("\n".join(lines) + "\n")
    return path
