"""``podpin plan``: what the agent would do with these pods on this machine (or a saved one).

Pods are admitted in the order given (files in order, documents in order;
multi-document YAML and ``kind: List`` accepted) through the same planner the
agent runs, with the agent's configuration. Rejections are normal outcomes and
are printed with the kubelet's reason and message; a file or pod that cannot be
read is reported on stderr, the other pods are still planned, and the exit
status is 1. Bad configuration or topology: one line on stderr, exit 2.

``--output nrt`` prints, instead of the plan, the NodeResourceTopology object
the node would publish after these pods (``agent.nrt``), named after
``nodeName`` (else this host's name) and without the ownerReference, which
needs the Node's uid.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent.alloc import Decision, MemoryManagerPolicy, OptionsError, Planner, PlannerError
from agent.config import ConfigError, config_from_mapping, load_config
from agent.pods.errors import PodSpecError
from agent.pods.manifests import ManifestError, parse_manifest
from agent.pods.model import PodView, pod_from_dict
from agent.render.plan_json import plan_to_dict
from agent.render.plan_text import render_plan_text
from agent.topology.load import DEFAULT_SYSFS_ROOT, load_topology
from agent.topology.model import TopologyError

__all__ = ["PlanOutput", "register", "run", "read_pods"]


class PlanOutput(StrEnum):
    """``--output``: the plan as text (with a CPU map) or JSON, or the node's NodeResourceTopology."""

    TEXT = "text"
    JSON = "json"
    NRT = "nrt"


#: Without a configuration, plan as a kubelet with this reservation would (the static policy needs one).
_DEFAULT_RESERVATION = "systemReserved cpu=1 (the static policy needs a CPU reservation)"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``plan`` sub-command."""
    parser = subparsers.add_parser(
        "plan",
        help="show how podpin would place these pods",
        description="Admit pod manifests in order through podpin's planner and show the resulting CPU placement.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--topology", type=Path, metavar="FILE", help="topology JSON from 'podpin topology --output json'"
    )
    source.add_argument(
        "--sysfs-root",
        type=Path,
        default=DEFAULT_SYSFS_ROOT,
        metavar="DIR",
        help="sysfs tree to read (default: %(default)s)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="agent configuration (default: the defaults with systemReserved cpu=1)",
    )
    parser.add_argument(
        "--output",
        choices=[output.value for output in PlanOutput],
        default=PlanOutput.TEXT.value,
        help="the plan as text or json, or nrt: the NodeResourceTopology the node would publish (default: %(default)s)",
    )
    parser.add_argument("pods", nargs="+", type=Path, metavar="POD.yaml", help="pod manifests, admitted in this order")
    parser.set_defaults(func=run)


def read_pods(paths: list[Path]) -> tuple[list[PodView], list[dict[str, str]]]:
    """Every pod of the files in order, and the problems found (file, pod, error)."""
    pods: list[PodView] = []
    problems: list[dict[str, str]] = []
    for path in paths:
        try:
            raw_pods = parse_manifest(str(path), path.read_bytes())
        except OSError as err:
            problems.append({"file": str(path), "pod": "", "error": f"cannot read: {err.strerror or err}"})
            continue
        except ManifestError as err:
            problems.append({"file": str(path), "pod": "", "error": err.problem})
            continue
        if not raw_pods:
            problems.append({"file": str(path), "pod": "", "error": "holds no Pod"})
        for index, raw in enumerate(raw_pods):
            try:
                pods.append(pod_from_dict(raw))
            except PodSpecError as err:
                metadata: Any = raw.get("metadata") if isinstance(raw, dict) else None
                name = metadata.get("name") if isinstance(metadata, dict) else None
                problems.append({"file": str(path), "pod": str(name or f"#{index + 1}"), "error": str(err)})
    return pods, problems


def run(args: argparse.Namespace) -> int:
    """Plan the pods and print the result; returns the exit status."""
    try:
        if args.config is None:
            print(f"podpin plan: no --config: planning with the defaults and {_DEFAULT_RESERVATION}", file=sys.stderr)
            config = config_from_mapping({"systemReserved": {"cpu": "1"}})
        else:
            config = load_config(args.config)
        topology = load_topology(args.topology, args.sysfs_root)
        planner = Planner(topology, config.planner)
    except (ConfigError, TopologyError, PlannerError, OptionsError) as err:
        print(f"podpin plan: {err}", file=sys.stderr)
        return 2
    pods, problems = read_pods(list(args.pods))
    decisions: dict[str, Decision] = {}
    for pod in pods:
        decisions[pod.uid] = planner.admit(pod)
    plan = planner.plan(pods, decisions)
    for problem in problems:
        where = problem["file"] + (f": pod {problem['pod']}" if problem["pod"] else "")
        print(f"podpin plan: {where}: {problem['error']}", file=sys.stderr)
    if args.output == PlanOutput.NRT:
        from agent.nrt import attributes_of, node_resource_topology, occupancy_of

        obj = node_resource_topology(
            node_name=config.node_name or socket.gethostname(),
            topology=topology,
            occupancy=occupancy_of(topology, config.planner, planner.snapshot()),
            attributes=attributes_of(config.planner),
        )
        sys.stdout.write(json.dumps(obj, indent=2) + "\n")
    elif args.output == PlanOutput.JSON:
        document = plan_to_dict(plan)
        if problems:
            document["errors"] = problems
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(
            render_plan_text(
                plan, topology, show_mems=config.planner.memory_manager_policy == MemoryManagerPolicy.STATIC
            )
        )
    return 1 if problems else 0
