#!/usr/bin/env python3
"""Admission benchmark: planner latency per pod and a full replan of 110 pods on a 256-CPU, 8-NUMA machine.

Goals (``docs/design.md``, "Performance goals"): median admission <= 1 ms per pod, full replan <= 50 ms.

The node is ``agent.sim.machines.synthetic_machine`` with 2 sockets x 4 NUMA
nodes x 16 cores x 2 threads (256 CPUs), the planner has the agent's defaults
(static CPU policy, best-effort topology manager, pod scope) and one reserved
CPU. The 110 pods are the ``node-110`` workload below (latency-critical mesh
services, databases and ML loaders with sidecars, and Burstable batch pods),
shuffled with a fixed seed, in both models of ``podpin simulate``:
``per-container`` (every container Guaranteed, sidecars on whole CPUs) and
``pod-level`` (pod budget, sidecars in the pod shared pool). All 110 fit in
both models.

* admit: a fresh planner admits the 110 pods one by one; each ``admit`` call is
  timed (``time.perf_counter_ns``); pods are parsed before timing. The
  latency-critical pods (the ones that get CPUs, 33 of 110) are reported apart
  from all pods, because the 77 batch pods are cheap and would hide them in
  the median; the goal applies to the latency-critical pods.
* replan: what the agent does on a restart or resync: a new ``Planner``, admit
  all 110 pods in creation order, then ``plan(pods)`` for the whole node.
* plan: ``plan(pods)`` alone on the full node.

Both models run side by side in one process, alternating every round, so
their ratio holds even when the machine is noisy. ``--json`` prints the same
numbers for machines, ``--check`` exits 1 when a goal is missed, ``--profile N``
prints the N most expensive functions of one replan per model to stderr.

Run: ``.venv/bin/python scripts/bench_admit.py [--rounds 20] [--json] [--check] [--profile 25]``
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # scripts.benchkit, from the checkout

from agent.alloc import Planner
from agent.config import AgentConfig, config_from_mapping
from agent.pods.model import PodView, pod_from_dict
from agent.sim.codec import workload_from_dict
from agent.sim.derive import MODELS, Model, pod_manifest
from agent.sim.machines import synthetic_machine
from agent.sim.workload import Workload, arrivals
from agent.topology.model import Topology
from scripts.benchkit import add_options, emit

GOAL_ADMIT_MS = 1.0
GOAL_REPLAN_MS = 50.0

_ENVOY = {"name": "envoy", "role": "sidecar", "cpu": "300m", "cpuLimit": "1", "memory": "128Mi", "memoryLimit": "256Mi"}
_LOGS = {"name": "logs", "role": "sidecar", "cpu": "100m", "cpuLimit": "500m", "memory": "64Mi", "memoryLimit": "128Mi"}
NODE_110: dict[str, Any] = {
    "name": "node-110",
    "description": "110 pods on one 256-CPU node: 33 latency-critical with sidecars, 77 Burstable batch",
    "seed": 5,
    "order": "shuffle",
    "pods": [
        {
            "name": "mesh",
            "count": 24,
            "containers": [{"name": "app", "role": "main", "cpu": "4", "memory": "4Gi"}, _ENVOY, _LOGS],
        },
        {
            "name": "db",
            "count": 6,
            "containers": [{"name": "db", "role": "main", "cpu": "8", "memory": "32Gi"}, _LOGS, _ENVOY],
        },
        {
            "name": "loader",
            "count": 3,
            "containers": [
                {"name": "loader", "role": "main", "cpu": "12", "memory": "24Gi"},
                {"name": "cache", "role": "sidecar", "native": True, "cpu": "500m", "cpuLimit": "2", "memory": "1Gi"},
                _LOGS,
            ],
        },
        {
            "name": "batch",
            "count": 77,
            "class": "batch",
            "containers": [{"name": "job", "cpu": "500m", "cpuLimit": "2", "memory": "1Gi", "memoryLimit": "2Gi"}],
        },
    ],
}


def machine() -> Topology:
    """The benchmark node: 256 CPUs, 8 NUMA nodes."""
    return synthetic_machine(sockets=2, numa_per_socket=4, cores_per_numa=16, threads=2, memory_gib_per_numa=128)


def planner_config() -> AgentConfig:
    """The agent's defaults with one reserved CPU."""
    return config_from_mapping({"kubeReserved": {"cpu": "1"}}, env={})


def pods_of(workload: Workload, model: Model) -> list[PodView]:
    """The workload's pods in arrival order, parsed."""
    return [pod_from_dict(pod_manifest(workload.pods[a.template], model, a.ordinal)) for a in arrivals(workload)]


def latency_critical(workload: Workload) -> list[bool]:
    """For each pod in arrival order: does it belong to a latency-critical template."""
    return [workload.pods[a.template].pod_class == "latency-critical" for a in arrivals(workload)]


def _ms(ns: float) -> float:
    return ns / 1e6


def admit_round(topology: Topology, config: AgentConfig, pods: list[PodView]) -> tuple[list[int], int]:
    """Admit every pod into a fresh planner; (ns per admit, pods admitted)."""
    planner = Planner(topology, config.planner)
    latencies: list[int] = []
    admitted = 0
    clock = time.perf_counter_ns
    for pod in pods:
        start = clock()
        decision = planner.admit(pod)
        latencies.append(clock() - start)
        admitted += decision.admitted
    return latencies, admitted


def replan(topology: Topology, config: AgentConfig, pods: list[PodView]) -> Planner:
    """A restart's work: new planner, admit all pods, plan the node."""
    planner = Planner(topology, config.planner)
    for pod in pods:
        planner.admit(pod)
    planner.plan(pods)
    return planner


def _timed(action: Callable[..., object], *args: Any) -> int:
    """Nanoseconds one call of ``action(*args)`` takes."""
    start = time.perf_counter_ns()
    action(*args)
    return time.perf_counter_ns() - start


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def run(rounds: int) -> dict[str, Any]:
    """Run every measurement ``rounds`` times, models alternating; the JSON-ready result."""
    topology, config = machine(), planner_config()
    workload = workload_from_dict(NODE_110, "node-110")
    pods = {model: pods_of(workload, model) for model in MODELS}
    critical = latency_critical(workload)
    admits: dict[Model, list[int]] = {m: [] for m in MODELS}
    admits_critical: dict[Model, list[int]] = {m: [] for m in MODELS}
    replans: dict[Model, list[int]] = {m: [] for m in MODELS}
    plans: dict[Model, list[int]] = {m: [] for m in MODELS}
    admitted: dict[Model, int] = {}
    for model in MODELS:  # warm-up: imports, caches, the topology's lookups
        replan(topology, config, pods[model])
    for _ in range(rounds):
        for model in MODELS:
            gc.collect()
            latencies, admitted[model] = admit_round(topology, config, pods[model])
            admits[model].extend(latencies)
            admits_critical[model].extend(ns for ns, lc in zip(latencies, critical, strict=True) if lc)
            replans[model].append(_timed(replan, topology, config, pods[model]))
            full = replan(topology, config, pods[model])
            plans[model].append(_timed(full.plan, pods[model]))
    results: dict[str, Any] = {}
    for model in MODELS:
        results[model] = {
            "pods": len(pods[model]),
            "admitted": admitted[model],
            "latency_critical": sum(critical),
            "admit_ms": {
                "median": _ms(statistics.median(admits_critical[model])),
                "p90": _ms(_percentile(admits_critical[model], 0.90)),
                "p99": _ms(_percentile(admits_critical[model], 0.99)),
                "max": _ms(max(admits_critical[model])),
            },
            "admit_all_pods_ms": {"median": _ms(statistics.median(admits[model])), "max": _ms(max(admits[model]))},
            "replan_ms": {
                "median": _ms(statistics.median(replans[model])),
                "min": _ms(min(replans[model])),
                "max": _ms(max(replans[model])),
            },
            "plan_ms": {"median": _ms(statistics.median(plans[model]))},
        }
    before, after = results["per-container"], results["pod-level"]
    worst_admit = max(r["admit_ms"]["median"] for r in results.values())
    worst_replan = max(r["replan_ms"]["median"] for r in results.values())
    return {
        "machine": _machine_facts(),
        "node": {"cpus": len(topology.online_cpus), "numa_nodes": len(topology.numa_ids), "reserved_cpus": 1},
        "config": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "best-effort", "topologyManagerScope": "pod"},
        "rounds": rounds,
        "results": results,
        "ratios": {
            "admit_median": after["admit_ms"]["median"] / before["admit_ms"]["median"],
            "replan_median": after["replan_ms"]["median"] / before["replan_ms"]["median"],
        },
        "goals": {
            "admit_median_ms": {"goal": GOAL_ADMIT_MS, "worst": worst_admit, "met": worst_admit <= GOAL_ADMIT_MS},
            "replan_median_ms": {"goal": GOAL_REPLAN_MS, "worst": worst_replan, "met": worst_replan <= GOAL_REPLAN_MS},
        },
    }


def _machine_facts() -> dict[str, Any]:
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def render_table(result: dict[str, Any]) -> str:
    """The human table."""
    m, n = result["machine"], result["node"]
    pods = result["results"]["per-container"]["pods"]
    title = f"podpin admission benchmark: {n['cpus']} CPUs, {n['numa_nodes']} NUMA nodes, {pods} pods"
    header = (
        f"{'model':<14} {'admitted':>8} {'admit median':>13} {'p90':>8} {'p99':>8} {'max':>8} "
        f"{'all pods median':>16} {'replan median':>14} {'min':>8} {'plan median':>12}"
    )
    lines = [
        f"{title}, best-effort / pod scope, {result['rounds']} rounds",
        f"machine: {m['cpu']}, {m['cpus']} CPUs, Python {m['python']}",
        "admit = one Planner.admit of a latency-critical pod; all pods = every admit incl. batch;",
        "replan = new Planner + admit all pods + plan(pods); plan = plan(pods) on the full node",
        "",
        header,
    ]
    for model, r in result["results"].items():
        a, p = r["admit_ms"], r["replan_ms"]
        lines.append(
            f"{model:<14} {r['admitted']:>4}/{r['pods']:<3} {a['median']:>10.3f} ms {a['p90']:>5.3f} ms "
            f"{a['p99']:>5.3f} ms {a['max']:>5.2f} ms {r['admit_all_pods_ms']['median']:>13.3f} ms "
            f"{p['median']:>11.2f} ms {p['min']:>5.2f} ms {r['plan_ms']['median']:>9.2f} ms"
        )
    ratios, goals = result["ratios"], result["goals"]
    admit, replan_goal = goals["admit_median_ms"], goals["replan_median_ms"]
    verdict = {True: "met", False: "MISSED"}
    lines += [
        "",
        (
            f"pod-level / per-container: admit median {ratios['admit_median']:.2f}x, "
            f"replan median {ratios['replan_median']:.2f}x"
        ),
        (
            f"goals: admit median <= {GOAL_ADMIT_MS:g} ms: {verdict[admit['met']]} (worst {admit['worst']:.3f} ms); "
            f"replan <= {GOAL_REPLAN_MS:g} ms: {verdict[replan_goal['met']]} (worst {replan_goal['worst']:.2f} ms)"
        ),
    ]
    return "\n".join(lines) + "\n"


def profile(top: int) -> str:
    """cProfile of one replan per model: the ``top`` functions by cumulative time."""
    topology, config = machine(), planner_config()
    workload = workload_from_dict(NODE_110, "node-110")
    out = io.StringIO()
    for model in MODELS:
        pods = pods_of(workload, model)
        replan(topology, config, pods)
        profiler = cProfile.Profile()
        profiler.enable()
        replan(topology, config, pods)
        profiler.disable()
        out.write(f"--- {model}: one replan of {len(pods)} pods ---\n")
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=20, help="repetitions per model (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--profile", type=int, metavar="N", help="print the N most expensive functions to stderr")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = run(1 if args.smoke else args.rounds)
    emit(args, "admit", result)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render_table(result))
    if args.profile:
        sys.stderr.write(profile(args.profile))
    met = all(goal["met"] for goal in result["goals"].values())
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
