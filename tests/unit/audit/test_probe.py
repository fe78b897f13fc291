"""PsutilProbe: per-CPU interrupt and steal seconds from a procfs ``stat``, thread affinities by thread id."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import psutil

from agent.audit import CPUTimes, PsutilProbe
from agent.cpuset import CPUSet
from tests.support.procfs_builder import write_proc_stat


def test_cpu_times_are_matched_to_the_online_ids(tmp_path: Path) -> None:
    """The i-th cpuN line belongs to the i-th online CPU: with CPUs 0, 2 and 3 online, the lines map to them."""
    write_proc_stat(tmp_path, {0: (1.0, 2.0, 0.5), 2: (3.0, 4.0, 0.0), 3: (0.25, 0.75, 1.5)})
    actual = PsutilProbe(tmp_path).cpu_times(CPUSet([0, 2, 3]))
    expected = {
        0: CPUTimes(irq=1.0, softirq=2.0, steal=0.5),
        2: CPUTimes(irq=3.0, softirq=4.0, steal=0.0),
        3: CPUTimes(irq=0.25, softirq=0.75, steal=1.5),
    }
    assert expected == actual


def test_cpu_times_refuse_a_count_that_does_not_match(tmp_path: Path) -> None:
    """Three cpuN lines but four online CPUs (one came online in between): no times rather than misplaced ones."""
    write_proc_stat(tmp_path, {0: (1.0, 1.0, 1.0), 1: (1.0, 1.0, 1.0), 2: (1.0, 1.0, 1.0)})
    assert {} == PsutilProbe(tmp_path).cpu_times(CPUSet(range(4)))


def test_procfs_path_is_restored(tmp_path: Path) -> None:
    """The probe points psutil at its procfs only during the call: psutil.PROCFS_PATH is unchanged afterwards."""
    before = psutil.PROCFS_PATH
    write_proc_stat(tmp_path, {0: (0.0, 0.0, 0.0)})
    PsutilProbe(tmp_path).cpu_times(CPUSet([0]))
    assert before == psutil.PROCFS_PATH


def test_affinity_of_this_thread() -> None:
    """The affinity of the test's own thread is what sched_getaffinity(2) says for it."""
    expected = CPUSet(os.sched_getaffinity(0))
    assert expected == PsutilProbe().affinity(threading.get_native_id())


def test_affinity_of_a_task_that_exited_is_none() -> None:
    """A task that has exited and was reaped has no affinity to report: None, not an error."""
    finished = subprocess.Popen(["true"])
    finished.wait()
    assert PsutilProbe().affinity(finished.pid) is None
