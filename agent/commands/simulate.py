"""``podpin simulate``: how many pods fit, and how many CPUs they burn, per container vs pod-level.

Replays a workload (a YAML file or a built-in preset) onto N identical nodes
twice through the real planner: once as users had to write the pods before
pod-level resources (every container Guaranteed, sidecars on whole exclusive
CPUs) and once with a pod budget and shared sidecars (KEP-5526, what podpin
does), and reports both side by side (``agent.sim``).

The nodes default to the built-in 2-socket, 32-CPU example machine (the same
as ``deploy/examples/topology-2s.json``) so a preset gives the same numbers
everywhere; ``--topology FILE`` takes a machine saved with
``podpin topology --output json``. The planner configuration is the agent's
defaults (static CPU policy, pod scope) with ``--policy`` and
``--reserved-cpus`` (kubeReserved cpu) applied, the same for both models.

``--preset gpu`` is a different experiment (``agent/sim/gpu.py``): each of
``--nodes`` nodes (default 500) has one GPU per socket and receives two GPU
pods among CPU-only pods in a seeded random order; the report says how often a
GPU pod's exclusive CPUs sit on its GPU's NUMA node with podpin's device hints
and without them. It takes ``--nodes``, ``--seed``, ``--policy``,
``--reserved-cpus`` and ``--output text|json`` on the built-in machine.

Output: ``text`` (default) or ``json`` on stdout or into a FILE, ``png`` into
a FILE (needs matplotlib). A progress bar goes to stderr when stderr is a
terminal or ``--progress`` is given. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.alloc import OptionsError, PlannerError
from agent.config import ConfigError, config_from_mapping
from agent.sim import (
    PRESETS,
    WorkloadError,
    example_machine,
    load_workload,
    preset,
    render_text,
    scaled,
    simulate,
    simulation_to_dict,
)
from agent.sim.gpu import (
    DEFAULT_TRIALS,
    GPU_PRESET,
    GPU_PRESET_DESCRIPTION,
    gpu_simulation,
    gpu_simulation_to_dict,
    render_gpu_text,
)
from agent.sim.plot import PlotError, render_png
from agent.sim.scheduler import SCHEDULERS, SchedulerName
from agent.topology import Topology, TopologyError
from agent.topology.load import load_topology

__all__ = ["OUTPUTS", "POLICIES", "register", "run"]

OUTPUTS = ("text", "json", "png")
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


class _UsageError(ValueError):
    """A combination of arguments argparse cannot check by itself."""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``simulate`` sub-command."""
    presets = "\n".join(f"  {name:14} {doc.get('description', '')}" for name, doc in PRESETS.items())
    presets += f"\n  {GPU_PRESET:14} {GPU_PRESET_DESCRIPTION}"
    parser = subparsers.add_parser(
        "simulate",
        help="compare per-container and pod-level CPU allocation on a simulated cluster",
        description=(
            "Replay a workload onto N identical nodes through podpin's planner, once per container "
            "(Kubernetes 1.35) and once pod-level (podpin), and compare pods admitted, NUMA alignment and CPUs."
        ),
        epilog=f"presets:\n{presets}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--workload", type=Path, metavar="FILE", help="workload YAML (see docs/benchmarks.md)")
    source.add_argument(
        "--preset", choices=(*PRESETS, GPU_PRESET), metavar="NAME", help="built-in workload: %(choices)s"
    )
    parser.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="every node's topology, JSON from 'podpin topology --output json' (default: the built-in 32-CPU example)",
    )
    parser.add_argument("--nodes", type=int, metavar="N", help="number of identical nodes (default: the workload's)")
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        metavar="N",
        help="the workload times N: every pod count and the node count (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        nargs="+",
        default=["text"],
        metavar=("FORMAT", "FILE"),
        help="text or json (stdout unless FILE is given), or png FILE (default: text)",
    )
    parser.add_argument(
        "--scheduler",
        choices=[name.value for name in SCHEDULERS],
        default=SchedulerName.FIRST_FIT.value,
        help="node choice (default: %(default)s)",
    )
    parser.add_argument(
        "--policy", choices=POLICIES, default="best-effort", help="topologyManagerPolicy (default: %(default)s)"
    )
    parser.add_argument(
        "--reserved-cpus",
        type=int,
        default=1,
        metavar="N",
        help="CPUs reserved per node, kubeReserved cpu (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, metavar="N", help="seed of the arrival interleaving (default: the workload's)"
    )
    parser.add_argument(
        "--progress", action="store_true", help="draw a progress bar on stderr even when it is not a terminal"
    )
    parser.set_defaults(func=run)


def _output(values: list[str]) -> tuple[str, Path | None]:
    """``--output FORMAT [FILE]`` checked: a known format, a FILE for png, at most one FILE."""
    if values[0] not in OUTPUTS:
        raise _UsageError(f"--output: {values[0]!r} is not one of {', '.join(OUTPUTS)}")
    if len(values) > 2:
        raise _UsageError(f"--output: expected FORMAT [FILE], got {' '.join(values)!r}")
    path = Path(values[1]) if len(values) == 2 else None
    if values[0] == "png" and path is None:
        raise _UsageError("--output png needs a FILE to write the picture to")
    return values[0], path


def _topology(path: Path | None) -> Topology:
    return example_machine() if path is None else load_topology(path)


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[], None] | None]:
    """A tqdm bar on stderr (imported only when drawn); yields the per-pod callback, or None."""
    if not show:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc="simulating", unit="pod", file=sys.stderr, leave=False) as bar:

        def advance() -> None:
            bar.update(1)

        yield advance


def _gpu(args: argparse.Namespace, output: str, path: Path | None) -> int:
    """``--preset gpu``: CPUs next to the GPU with and without device hints (``agent/sim/gpu.py``)."""
    if output == "png" or args.topology is not None or args.scale != 1:
        raise _UsageError(
            "--preset gpu: writes text or json on the built-in machine (no png, no --topology, no --scale)"
        )
    config = config_from_mapping(
        {
            "topologyManagerPolicy": args.policy,
            "topologyManagerScope": "pod",
            "kubeReserved": {"cpu": str(args.reserved_cpus)},
        },
        env={},
    )
    sim = gpu_simulation(
        example_machine(),
        config.planner,
        trials=args.nodes if args.nodes is not None else DEFAULT_TRIALS,
        seed=args.seed if args.seed is not None else 0,
    )
    document = json.dumps(gpu_simulation_to_dict(sim), indent=2) + "\n" if output == "json" else render_gpu_text(sim)
    if path is None:
        sys.stdout.write(document)
    else:
        path.write_text(document)
    return 0


def run(args: argparse.Namespace) -> int:
    """Simulate and report; returns the exit status."""
    try:
        output, path = _output(list(args.output))
        if args.nodes is not None and args.nodes < 1:
            raise _UsageError(f"--nodes: {args.nodes} must be at least 1")
        if args.preset == GPU_PRESET:
            return _gpu(args, output, path)
        if args.scale < 1:
            raise _UsageError(f"--scale: {args.scale} must be at least 1")
        workload = load_workload(args.workload) if args.workload is not None else preset(args.preset)
        workload = scaled(workload, args.scale)
        topology = _topology(args.topology)
        config = config_from_mapping(
            {
                "topologyManagerPolicy": args.policy,
                "topologyManagerScope": "pod",
                "kubeReserved": {"cpu": str(args.reserved_cpus)},
            },
            env={},
        )
        show = bool(args.progress) or sys.stderr.isatty()
        with _progress(2 * workload.pod_count, show) as on_pod:
            sim = simulate(
                topology,
                config.planner,
                workload,
                allocatable=config.node_allocatable,
                nodes=args.nodes,
                scheduler=SchedulerName(args.scheduler),
                seed=args.seed,
                on_pod=on_pod,
            )
        if output == "png":
            document = render_png(sim)
        elif output == "json":
            document = (json.dumps(simulation_to_dict(sim), indent=2) + "\n").encode()
        else:
            document = render_text(sim).encode()
        if path is None:
            sys.stdout.write(document.decode())
        else:
            path.write_bytes(document)
    except (_UsageError, WorkloadError, TopologyError, ConfigError, OptionsError, PlannerError, PlotError) as err:
        print(f"podpin simulate: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"podpin simulate: {err.filename}: cannot write: {err.strerror or err}", file=sys.stderr)
        return 2
    return 0
