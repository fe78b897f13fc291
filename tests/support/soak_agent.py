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
"""

from __future__ import annotations

import errno
import itertools
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agent.cgroups.fs import FileOps
from agent.config import load_config
from agent.log import configure_logging, json_for_format
from agent.runner import Agent, RunOptions
from agent.state_store import DiskOps
from tests.support.cgroupfs_builder import KernelEmulation

__all__ = ["FlaggedCgroupFaults", "FlaggedDiskFull", "main"]

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
    agent.install_signal_handlers()
    return agent.run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
