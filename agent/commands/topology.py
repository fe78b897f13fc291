"""``podpin topology``: print what podpin reads about this machine (or a sysfs copy).

The text form is for an operator checking podpin's view before trusting it;
the JSON form is the contract of ``tests/data/sysfs/README.md`` and what
``podpin plan --topology FILE`` reads back, so a machine can be captured once
and planned against elsewhere; read from this machine's own ``/sys`` it also
holds the ``hostname`` (``podpin plan --output nrt`` names its object after it). Failures print one line
``podpin topology: <path>: <reason>`` on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.topology.codec import topology_to_dict
from agent.topology.load import DEFAULT_SYSFS_ROOT, machine_name
from agent.topology.render import render_text
from agent.topology.sysfs import SysfsError, read_topology

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``topology`` sub-command."""
    parser = subparsers.add_parser(
        "topology",
        help="show the CPU, NUMA and device topology podpin reads from sysfs",
        description="Read the machine's topology from sysfs and print it as text or as JSON.",
    )
    parser.add_argument(
        "--sysfs-root",
        type=Path,
        default=DEFAULT_SYSFS_ROOT,
        metavar="DIR",
        help="sysfs tree to read (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="output format (default: %(default)s)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the topology under ``args.sysfs_root`` and print it; returns the exit status."""
    root: Path = args.sysfs_root
    try:
        topology = read_topology(root)
    except SysfsError as err:
        print(f"podpin topology: {err}", file=sys.stderr)
        return 1
    if args.output == "json":
        # The machine's own /sys also names the machine, so `podpin plan --topology FILE --output nrt` names the
        # NodeResourceTopology after it; a sysfs copy says nothing about whose it was.
        name = machine_name(None, root)
        saved = {"hostname": name} if name is not None else {}
        sys.stdout.write(json.dumps({**saved, **topology_to_dict(topology)}, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(topology))
    return 0
