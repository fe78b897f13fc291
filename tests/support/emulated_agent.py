"""``podpin <args>`` with cgroup writes through the kernel emulation, for benchmarks of a subprocess agent.

``python -m tests.support.emulated_agent run --cgroup-root ROOT ...`` is ``podpin run ...``
with one seam filled: :class:`~cgroupfs_builder.KernelEmulation` over ``--cgroup-root`` as
the cgroup file ops, so ``cpuset.cpus.effective`` follows writes as on a real node. Over
plain files every periodic pass would read back a mismatch, log an error and write again,
and ``scripts/bench_agent.py`` would measure that error loop instead of an agent at rest.
It patches :class:`agent.runner.Agent` before the CLI imports it, so it works on any
checkout that has the ``file_ops`` seam (``--checkout`` side-by-side runs).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import agent.runner
from agent.cli import main
from tests.support.cgroupfs_builder import KernelEmulation

SERVICE_ACCOUNT_DIR_VARIABLE = "PODPIN_TEST_SERVICE_ACCOUNT_DIR"
"""When set, the in-cluster configuration is read from this directory instead of the kubelet's mount point."""

__all__ = ["SERVICE_ACCOUNT_DIR_VARIABLE", "run", "use_service_account_dir"]


def use_service_account_dir(directory: Path) -> None:
    """Make ``load_api`` read the in-cluster service account from ``directory`` in this process.

    ``load_api`` takes the directory as a keyword argument whose default is the kubelet's mount point,
    and the agent calls it without one; this changes the default, which works on any checkout
    (side-by-side benchmarks run older trees with this launcher).
    """
    import agent.kube.client

    defaults = agent.kube.client.load_api.__kwdefaults__
    if defaults is None:
        raise RuntimeError("agent.kube.client.load_api has no keyword defaults")
    defaults["service_account_dir"] = directory


def run(argv: list[str]) -> int:
    """Run the CLI with ``argv``, every Agent writing through the kernel emulation of its cgroup root."""
    real = agent.runner.Agent

    def emulated(options: agent.runner.RunOptions, **kwargs: Any) -> agent.runner.Agent:
        return real(options, file_ops=KernelEmulation(Path(options.cgroup_root or "/sys/fs/cgroup")), **kwargs)

    agent.runner.Agent = emulated  # type: ignore[assignment,misc]
    if SERVICE_ACCOUNT_DIR_VARIABLE in os.environ:
        use_service_account_dir(Path(os.environ[SERVICE_ACCOUNT_DIR_VARIABLE]))
    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
