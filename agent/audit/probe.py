"""What only the node can tell, read through psutil: per-CPU interrupt and steal time, and a thread's CPU affinity.

This is the edge of the audits (``agent/audit/affinity.py``,
``agent/audit/interference.py``): they ask a :class:`NodeProbe`, and
:class:`PsutilProbe` answers from the node's procfs with psutil, the way
``node_exporter``'s cpu collector and ``taskset -p`` would.

* ``cpu_times()``: ``psutil.cpu_times(percpu=True)`` reads ``<proc>/stat``, whose
  ``cpuN`` lines list the **online** CPUs in ascending order; psutil returns them
  as a list without their ids, so the i-th entry is the i-th online CPU (the
  caller passes the online set it knows from sysfs). When the two disagree in
  length (a CPU went on- or offline in between), no times are returned rather
  than times under the wrong CPU.
* ``affinity(tid)``: ``psutil.Process(tid).cpu_affinity()`` is
  ``sched_getaffinity(2)`` of that thread; a thread that exited (or that this
  PID namespace cannot see) gives None.

psutil reads the procfs it is told by its module-level ``PROCFS_PATH``; the
probe sets it to its ``proc_root`` only for the duration of each call, under a
lock, so tests can point it at a fixture tree (``--proc-root``) and nothing else
in the process is affected.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from agent.cpuset import CPUSet

__all__ = ["CPUTimes", "NodeProbe", "PsutilProbe"]

_PROCFS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUTimes:
    """Seconds one CPU spent, since boot, in hard interrupts, soft interrupts and stolen by the hypervisor."""

    irq: float
    softirq: float
    steal: float


class NodeProbe(Protocol):
    """What the audits read from the node."""

    def cpu_times(self, online: CPUSet) -> Mapping[int, CPUTimes]:
        """Interrupt and steal seconds per online CPU id (empty when they cannot be matched to ``online``)."""
        ...

    def affinity(self, tid: int) -> CPUSet | None:
        """The CPUs thread ``tid`` may run on; None when it is gone or not visible."""
        ...


class PsutilProbe:
    """:class:`NodeProbe` over psutil and the procfs at ``proc_root`` (``/proc`` on a node)."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.proc_root = proc_root

    @contextlib.contextmanager
    def _procfs(self) -> Iterator[None]:
        with _PROCFS_LOCK:
            previous = psutil.PROCFS_PATH
            psutil.PROCFS_PATH = str(self.proc_root)
            try:
                yield
            finally:
                psutil.PROCFS_PATH = previous

    def cpu_times(self, online: CPUSet) -> Mapping[int, CPUTimes]:
        """``psutil.cpu_times(percpu=True)`` matched to the online CPU ids (module docstring)."""
        with self._procfs():
            times = psutil.cpu_times(percpu=True)
        ids = sorted(online)
        if len(ids) != len(times):
            return {}
        return {
            cpu: CPUTimes(irq=entry.irq, softirq=entry.softirq, steal=entry.steal)
            for cpu, entry in zip(ids, times, strict=True)
        }

    def affinity(self, tid: int) -> CPUSet | None:
        """``psutil.Process(tid).cpu_affinity()``; None for a thread that is gone or cannot be read."""
        with self._procfs():
            try:
                return CPUSet(psutil.Process(tid).cpu_affinity())
            except (psutil.Error, OSError):
                return None
