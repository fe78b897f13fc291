"""``podpin reset``: put back what podpin changed on this node's cgroups — the way out.

Run it on a node once its agent has stopped (uninstall, rollback, or a node
taken out of podpin's care): the QoS levels, pods and containers get every
online CPU (and every memory node) back, and exclusive containers and their
pods the CFS quota their CPU limits give. What to write is decided by the pure
:mod:`agent.restore`; :mod:`agent.resetter` gathers the inputs and writes
through the agent's own ordered writer (parents widened before children, every
value read back). The pods come from the API server (``--kubeconfig``, else
in-cluster) or ``--pods-dir``, as for ``podpin run``; a pod the list does not
know keeps its quotas, and the reset says so. Without any pod list (no API
configuration, an API server out of reach: a broken node, when a reset is
needed most) it still widens every cpuset, leaves every pod's quota as it is,
and says so.

It is idempotent: a second run finds nothing to restore, writes nothing and
says so. ``--dry-run`` prints every write it would make (cgroup, file, old ->
new, whose) and writes nothing.

It refuses to run while a podpin agent holds the node's lock in the state
directory (``agent/agent_lock.py``): the agent would pin again what the reset
widens. ``--wait-for-agent SECONDS`` waits for the agent to stop first (the
uninstall manifest starts the reset, then the DaemonSet is deleted). The reset
holds the lock itself while it works, so no agent starts in the middle.

``--hold`` keeps the lock after the reset until the process is stopped
(SIGTERM): while it holds, no agent can start on the node and pin again, which
is what the uninstall manifest (``deploy/uninstall/uninstall-job.yaml``) uses
between the reset and the deletion of everything podpin.

The checkpoint is kept unless ``--forget-state``: an agent installed again (a
rollback, a re-install) adopts it and puts every running container back on
exactly the CPUs it had, instead of placing the pods afresh; an old checkpoint
is harmless (pods that are gone are released at start). An uninstall passes
``--forget-state`` so nothing of podpin stays in the state directory.

Exit status: 0 everything restored (or nothing to restore); 1 some value could
not be restored (each named on stderr; the checkpoint is then kept); 2 the
reset could not start (configuration, node name, topology, cgroups, an
unreadable ``--pods-dir``); 3 a podpin agent is running on this node.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from agent.topology.load import DEFAULT_SYSFS_ROOT

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``reset`` sub-command."""
    parser = subparsers.add_parser(
        "reset",
        help="undo podpin's changes to this node's cgroups (before uninstalling)",
        description=(
            "Give the QoS levels, pods and containers every online CPU back and restore the CFS quota of "
            "exclusive containers and their pods. Refused while a podpin agent runs on the node."
        ),
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="agent configuration (YAML), as for podpin run")
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster service account, then KUBECONFIG)"
    )
    parser.add_argument(
        "--pods-dir", type=Path, metavar="DIR", help="read pods from manifests in DIR instead of the API server"
    )
    parser.add_argument(
        "--sysfs-root", type=Path, default=DEFAULT_SYSFS_ROOT, metavar="DIR", help="sysfs (default: %(default)s)"
    )
    parser.add_argument(
        "--cgroup-root", type=Path, metavar="DIR", help="cgroup v2 root (default: cgroupRoot, /sys/fs/cgroup)"
    )
    parser.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="podpin's state directory (default: stateDir, /var/lib/podpin)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print every write it would make; write nothing")
    parser.add_argument(
        "--forget-state",
        action="store_true",
        help="also remove podpin's checkpoint (uninstall); by default it is kept for a re-install to adopt",
    )
    parser.add_argument(
        "--wait-for-agent",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for a running podpin agent to stop instead of refusing at once (default: 0)",
    )
    parser.add_argument(
        "--hold",
        action="store_true",
        help="after the reset, keep the node's lock until stopped (SIGTERM) so no podpin agent can start meanwhile",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Reset this node; returns the exit status."""
    # Imported here: the reset may reach the API server, and the Kubernetes client costs every other command
    # (and `podpin --help`) seconds of start-up.
    from agent.config_flags import options_from
    from agent.resetter import ResetOptions, reset_node

    stop = threading.Event()
    if args.hold:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda _signum, _frame: stop.set())
    return reset_node(options_from(args, ResetOptions), stop=stop)
