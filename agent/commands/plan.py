"""``podpin plan``: what the agent would do with these pods on this machine (or a saved one).

Pods are admitted in creation order through the same planner the agent runs,
with the agent's configuration: by ``metadata.creationTimestamp`` where given
(pods without one first, as the agent orders them), ties in the order given
(files in order, documents in order; multi-document YAML and ``kind: List``
accepted; ``-`` reads standard input). The pod templates of Deployments, ReplicaSets, StatefulSets,
DaemonSets, Jobs and CronJobs count as pods (one per workload, or up to
``--replicas N``; ``agent/pods/manifests.py``). Rejections are normal outcomes
and are printed with the kubelet's reason and message.

Exit status: 0 planned; 1 a file or pod could not be read (reported on stderr,
the other pods are still planned); 2 bad configuration or topology, or an
``--explain`` that names no single pod (one line on stderr); 3 with
``--fail-on-reject``, some pod was rejected (for CI: a manifest change that
would leave a pod unpinned fails the build). When both 1 and 3 apply the
status is 1: the answer is incomplete.

``--explain POD`` (``namespace/name``, a name only one pod has, or a file given
on the command line that holds one pod) admits every pod as usual but prints,
instead of the plan, the walk-through of that pod's admission: its request,
the hints, the merge, the chosen NUMA nodes and why, the CPUs taken
(``agent/render/explain.py``).

``--devices FILE`` names the devices each container holds, as the kubelet's
PodResources API would (the file format: ``agent/podresources/devices_file.py``);
the device manager's hints then take part in each pod's merge, as they do on a
node, and the plan shows each container's devices and whether its CPUs sit on
their NUMA nodes. The devices the file names stand for the node's (a file
error, or an entry naming a container its planned pod lacks, is exit status 2).

``--output nrt`` prints, instead of the plan, the NodeResourceTopology object
the node would publish after these pods (``agent.nrt``), named after
``nodeName``, else the machine the topology describes (the ``hostname`` of a
``--topology`` file, this host for its own ``/sys``; exit status 2 when neither
says), and without the ownerReference, which needs the Node's uid.
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent.alloc import (
    AllocatableDevices,
    Decision,
    DeviceAssignments,
    MemoryManagerPolicy,
    OptionsError,
    Planner,
    PlannerError,
    PodDevices,
)
from agent.config import ConfigError, load_config
from agent.podresources import DevicesFileError, load_devices
from agent.pods import PodSpecError, PodView, pod_from_dict
from agent.pods.manifests import MAX_MANIFEST_BYTES, ManifestError, parse_manifest
from agent.render import plan_to_dict, pod_to_dict, render_plan_text
from agent.render.explain import explain_text, explain_to_dict
from agent.topology import TopologyError
from agent.topology.load import DEFAULT_SYSFS_ROOT, load_topology, machine_name

__all__ = ["STDIN", "PlanOutput", "devices_without_container", "find_pod", "read_pods", "register", "run"]


class PlanOutput(StrEnum):
    """``--output``: the plan as text (with a CPU map) or JSON, or the node's NodeResourceTopology."""

    TEXT = "text"
    JSON = "json"
    NRT = "nrt"


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
        help="agent configuration (default: the built-in defaults, which reserve one CPU)",
    )
    parser.add_argument(
        "--output",
        choices=[output.value for output in PlanOutput],
        default=PlanOutput.TEXT.value,
        help="the plan as text or json, or nrt: the NodeResourceTopology the node would publish (default: %(default)s)",
    )
    parser.add_argument(
        "--replicas",
        type=_positive_int,
        default=1,
        metavar="N",
        help="pods per workload: its spec.replicas (a Job's parallelism) capped at N (default: %(default)s)",
    )
    parser.add_argument(
        "--fail-on-reject", action="store_true", help="exit with status 3 when any pod is rejected (for CI)"
    )
    parser.add_argument(
        "--explain",
        metavar="POD",
        help="walk through one pod's admission instead of printing the plan: namespace/name, or a file holding one pod",
    )
    parser.add_argument(
        "--devices",
        type=Path,
        metavar="FILE",
        help="the devices each container holds (as the kubelet's PodResources API says): aligns CPUs to them",
    )
    parser.add_argument(
        "pods",
        nargs="+",
        type=Path,
        metavar="POD.yaml",
        help="pod or workload manifests, admitted in creation order; - reads standard input",
    )
    parser.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


#: The file name that stands for standard input (``kubectl get pod NAME -o yaml | podpin plan -``).
STDIN = Path("-")


def _manifest_bytes(path: Path) -> bytes:
    """The file's bytes, or standard input's for ``-`` (one byte more than a manifest may hold, at most)."""
    if path == STDIN:
        return sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
    return path.read_bytes()


def read_pods(paths: list[Path], *, replicas: int = 1) -> tuple[list[tuple[PodView, Path]], list[dict[str, str]]]:
    """Every pod with the file it came from, in creation order (ties in file order), and the problems found.

    The path ``-`` reads standard input (YAML or JSON, as kubectl prints pods).
    """
    pods: list[tuple[PodView, Path]] = []
    problems: list[dict[str, str]] = []
    for path in paths:
        try:
            raw_pods = parse_manifest(str(path), _manifest_bytes(path), workload_replicas=replicas)
        except OSError as err:
            problems.append({"file": str(path), "pod": "", "error": f"cannot read: {err.strerror or err}"})
            continue
        except ManifestError as err:
            problems.append({"file": str(path), "pod": "", "error": err.problem})
            continue
        if not raw_pods:
            problems.append({"file": str(path), "pod": "", "error": "holds no Pod and no workload"})
        for index, raw in enumerate(raw_pods):
            try:
                pods.append((pod_from_dict(raw), path))
            except PodSpecError as err:
                metadata: Any = raw.get("metadata") if isinstance(raw, dict) else None
                name = metadata.get("name") if isinstance(metadata, dict) else None
                problems.append({"file": str(path), "pod": str(name or f"#{index + 1}"), "error": str(err)})
    # A stable sort: equal timestamps (and pods without one, first, as the agent orders them) keep the file order.
    return sorted(pods, key=lambda found: found[0].creation_timestamp or ""), problems


def find_pod(wanted: str, pods: list[tuple[PodView, Path]]) -> PodView:
    """The one pod ``--explain`` names: ``namespace/name``, a name only one pod has, or a file holding one pod.

    Raises:
        ValueError: no pod, or more than one, matches (the message lists the candidates).
    """
    by_file = [pod for pod, path in pods if str(path) == wanted]
    if by_file:
        candidates = by_file
        what = f"the file {wanted} holds"
    elif "/" in wanted:
        candidates = [pod for pod, _ in pods if pod.full_name == wanted]
        what = "the pods are"
    else:
        candidates = [pod for pod, _ in pods if pod.name == wanted]
        what = "the pods are"
    if len(candidates) == 1:
        return candidates[0]
    names = ", ".join(pod.full_name for pod in (candidates or [pod for pod, _ in pods])) or "none"
    count = "no pod" if not candidates else f"{len(candidates)} pods"
    raise ValueError(f"--explain {wanted}: {count} match; name one as namespace/name ({what}: {names})")


def _pod_devices(
    assignments: DeviceAssignments | None, node: AllocatableDevices | None, pod: PodView
) -> PodDevices | None:
    """The pod's devices from the ``--devices`` facts; None when there are none or it holds none."""
    if assignments is None:
        return None
    devices = PodDevices.of(assignments, pod.namespace, pod.name, node)
    return devices if devices.containers else None


def devices_without_container(assignments: DeviceAssignments, pods: list[PodView]) -> list[str]:
    """The ``--devices`` entries that name a container their pod does not have, as sentences.

    An entry for a pod that is not planned stands for devices the node's other pods hold (as PodResources lists
    every pod); an entry for a planned pod must name one of its containers, or its devices would silently count
    for nobody.
    """
    by_name = {(pod.namespace, pod.name): pod for pod in pods}
    problems = []
    for key in assignments.containers:
        pod = by_name.get((key.namespace, key.pod))
        if pod is None:
            continue
        names = [c.name for c in (*pod.init_containers, *pod.containers)]
        if key.container not in names:
            problems.append(
                f"pod {key.namespace}/{key.pod} has no container {key.container!r} (its containers: {', '.join(names)})"
            )
    return problems


def run(args: argparse.Namespace) -> int:
    """Plan the pods and print the result; returns the exit status."""
    try:
        config = load_config(args.config)
        for assumption in config.assumed:
            print(f"podpin plan: assumed {assumption}", file=sys.stderr)
        topology = load_topology(args.topology, args.sysfs_root)
        planner = Planner(topology, config.planner)
        assignments = load_devices(args.devices) if args.devices is not None else None
    except (ConfigError, TopologyError, PlannerError, OptionsError, DevicesFileError) as err:
        print(f"podpin plan: {err}", file=sys.stderr)
        return 2
    found, problems = read_pods(list(args.pods), replicas=args.replicas)
    pods = [pod for pod, _ in found]
    strays = devices_without_container(assignments, pods) if assignments is not None else []
    if strays:
        print(f"podpin plan: {args.devices}: {'; '.join(strays)}", file=sys.stderr)
        return 2
    try:
        target = find_pod(args.explain, found) if args.explain is not None else None
    except ValueError as err:
        print(f"podpin plan: {err}", file=sys.stderr)
        return 2
    node_devices = AllocatableDevices.known_from(assignments) if assignments is not None else None
    decisions: dict[str, Decision] = {}
    for pod in pods:
        decisions[pod.uid] = planner.admit(
            pod,
            explain=target is not None and pod.uid == target.uid,
            devices=_pod_devices(assignments, node_devices, pod),
        )
    plan = planner.plan(pods, decisions)
    for problem in problems:
        where = problem["file"] + (f": pod {problem['pod']}" if problem["pod"] else "")
        print(f"podpin plan: {where}: {problem['error']}", file=sys.stderr)
    trace = decisions[target.uid].trace if target is not None else None
    if target is not None and trace is not None:
        pod_plan = plan.pod(target.uid)
        if args.output == PlanOutput.JSON:
            explained = {"pod": pod_to_dict(pod_plan), "explain": explain_to_dict(trace, pod_plan)}
            sys.stdout.write(json.dumps(explained, indent=2) + "\n")
        else:
            sys.stdout.write(explain_text(trace, pod_plan))
    elif args.output == PlanOutput.NRT:
        from agent.nrt import attributes_of, node_resource_topology, occupancy_of

        try:
            node_name = config.node_name or machine_name(args.topology, args.sysfs_root)
        except TopologyError as err:
            print(f"podpin plan: {err}", file=sys.stderr)
            return 2
        if node_name is None:
            print(
                f"podpin plan: --output nrt: {args.topology or args.sysfs_root} does not say which machine it is "
                "(saved without a hostname, or a sysfs copy): set nodeName in --config to name the "
                "NodeResourceTopology",
                file=sys.stderr,
            )
            return 2
        obj = node_resource_topology(
            node_name=node_name,
            topology=topology,
            occupancy=occupancy_of(topology, config.planner, planner.snapshot()),
            attributes=attributes_of(config.planner),
            devices=node_devices,
            assignments=assignments,
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
    if problems:
        return 1
    rejected = any(not decision.admitted for decision in decisions.values())
    return 3 if args.fail_on_reject and rejected else 0
