"""``podpin run``: the node agent.

Exit status: 0 when the agent worked (rejected or malformed pods are reported,
not fatal); 2 for an agent-level failure (bad configuration, cgroup v1,
unreadable topology, no node name, a bad metrics address, and with ``--once``
no pod list within three reconcile periods: the API server unreachable),
printed as one line on stderr; 3 when ``--once`` found the kubelet pinning CPUs itself
(the reason on stderr too). Without ``--once`` an unreachable API server is
retried with backoff while ``/readyz`` says why the agent is not ready.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.topology.load import DEFAULT_SYSFS_ROOT

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``run`` sub-command."""
    parser = subparsers.add_parser(
        "run",
        help="run the node agent",
        description="Watch this node's pods, pin their CPUs in cgroup v2, and report through metrics, logs and Events.",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="agent configuration (YAML)")
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster service account, then KUBECONFIG)"
    )
    parser.add_argument(
        "--pods-dir", type=Path, metavar="DIR", help="read pods from manifests in DIR instead of the API server"
    )
    parser.add_argument(
        "--sysfs-root",
        type=Path,
        default=DEFAULT_SYSFS_ROOT,
        metavar="DIR",
        help="sysfs to read (default: %(default)s)",
    )
    parser.add_argument(
        "--proc-root",
        type=Path,
        default=Path("/proc"),
        metavar="DIR",
        help="procfs the affinity audit and the interference metrics read (default: %(default)s)",
    )
    parser.add_argument(
        "--cgroup-root", type=Path, metavar="DIR", help="cgroup v2 root (default: cgroupRoot, /sys/fs/cgroup)"
    )
    parser.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="checkpoint directory (default: stateDir, /var/lib/podpin)"
    )
    parser.add_argument(
        "--metrics-bind-address", metavar="HOST:PORT", help="metrics and health endpoints (default: 0.0.0.0:9363)"
    )
    parser.add_argument(
        "--state-bind-address", metavar="HOST:PORT", help="serve /state here (default: stateBindAddress, not served)"
    )
    parser.add_argument(
        "--runtime-root",
        type=Path,
        metavar="DIR",
        help="where the container runtimes' state is, to name new containers from their bundles "
        "(default: runtimeRoot, /)",
    )
    parser.add_argument("--dry-run", action="store_true", help="decide, log and report, but write no cgroup file")
    parser.add_argument("--once", action="store_true", help="one full pass after the first pod list, then exit")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Start the agent; returns the exit status."""
    # Imported here: the agent pulls in the Kubernetes client, which every other
    # sub-command (and `podpin --help`) would otherwise pay for at start-up.
    from agent.config_flags import options_from
    from agent.footprint import tune_malloc
    from agent.log import configure_logging, json_for_format
    from agent.runner import Agent, AgentError, RunOptions, configure

    options = options_from(args, RunOptions)
    try:
        configured = configure(options)  # the configuration file, read once: logging and the agent use it
    except AgentError as err:
        print(f"podpin run: {err}", file=sys.stderr)
        return 2
    config = configured.config
    try:
        configure_logging(
            json=json_for_format(config.log_format), level=config.log_level, cache_logger_on_first_use=True
        )
    except ValueError as err:
        print(f"podpin run: configuration: {err}", file=sys.stderr)
        return 2
    tune_malloc()  # before any thread starts (agent/footprint.py)
    try:
        agent = Agent(options, configured=configured)
        agent.prepare()  # topology, cgroup layout, checkpoint, pod source, addresses
    except AgentError as err:
        print(f"podpin run: {err}", file=sys.stderr)
        return 2
    agent.install_signal_handlers()
    try:
        status = agent.run()
    except AgentError as err:
        print(f"podpin run: {err}", file=sys.stderr)
        return 2
    if status != 0 and agent.failure:
        print(f"podpin run: {agent.failure}", file=sys.stderr)
    return status
