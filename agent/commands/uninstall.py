"""``podpin uninstall``: delete the agents, wait until every node they served is reset (``agent/uninstaller.py``).

The chart's pre-delete hook runs it; it needs a reset DaemonSet running ``podpin reset --wait-for-agent --hold``
(the same hook makes it). Exit status: 0 every node restored; 1 some node not within ``--timeout`` (each named);
2 it could not start (no API server, no reset DaemonSet, the agents' DaemonSet could not be deleted).
"""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``uninstall`` sub-command."""
    parser = subparsers.add_parser(
        "uninstall",
        help="delete the agents and wait for every node's reset (the chart's pre-delete hook)",
        description=(
            "Delete the agents' DaemonSet, then wait until every pod of the reset DaemonSet is ready: each node "
            "podpin served has its CPUs and quotas back."
        ),
    )
    parser.add_argument("--namespace", required=True, help="the namespace of both DaemonSets")
    parser.add_argument("--agents", required=True, metavar="NAME", help="the agents' DaemonSet")
    parser.add_argument("--resets", required=True, metavar="NAME", help="the reset DaemonSet")
    parser.add_argument(
        "--timeout", type=float, default=900.0, metavar="SECONDS", help="how long to wait (default: %(default)s)"
    )
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster service account, then KUBECONFIG)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Uninstall; returns the exit status."""
    from agent.kube import KubeConfigError, load_api
    from agent.kube.workloads import WorkloadCalls
    from agent.uninstaller import CANNOT_START, uninstall

    try:
        core = load_api(args.kubeconfig)
    except KubeConfigError as err:
        print(f"podpin uninstall: API server: {err}")
        return CANNOT_START
    return uninstall(
        WorkloadCalls(core.configuration),
        namespace=args.namespace,
        agents=args.agents,
        resets=args.resets,
        timeout=args.timeout,
    )
