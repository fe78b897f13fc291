"""The agent process of ``scripts/soak.py``: ``podpin run`` over a fixture node, with faults switched by flag files.

``python -m tests.support.soak_agent BASE`` (from the checkout) runs the real
:class:`~agent.runner.Agent` in long-running mode, as ``podpin run`` does
(JSON log lines on stderr, SIGTERM stops it), over the node ``make_node`` built
in ``BASE`` and the API server emulator named by ``BASE/kubeconfig``. Two seams
the CLI does not have are filled in, so the soak can switch faults on and off
from outside while the process runs (and survives a SIGKILL between them):

* cgroup writes go through :class:`~cgroupfs_builder.KernelEmulation` (so
  ``cpuset.cpus.effective`` follows writes), and while ``BASE/faults/cgroup``
  exists every other ``cpuset.cpus``/``cpu.max`` write fails with ``EIO``;
* while ``BASE/faults/disk`` exists every checkpoint write fails with ``ENOSPC``.

When Python traces allocations (``PYTHONTRACEMALLOC``, set by ``soak.py
--tracemalloc``), each SIGUSR1 writes a :mod:`tracemalloc` snapshot to
``BASE/tracemalloc-<n>.snapshot`` (n = 0, 1, ...), so the soak can tell which
lines of code hold the memory the process grew by (:func:`growth_report`
compares two of them; it lives here beside the snapshots it reads).
"""

from __future__ import annotations

import errno
import itertools
import os
import signal
import sys
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

from agent.cgroups.fs import FileOps
from agent.config import load_config
from agent.log import configure_logging, json_for_format
from agent.runner import Agent, RunOptions
from agent.state_store import DiskOps
from tests.support.cgroupfs_builder import KernelEmulation

__all__ = ["FlaggedCgroupFaults", "FlaggedDiskFull", "growth_report", "main", "snapshot_on_sigusr1"]

_FAULTED_FILES = ("cpuset.cpus", "cpu.max")


@dataclass
class FlaggedCgroupFaults:
    """Every other write of a cpuset or quota fails with EIO while the flag file exists."""

    inner: FileOps
    flag: Path
    _count: itertools.count[int] = field(default_factory=itertools.count)

    def read(self, path: Path) -> str:
        return self.inner.read(path)

    def write(self, path: Path, text: str) -> None:
        if path.name in _FAULTED_FILES and self.flag.exists() and next(self._count) % 2 == 0:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.inner.write(path, text)


class FlaggedDiskFull(DiskOps):
    """Checkpoint writes fail with ENOSPC while the flag file exists."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def write(self, fd: int, data: bytes) -> int:
        if self.flag.exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(fd, data)


def snapshot_on_sigusr1(base: Path) -> None:
    """While tracemalloc traces, SIGUSR1 writes the next ``BASE/tracemalloc-<n>.snapshot`` (whole, then renamed)."""
    if not tracemalloc.is_tracing():
        return
    serial = itertools.count()

    def dump(_signum: int, _frame: object) -> None:
        target = base / f"tracemalloc-{next(serial)}.snapshot"
        partial = target.with_suffix(".partial")
        tracemalloc.take_snapshot().dump(str(partial))
        os.replace(partial, target)

    signal.signal(signal.SIGUSR1, dump)


def growth_report(first: Path, last: Path, out: Path, top: int = 25) -> dict[str, float]:
    """Write the ``top`` tracebacks whose traced memory grew most from ``first`` to ``last`` into ``out``.

    Returns the traced totals of both snapshots (MiB), for the summary line.
    """
    before, after = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(last))
    ignore = [
        tracemalloc.Filter(inclusive=False, filename_pattern=tracemalloc.__file__),
        tracemalloc.Filter(inclusive=False, filename_pattern="<frozen importlib._bootstrap>"),
    ]
    before, after = before.filter_traces(ignore), after.filter_traces(ignore)
    lines = []
    for diff in after.compare_to(before, "traceback")[:top]:
        grew = f"{diff.size_diff / 1024:+.1f} KiB in {diff.count_diff:+d} blocks"
        lines.append(f"{grew} (now {diff.size / 1024:.1f} KiB)")
        lines.extend(f"    {line}" for line in diff.traceback.format(most_recent_first=True))
    out.write_text("\n".join(lines) + "\n")

    def total(snapshot: tracemalloc.Snapshot) -> float:
        return round(sum(stat.size for stat in snapshot.statistics("filename")) / 2**20, 2)

    return {"traced_mib_start": total(before), "traced_mib_end": total(after)}


def main(base: Path) -> int:
    """Run the agent over the node in ``base`` until SIGTERM; returns its exit status."""
    options = RunOptions(
        config=base / "podpin.yaml",
        kubeconfig=str(base / "kubeconfig"),
        sysfs_root=base / "sys",
        cgroup_root=base / "cgroup",
        state_dir=base / "state",
        metrics_bind_address="127.0.0.1:0",
        state_bind_address="127.0.0.1:0",
        runtime_root=base / "runtime",
    )
    config = load_config(options.config)
    configure_logging(json=json_for_format(config.log_format), level=config.log_level, cache_logger_on_first_use=True)
    root = base / "cgroup"
    agent = Agent(
        options,
        file_ops=FlaggedCgroupFaults(KernelEmulation(root), base / "faults" / "cgroup"),
        disk_ops=FlaggedDiskFull(base / "faults" / "disk"),
    )
    agent.prepare()
    agent.install_signal_handlers()
    snapshot_on_sigusr1(base)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
